"""The profile actor: lifecycle in ``base``, operations in one mixin module per area."""

from raymem.actors.profile.actor import ProfileActor
from raymem.actors.profile.base import ProcessStats, profile_path

__all__ = ["ProcessStats", "ProfileActor", "profile_path"]
