"""After an erasure: the copies of a profile in object storage that may hold the erased text go.

Snapshots copy the file and ledger segments copy its ledger: those made before an
erasure hold the text it removed. ``replace_older_copies`` first uploads a
snapshot of the redacted file (so a restore always has one to start from), then
deletes every older snapshot, every ledger segment up to the new snapshot's seq,
multipart uploads left unfinished and, in a versioned bucket, the older versions of
the profile's objects. Ledger entries after the new snapshot are shipped from the
redacted ledger; the caller holds shipping while this runs
(``LedgerShipper.restart_from``).
"""

import logging

from raymem.export.ledger import list_segments
from raymem.export.objectstore import ObjectStore
from raymem.export.snapshot import SnapshotManifest, prune_snapshots, take_snapshot
from raymem.store import ProfileStore

log = logging.getLogger(__name__)


async def replace_older_copies(
    store: ProfileStore, object_store: ObjectStore, tenant: str, profile: str
) -> SnapshotManifest:
    """Snapshot the profile, then delete every copy in object storage older than the snapshot.

    Returns:
        The manifest of the snapshot that is now the profile's only one.
    """
    manifest = await take_snapshot(store, object_store, tenant, profile, retention=1)
    # take_snapshot prunes only when it uploads; an existing snapshot of this seq is newer
    # than the erasure (which logged an entry), and older ones may remain beside it.
    await prune_snapshots(object_store, tenant, profile, keep=1)
    segments = [
        segment.key
        for segment in await list_segments(object_store, tenant, profile)
        if segment.first_seq <= manifest.ledger_seq
    ]
    if segments:
        await object_store.delete(*segments)
    prefix = object_store.key(tenant, profile) + "/"
    uploads = await object_store.abort_uploads(prefix)
    versions = await object_store.delete_old_versions(prefix)
    log.info(
        "%s/%s: older copies replaced by the snapshot at ledger seq %d"
        " (%d segments, %d unfinished uploads, %d old versions deleted)",
        tenant,
        profile,
        manifest.ledger_seq,
        len(segments),
        uploads,
        versions,
    )
    return manifest
