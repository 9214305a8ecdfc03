"""A profile actor's durability operations: snapshot, import, export, and deleting it all."""

import logging
import shutil
import time
from collections.abc import AsyncIterator

import msgspec

from raymem import export
from raymem.actors.profile.base import ProfileBase, entry
from raymem.errors import ProfileClosing
from raymem.export.snapshot import snapshot_key
from raymem.types import ArchiveCounts, ImportResult, SnapshotResult

log = logging.getLogger(__name__)


class ArchiveOperations(ProfileBase):
    @entry
    async def snapshot(self) -> SnapshotResult:
        manifest = await self._durability.snapshot()
        assert self._durability.object_store is not None
        key = snapshot_key(
            self._durability.object_store, self.tenant, self.profile, manifest.ledger_seq
        )
        return SnapshotResult(key=key, ledger_seq=manifest.ledger_seq)

    @entry
    async def import_archive(self, archive: bytes) -> ImportResult:
        """Load a JSON Lines archive (gzipped or not) into this new or empty profile."""
        try:
            header = await export.import_archive(self._open_store, archive, profile=self.profile)
        except Exception:
            await self._discard_if_empty()  # a failed import into a new profile leaves none
            raise
        await self._after_write()
        counts = ArchiveCounts(**msgspec.structs.asdict(header.counts))
        return ImportResult(profile=self.profile, ledger_seq=header.ledger_seq, counts=counts)

    async def export_chunks(self) -> AsyncIterator[bytes]:
        """The profile as JSON Lines chunks, one consistent point in time (streamed by callers)."""
        if self._closing:
            raise ProfileClosing(self.name)
        self._inflight += 1  # an export in progress keeps the profile awake
        try:
            await self._ensure_open()
            async for chunk in export.iter_archive(self._open_store, profile=self.profile):
                self._last_used = time.monotonic()
                yield chunk
        finally:
            self._inflight -= 1

    async def _discard_if_empty(self) -> None:
        async with self._open_store.write() as writer:
            empty = await writer.is_empty()  # nothing at all, not even a ledger entry
        if empty:
            log.info("profile %s: discarding the empty profile of a failed import", self.name)
            await self.destroy()

    async def destroy(self) -> None:
        """Delete the profile's data and leave the host; the name is free for a new profile."""
        self._closing = True
        await self._stop_work()  # a running dream stops before its files go
        await self._durability.destroy()  # stops shipping and snapshots first
        if self._store is not None:
            await self._store.close()
        await self._leave_catalog()
        shutil.rmtree(self.path.parent, ignore_errors=True)
        self._leave_host()
