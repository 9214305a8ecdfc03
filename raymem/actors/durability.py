"""A profile's durability beyond its local file: restore, ledger shipping and snapshots.

The profile actor owns one ``Durability``. Without object storage it only opens
the local file (``local`` durability: acknowledged writes survive a process
crash, since every commit is synced to disk). With object storage:

- on activation the store is restored from the latest snapshot plus newer
  ledger segments when the local file is missing or behind;
- ``shipped`` (the default) uploads committed ledger entries in the background
  within about ``ship_interval_s``; ``replicated`` uploads them before the write
  is acknowledged;
- snapshots are taken on demand, every ``snapshot_interval_s`` while the profile
  changes, and when it hibernates;
- after an erasure, the old copies go: the write-ahead log is emptied and, with
  object storage, a new snapshot replaces every older snapshot and segment
  (``remove_erased_copies``), retried at activation, each snapshot round and
  hibernation until it succeeds.
"""

import asyncio
import contextlib
import functools
import logging
from pathlib import Path

from raymem.config import ObjectStoreSettings, Settings
from raymem.errors import RaymemError
from raymem.export import (
    LedgerShipper,
    ObjectStore,
    SnapshotManifest,
    checkpoint,
    open_restored,
    replace_older_copies,
)
from raymem.store import ProfileStore, erase

log = logging.getLogger(__name__)


class ObjectStorageNotConfigured(RaymemError):
    status = 409
    code = "object_storage_not_configured"

    def __init__(self, what: str) -> None:
        super().__init__(what)

    def __str__(self) -> str:
        return f"{self.args[0]} needs object storage: set [object_store] bucket (RAYMEM_OBJECT_STORE_BUCKET)"


class OldCopiesRemain(Exception):
    """An erasure committed, but copies made before it could not all be removed yet."""


@functools.cache
def shared_object_store(settings: ObjectStoreSettings) -> ObjectStore | None:
    """One object store client per process and configuration: a host holds many profiles,
    and a boto3 client of its own per open profile would cost memory and start-up time."""
    return ObjectStore.from_settings(settings)


