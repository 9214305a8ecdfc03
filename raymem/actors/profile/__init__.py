"""A profile: lifecycle in ``base``, operations in one mixin module per area, run in a host."""

from raymem.actors.layout import profile_path
from raymem.actors.profile.actor import ProfileActor
from raymem.actors.profile.base import HostLink

__all__ = ["HostLink", "ProfileActor", "profile_path"]
