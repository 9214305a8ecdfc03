"""Restore on activation, and checkpoints: the two ends of a profile's life in object storage."""

import logging
from pathlib import Path
from typing import Literal

import msgspec

from raymem.export.ledger import LedgerGap, prune_segments, replay_ledger
from raymem.export.objectstore import ObjectStore
from raymem.export.snapshot import (
    DEFAULT_RETENTION,
    SnapshotManifest,
    list_snapshots,
    restore_latest,
    take_snapshot,
)
from raymem.store import ProfileStore

log = logging.getLogger(__name__)


class RestoreReport(msgspec.Struct, frozen=True, kw_only=True):
    """How a store was brought up to date on activation."""

    source: Literal["local", "snapshot", "ledger"]  # what the replay started from
    snapshot_seq: int | None  # the ledger seq of the snapshot restored, if one was
    replayed: int  # ledger entries applied from shipped segments
    ledger_seq: int  # the store's ledger seq once open


async def open_restored(
    path: str | Path,
    *,
    dim: int,
    embedder: str = "",
    object_store: ObjectStore,
    tenant: str,
    profile: str,
) -> tuple[ProfileStore, RestoreReport]:
    """Open a profile's store after restoring what object storage holds beyond the local file.

    - The local file exists: segments newer than its ledger are replayed onto
      it; if they do not continue it (it is older than the oldest kept segment),
      or the newest snapshot holds more, the latest snapshot replaces it first.
    - It does not: the latest valid snapshot is restored (a corrupt one is
      skipped for the previous one), then newer segments are replayed. With no
      snapshot, the segments are replayed onto a new store.

    Nothing is served from a half-restored file: snapshots are renamed into
    place only once verified, and each segment is applied in one transaction.

    Raises:
        SnapshotError: snapshots exist but none is usable.
        LedgerGap: the segments do not continue the newest usable snapshot.
    """
    path = Path(path)
    snapshot_seq = None
    source: Literal["local", "snapshot", "ledger"] = "local"
    if not path.exists():
        manifest = await restore_latest(object_store, tenant, profile, path)
        snapshot_seq = None if manifest is None else manifest.ledger_seq
        source = "ledger" if manifest is None else "snapshot"
    store = await ProfileStore.open(path, dim=dim, embedder=embedder)
    try:
        if source == "local":
            await _refuse_older_than_newest_snapshot(store, object_store, tenant, profile)
        replayed = await replay_ledger(store, object_store, tenant, profile)
    except LedgerGap:
        await store.close()
        if source != "local":
            raise
        log.warning(
            "local copy of %s/%s is older than its shipped ledger; restoring a snapshot",
            tenant,
            profile,
        )
        manifest = await restore_latest(object_store, tenant, profile, path)
        if manifest is None:
            raise
        snapshot_seq, source = manifest.ledger_seq, "snapshot"
        store = await ProfileStore.open(path, dim=dim, embedder=embedder)
        try:
            replayed = await replay_ledger(store, object_store, tenant, profile)
        except BaseException:
            await store.close()
            raise
    except BaseException:
        await store.close()
        raise
    report = RestoreReport(
        source=source,
        snapshot_seq=snapshot_seq,
        replayed=replayed,
        ledger_seq=await store.reads.ledger_seq(),
    )
    if source != "local" or replayed:
        log.info("activated %s/%s: %s", tenant, profile, report)
    return store, report


async def _refuse_older_than_newest_snapshot(
    store: ProfileStore, object_store: ObjectStore, tenant: str, profile: str
) -> None:
    """Raise LedgerGap when the newest snapshot holds more than the local file.

    The segments alone do not tell: after an erasure, object storage keeps one
    snapshot and only the segments after it, which may be none. A copy left on a
    node the profile has since moved from must not be served, nor keep what an
    erasure removed.
    """
    snapshots = await list_snapshots(object_store, tenant, profile)
    local = await store.reads.ledger_seq()
    if snapshots and snapshots[0].ledger_seq > local:
        raise LedgerGap(
            f"Local copy of {tenant}/{profile} holds seqs up to {local}; the newest"
            f" snapshot holds {snapshots[0].ledger_seq}"
        )


async def checkpoint(
    store: ProfileStore,
    object_store: ObjectStore,
    tenant: str,
    profile: str,
    *,
    retention: int = DEFAULT_RETENTION,
) -> SnapshotManifest:
    """Snapshot a profile, keep the ``retention`` newest snapshots, and drop covered segments.

    Segments are kept back to the oldest kept snapshot, so that each kept
    snapshot can still be brought up to date if a newer one turns out corrupt.
    """
    manifest = await take_snapshot(store, object_store, tenant, profile, retention=retention)
    kept = await list_snapshots(object_store, tenant, profile)
    if kept:
        await prune_segments(object_store, tenant, profile, upto_seq=kept[-1].ledger_seq)
    return manifest
