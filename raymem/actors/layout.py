"""Where a profile's file lives under ``data_dir``: ``<tenant>/<profile>/profile.db``."""

import logging
from pathlib import Path

from raymem.config import Settings
from raymem.store import checkpoint

log = logging.getLogger(__name__)

PROFILE_FILE = "profile.db"


def profile_path(settings: Settings, tenant: str, profile: str) -> Path:
    """The SQLite file of a profile on this node."""
    return Path(settings.data_dir) / tenant / profile / PROFILE_FILE


def checkpoint_profiles(settings: Settings) -> None:
    """Fold each profile's write-ahead log into its ``profile.db`` (after a stop, when no
    host holds the files), so copying ``profile.db`` alone copies every acknowledged write."""
    for path in sorted(Path(settings.data_dir).glob(f"*/*/{PROFILE_FILE}")):
        try:
            if not checkpoint(path):
                log.warning("%s is still in use: its write-ahead log stays beside it", path)
        except Exception:  # one unreadable file must not keep the others from it
            log.exception("cannot checkpoint %s", path)
