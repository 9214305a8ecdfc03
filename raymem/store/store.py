"""ProfileStore: one profile's SQLite file with FTS5, sqlite-vec, version chains and a ledger.

The store owns three connections to the file: a writer (behind an
``asyncio.Lock``, since async actor calls interleave at every await), an async
reader for reads that may scan (``reads``), and a blocking reader for recall's
microsecond lookups (``search``). In WAL mode readers never see half a write.
This package imports no Ray.
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiosqlite

from raymem.store import schema
from raymem.store.connection import CHECKPOINT, Error, open_connection, open_sync
from raymem.store.reads import Reads
from raymem.store.schema import VECTOR_SOURCES
from raymem.store.search import Search
from raymem.store.vector_index import CachedIndex
from raymem.store.writer import StoreWriter, fetch

log = logging.getLogger(__name__)

# Closing waits up to 20 x 50 ms for a reader on another thread before it gives up
# folding the write-ahead log into the file (SQLite recovers the log on the next open).
CLOSE_CHECKPOINT_TRIES = 20
CLOSE_CHECKPOINT_WAIT_S = 0.05


class ProfileStore:
    """One profile's SQLite file: messages, memories, indexes, sessions and the ledger.

    ``reads`` and ``search`` read it; ``write()`` opens a transaction.
    """

    def __init__(
        self, path: Path, writer: aiosqlite.Connection, reader: aiosqlite.Connection, dim: int
    ) -> None:
        self.path = path
        self.dim = dim
        self._writer, self._reader = writer, reader
        self._quick: Any = open_sync(path)
        self._write_lock = asyncio.Lock()
        self._closed = False
        self._vector_indexes = {table: CachedIndex(path, table, dim) for table in VECTOR_SOURCES}
        self.reads = Reads(reader)
        self.search = Search(self._quick, self._vector_indexes)

    @classmethod
    async def open(cls, path: str | Path, *, dim: int, embedder: str = "") -> "ProfileStore":
        """Open (creating if needed) the store at ``path`` for embeddings of ``dim`` dimensions.

        ``embedder`` names the model that makes the vectors (empty: unknown); see
        ``schema.follow_embedder`` for what happens when it changes.

        Raises:
            ValueError: the file was made for embeddings of another dimension.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = await open_connection(path)
        try:
            await schema.migrate(writer, dim=dim, embedder=embedder)
            await schema.check_dimension(writer, path, dim)
            await schema.follow_embedder(writer, path, embedder)
            reader = await open_connection(path, read_only=True)
        except BaseException:
            await writer.close()
            raise
        return cls(path, writer, reader, dim)

    @property
    def quick(self) -> Any:
        """The blocking read-only connection, for subsystems' short indexed lookups."""
        return self._quick

    async def close(self) -> None:
        """Close the file, its write-ahead log folded in: the ``.db`` file alone is whole.

        Closing a closed store does nothing.
        """
        async with self._write_lock:
            if self._closed:
                return
            self._closed = True
            self._quick.close()
            await self._reader.close()
            try:
                await self._checkpoint_when_unread()
            finally:
                await self._writer.close()

    async def _checkpoint_when_unread(self) -> None:
        """Fold the log into the file, waiting a little for readers on threads of their
        own (a vector index being read in) that still hold an older state."""
        for _ in range(CLOSE_CHECKPOINT_TRIES):
            busy = (await fetch(self._writer, CHECKPOINT))[0][0]
            if not busy:
                return
            await asyncio.sleep(CLOSE_CHECKPOINT_WAIT_S)
        log.warning("%s: a reader kept its write-ahead log from being folded in", self.path)

    @property
    def reader(self) -> aiosqlite.Connection:
        """The async read-only connection, for the reads of subsystems with tables of their own."""
        return self._reader

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[StoreWriter]:
        """One transaction: everything written inside commits together or not at all."""
        async with self._write_lock:
            try:
                await self._writer.execute("BEGIN IMMEDIATE")
                writer = StoreWriter(self._writer)
                yield writer
            except BaseException:
                await self._rollback()
                raise
            await self._writer.execute("COMMIT")
            for change in writer.vector_changes:  # no await between commit and here
                self._vector_indexes[change.table].apply(change)

    async def _rollback(self) -> None:
        """Roll back, also when a cancellation interrupted the wait for ``BEGIN``.

        The connection's thread runs ``BEGIN`` even when the task awaiting it was
        cancelled; the ``ROLLBACK`` queued after it ends that transaction, so the next
        write does not fail with "cannot start a transaction within a transaction".
        """
        with contextlib.suppress(Error):  # BEGIN itself failed: no transaction to end
            await self._writer.execute("ROLLBACK")

    async def truncate_wal(self) -> bool:
        """Copy the write-ahead log into the file and truncate the log to zero bytes.

        A commit leaves the page images it replaced in the log until a checkpoint
        resets it; an erasure calls this once committed, so that no old image of an
        erased text stays there. Waits for readers up to the connection's busy
        timeout; returns False when one still reads an older state (a long export):
        call again later.
        """
        async with self._write_lock:
            busy = (await fetch(self._writer, "PRAGMA wal_checkpoint(TRUNCATE)"))[0][0]
        return not busy

    async def warm_vector_indexes(self) -> None:
        """Read the vector tables into memory now, so the first recall does not wait for it."""
        for cached in self._vector_indexes.values():
            await cached.get()
