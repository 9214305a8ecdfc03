"""Object storage, snapshots, ledger shipping, restore on activation and JSON Lines archives.

No Ray imports: the profile actor and the CLI call these functions.
"""

from raymem.export.archive import (
    ArchiveError,
    ProfileNotEmpty,
    export_archive,
    import_archive,
    iter_archive,
)
from raymem.export.erasure import replace_older_copies
from raymem.export.ledger import (
    LedgerGap,
    LedgerShipper,
    list_segments,
    prune_segments,
    replay_ledger,
    ship_ledger,
)
from raymem.export.objectstore import ObjectNotFound, ObjectStore, parse_s3_url
from raymem.export.restore import RestoreReport, checkpoint, open_restored
from raymem.export.snapshot import (
    DEFAULT_RETENTION,
    SnapshotError,
    SnapshotManifest,
    list_snapshots,
    prune_snapshots,
    restore_latest,
    take_snapshot,
)
from raymem.export.tables import Header

__all__ = [
    "DEFAULT_RETENTION",
    "ArchiveError",
    "Header",
    "LedgerGap",
    "LedgerShipper",
    "ObjectNotFound",
    "ObjectStore",
    "ProfileNotEmpty",
    "RestoreReport",
    "SnapshotError",
    "SnapshotManifest",
    "checkpoint",
    "export_archive",
    "import_archive",
    "iter_archive",
    "list_segments",
    "list_snapshots",
    "open_restored",
    "parse_s3_url",
    "prune_segments",
    "prune_snapshots",
    "replace_older_copies",
    "replay_ledger",
    "restore_latest",
    "ship_ledger",
    "take_snapshot",
]
