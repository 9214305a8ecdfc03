"""Where a profile's file lives under ``data_dir``: ``<tenant>/<profile>/profile.db``.

On a cluster every node has a ``data_dir`` of its own (its local disk). Several
raylets on one machine (tests, a workstation) each need a directory of their own:
``RAYMEM_NODE_DATA_DIR``, set in a node's environment, overrides ``data_dir`` for
everything that node opens. Each ``data_dir`` carries a ``.disk`` file with a random
id, so the catalog can tell which copy of a profile's file a node holds, even when
a node restarts with a new Ray node id on the same disk.
"""

import logging
import os
import shutil
import uuid
from pathlib import Path

import msgspec

from raymem.config import Settings
from raymem.names import NAME
from raymem.store import checkpoint

log = logging.getLogger(__name__)

PROFILE_FILE = "profile.db"
NODE_DATA_DIR_ENV = "RAYMEM_NODE_DATA_DIR"
DISK_FILE = ".disk"  # a dot: never a tenant's name


def on_this_node(settings: Settings) -> Settings:
    """``settings`` with this node's ``data_dir`` (``RAYMEM_NODE_DATA_DIR`` when set)."""
    node_dir = os.environ.get(NODE_DATA_DIR_ENV)
    if not node_dir or node_dir == settings.data_dir:
        return settings
    return msgspec.structs.replace(settings, data_dir=node_dir)


def disk_id(settings: Settings) -> str:
    """The id of this ``data_dir`` (created on first use): which disk a profile's file is on."""
    path = Path(settings.data_dir) / DISK_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        created = uuid.uuid4().hex
        try:
            with open(path, "x") as file:  # two processes racing: the first one wins
                file.write(created)
            return created
        except FileExistsError:
            return path.read_text().strip()


def profile_path(settings: Settings, tenant: str, profile: str) -> Path:
    """The SQLite file of a profile on this node."""
    return Path(settings.data_dir) / tenant / profile / PROFILE_FILE


def local_profiles(settings: Settings) -> set[tuple[str, str]]:
    """The (tenant, profile) of every profile file under this node's ``data_dir``."""
    found = set()
    for db in Path(settings.data_dir).glob(f"*/*/{PROFILE_FILE}"):
        tenant, profile = db.parent.parent.name, db.parent.name
        if NAME.fullmatch(tenant) and NAME.fullmatch(profile):
            found.add((tenant, profile))
    return found


def remove_local_copy(settings: Settings, tenant: str, profile: str) -> bool:
    """Delete this node's copy of a profile (its directory: the file, its logs, a dream's
    candidate); whether there was one.

    For a copy left behind when the profile moved to another node: object storage
    holds everything it held, and what was written since.
    """
    directory = profile_path(settings, tenant, profile).parent
    existed = directory.exists()
    shutil.rmtree(directory, ignore_errors=True)
    return existed


def checkpoint_profiles(settings: Settings) -> None:
    """Fold each profile's write-ahead log into its ``profile.db`` (after a stop, when no
    host holds the files), so copying ``profile.db`` alone copies every acknowledged write."""
    for path in sorted(Path(settings.data_dir).glob(f"*/*/{PROFILE_FILE}")):
        try:
            if not checkpoint(path):
                log.warning("%s is still in use: its write-ahead log stays beside it", path)
        except Exception:  # one unreadable file must not keep the others from it
            log.exception("cannot checkpoint %s", path)
