"""Where a profile's file lives under ``data_dir``: ``<tenant>/<profile>/profile.db``."""

from pathlib import Path

from raymem.config import Settings

PROFILE_FILE = "profile.db"


def profile_path(settings: Settings, tenant: str, profile: str) -> Path:
    """The SQLite file of a profile on this node."""
    return Path(settings.data_dir) / tenant / profile / PROFILE_FILE
