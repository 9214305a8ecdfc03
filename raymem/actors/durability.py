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
  changes, and when it hibernates.
"""

import asyncio
import contextlib
import functools
import logging
from pathlib import Path

from raymem.config import ObjectStoreSettings, Settings
from raymem.errors import RaymemError
from raymem.export import LedgerShipper, ObjectStore, SnapshotManifest, checkpoint, open_restored
from raymem.store import ProfileStore

log = logging.getLogger(__name__)


class ObjectStorageNotConfigured(RaymemError):
    status = 409
    code = "object_storage_not_configured"

    def __init__(self, what: str) -> None:
        super().__init__(what)

    def __str__(self) -> str:
        return f"{self.args[0]} needs object storage: set [object_store] bucket (RAYMEM_OBJECT_STORE_BUCKET)"


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

    async def open(self, path: Path, *, dim: int, embedder: str) -> ProfileStore:
        """Open the profile's store, restored from object storage where that holds more."""
        if self.object_store is None:
            self._store = await ProfileStore.open(path, dim=dim, embedder=embedder)
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

    async def snapshot_if_changed(self) -> None:
        assert self._store is not None
        if await self._store.reads.ledger_seq() != self._snapshot_seq:
            await self.snapshot()

    async def _snapshot_periodically(self) -> None:
        assert self._store is not None
        while True:
            await asyncio.sleep(self.settings.snapshot_interval_s)
            try:
                await self.snapshot_if_changed()
            except Exception:  # the ledger still holds everything; the next round retries
                log.exception("periodic snapshot of %s/%s failed", self.tenant, self.profile)

    async def close(self) -> None:
        """Before hibernation: ship what is left and snapshot. Errors propagate (stay awake)."""
        if self._snapshots is not None:
            self._snapshots.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._snapshots
            self._snapshots = None
        if self._shipper is not None:
            await self._shipper.close()
        if self._store is not None and self.object_store is not None:
            await self.snapshot_if_changed()

    async def resume(self) -> None:
        """Hibernation failed: keep serving, shipping and snapshotting as before."""
        if self.object_store is not None and self._store is not None and self._snapshots is None:
            self._snapshots = asyncio.create_task(self._snapshot_periodically())
        if self._shipper is not None and self.settings.mode == "shipped":
            await self._shipper.start(background=True)

    async def destroy(self) -> None:
        """Delete everything object storage holds for this profile."""
        if self._snapshots is not None:
            self._snapshots.cancel()
        if self.object_store is None:
            return
        prefix = self.object_store.key(self.tenant, self.profile) + "/"
        keys = [item.key for item in await self.object_store.list(prefix)]
        if keys:
            await self.object_store.delete(*keys)