class Durability:
    """Restore, shipping and snapshots for one profile; inert without object storage."""

    def __init__(self, settings: Settings, tenant: str, profile: str) -> None:
        self.settings = settings.durability
        self.tenant, self.profile = tenant, profile
        self.object_store = shared_object_store(settings.object_store)
        self._store: ProfileStore | None = None
        self._shipper: LedgerShipper | None = None
        self._snapshots: asyncio.Task[None] | None = None
        self._snapshot_seq = -1
        # Snapshots, and the removal of the copies an erasure left, one at a time: a
        # snapshot of the file before the erasure must not land after that removal.
        self._copies_lock = asyncio.Lock()

    async def open(self, path: Path, *, dim: int, embedder: str) -> ProfileStore:
        """Open the profile's store, restored from object storage where that holds more."""
        if self.object_store is None:
            self._store = await ProfileStore.open(path, dim=dim, embedder=embedder)
            await self._remove_erased_copies_or_log()  # an erasure cut short by a crash
            return self._store
        store, _ = await open_restored(
            path,
            dim=dim,
            embedder=embedder,
            object_store=self.object_store,
            tenant=self.tenant,
            profile=self.profile,
        )
        self._store = store
        if self.settings.mode != "local":
            self._shipper = LedgerShipper(
                store,
                self.object_store,
                self.tenant,
                self.profile,
                interval_s=self.settings.ship_interval_s,
            )
            await self._shipper.start(background=self.settings.mode == "shipped")
        self._snapshots = asyncio.create_task(self._snapshot_periodically())
        return store

    async def after_write(self) -> None:
        """Called once a write has committed, before it is acknowledged."""
        if self._shipper is None:
            return
        if self.settings.mode == "replicated":
            await self._shipper.flush()  # raises: the caller sees the failure and may retry
        else:
            self._shipper.notify()

    async def snapshot(self) -> SnapshotManifest:
        """Take a snapshot now.

        Raises:
            ObjectStorageNotConfigured: there is no object storage to write to.
        """
        if self.object_store is None or self._store is None:
            raise ObjectStorageNotConfigured("A snapshot")
        async with self._copies_lock:
            if self._shipper is not None:
                await self._shipper.flush()
            manifest = await checkpoint(
                self._store,
                self.object_store,
                self.tenant,
                self.profile,
                retention=self.settings.snapshot_retention,
            )
        self._snapshot_seq = manifest.ledger_seq
        return manifest

    async def remove_erased_copies(self) -> None:
        """After an erasure has committed: remove the copies made before it.

        Empties the file's write-ahead log and, with object storage, replaces every
        snapshot and ledger segment by a new snapshot of the redacted file. Does
        nothing when no erasure waits for it.

        Raises:
            OldCopiesRemain: the log is still read by an older transaction (an export
                in progress), or object storage failed; calling again finishes it.
        """
        assert self._store is not None
        store = self._store
        async with store.write() as writer:
            pending = await erase.pending_seq(writer)
        if pending is None:
            return
        async with self._copies_lock:
            if not await store.truncate_wal():
                raise OldCopiesRemain(
                    "the file's write-ahead log is still read by an older transaction"
                )
            upto = pending
            if self.object_store is not None:
                try:
                    upto = await self._replace_older_copies(store, self.object_store)
                except Exception as exc:
                    raise OldCopiesRemain(f"object storage: {exc}") from exc
                self._snapshot_seq = upto
        async with store.write() as writer:
            await erase.clear_pending(writer, upto_seq=upto)

    async def _replace_older_copies(self, store: ProfileStore, object_store: ObjectStore) -> int:
        async def replace() -> int:
            manifest = await replace_older_copies(store, object_store, self.tenant, self.profile)
            return manifest.ledger_seq

        if self._shipper is None:
            return await replace()
        return await self._shipper.restart_from(replace)

    async def _remove_erased_copies_or_log(self) -> None:
        try:
            await self.remove_erased_copies()
        except Exception:  # the next round, activation or erasure retries
            log.warning(
                "%s/%s: copies made before an erasure remain for now",
                self.tenant,
                self.profile,
                exc_info=True,
            )

    async def snapshot_if_changed(self) -> None:
        assert self._store is not None
        if await self._store.reads.ledger_seq() != self._snapshot_seq:
            await self.snapshot()

    async def _snapshot_periodically(self) -> None:
        assert self._store is not None
        await self._remove_erased_copies_or_log()  # an erasure cut short by a crash
        while True:
            await asyncio.sleep(self.settings.snapshot_interval_s)
            await self._remove_erased_copies_or_log()
            try:
                await self.snapshot_if_changed()
            except Exception:  # the ledger still holds everything; the next round retries
                log.exception("periodic snapshot of %s/%s failed", self.tenant, self.profile)

    async def close(self) -> None:
        """Before hibernation: ship what is left and snapshot. Errors propagate (stay awake)."""
        await self._stop_snapshots()
        if self._shipper is not None:
            await self._shipper.close()
        if self._store is not None:
            await self.remove_erased_copies()
        if self._store is not None and self.object_store is not None:
            await self.snapshot_if_changed()

    async def _stop_snapshots(self) -> None:
        """Cancel the periodic snapshots once no snapshot is being uploaded.

        A cancelled upload's thread would carry on and could land a copy from before
        an erasure after that erasure removed the older copies.
        """
        async with self._copies_lock:
            if self._snapshots is not None:
                self._snapshots.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._snapshots
                self._snapshots = None

    async def resume(self) -> None:
        """Hibernation failed: keep serving, shipping and snapshotting as before."""
        if self.object_store is not None and self._store is not None and self._snapshots is None:
            self._snapshots = asyncio.create_task(self._snapshot_periodically())
        if self._shipper is not None and self.settings.mode == "shipped":
            await self._shipper.start(background=True)

    async def destroy(self) -> None:
        """Stop shipping and snapshots, and delete everything object storage holds for this profile.

        Uploads in progress are waited for rather than cancelled (their threads would
        carry on and land after the deletion); unfinished multipart uploads are
        aborted, and in a versioned bucket the older versions are deleted too.
        """
        await self._stop_snapshots()
        async with self._copies_lock:
            if self._shipper is not None:
                await self._shipper.stop()
            if self.object_store is None:
                return
            prefix = self.object_store.key(self.tenant, self.profile) + "/"
            keys = [item.key for item in await self.object_store.list(prefix)]
            if keys:
                await self.object_store.delete(*keys)
            await self.object_store.abort_uploads(prefix)
            await self.object_store.delete_old_versions(prefix)
