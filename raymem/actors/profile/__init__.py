"""The profile actor: lifecycle in ``base``, operations in one mixin module per area."""

from raymem.actors.layout import profile_path
from raymem.actors.profile.actor import ProfileActor
from raymem.actors.profile.base import ProcessStats

__all__ = ["ProcessStats", "ProfileActor", "profile_path"]
