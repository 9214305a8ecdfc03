"""ProfileStore: one profile's SQLite file with FTS5, sqlite-vec, version chains and a ledger.

One writer connection (behind an ``asyncio.Lock``, since async actor calls
interleave at every await) and one reader connection: in WAL mode readers
never see half a write. This module imports no Ray.
"""

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import aiosqlite
import msgspec
import numpy as np

from raymem.errors import MemoryNotFound, SessionNotFound
from raymem.store.connection import open_connection, open_sync
from raymem.store.vector_index import CachedIndex, VectorChange
from raymem.types import Memory, ProfileInfo, Session, StoredMessage

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
COMMON_TERMS_TTL_S = 300.0  # how long a term found in many rows is taken to stay so
COMMON_TERMS_KEPT = 10_000
# A turn's vector also holds the start of the turns before it in its session.
# On LoCoMo turn-level any@10: none .836, one .843, two .849. The first 200
# characters of each do as well as 300 (.856 / .855) and keep long turns cheap.
CONTEXT_TURNS = 2
CONTEXT_CHARS = 200

# Forward migrations: MIGRATIONS[v] takes a store at version v to v + 1.
MIGRATIONS: dict[int, str] = {}

MEMORY_COLUMNS = (
    "seq, id, type, content, topic_key, event_time, importance, confidence, session_id, "
    "source_message_ids, created_at, superseded_by, forgotten_at"
)
MESSAGE_COLUMNS = "seq, id, session_id, role, content, created_at"


def utc_now() -> datetime:
    return datetime.now(UTC)


def to_db_time(moment: datetime) -> str:
    """UTC ISO 8601 with microseconds: sorts as text in time order. Naive times are UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def from_db_time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def message_id(session_id: str, role: str, content: str) -> str:
    """Content-addressed message id: the first 128 bits of SHA-256, as hex."""
    digest = hashlib.sha256()
    for part in (session_id, role, content):
        data = part.encode()
        digest.update(len(data).to_bytes(8, "big"))  # length-prefixed: no ambiguous joins
        digest.update(data)
    return digest.hexdigest()[:32]


def content_hash(content: str) -> str:
    """Hash of the normalised content (case and whitespace folded), for duplicate detection."""
    normalised = " ".join(content.lower().split()).rstrip(".!")
    return hashlib.sha256(normalised.encode()).hexdigest()[:32]


class NewMessage(msgspec.Struct, kw_only=True):
    id: str
    session_id: str
    role: str
    content: str
    created_at: str


class NewMemory(msgspec.Struct, kw_only=True):
    id: str
    type: str
    content: str
    topic_key: str | None = None
    event_time: str | None = None
    importance: float = 0.5
    confidence: float = 1.0
    session_id: str | None = None
    source_message_ids: list[str] = []
    source_spans: list[tuple[int, int]] = []
    search_queries: list[str] = []
    created_at: str


def _memory_from_row(row: Sequence[Any]) -> Memory:
    return Memory(
        id=row[1],
        type=row[2],
        content=row[3],
        topic_key=row[4],
        event_time=row[5],
        importance=row[6],
        confidence=row[7],
        session_id=row[8],
        source_message_ids=json.loads(row[9]),
        created_at=datetime.fromisoformat(row[10]),
        superseded_by=row[11],
        forgotten_at=from_db_time(row[12]),
    )


def _message_from_row(row: Sequence[Any]) -> StoredMessage:
    return StoredMessage(
        id=row[1],
        session_id=row[2],
        role=row[3],
        content=row[4],
        created_at=datetime.fromisoformat(row[5]),
    )


async def _rows(conn: aiosqlite.Connection, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    """Run a query and fetch every row in one step on the connection's thread.

    A statement left open across an ``await`` would pin the connection's read
    snapshot while other coroutines use it, so that a reader misses writes
    committed since; fetching in one step finishes the statement at once.
    """
    return list(await conn.execute_fetchall(sql, params))


def _qualified(columns: str, alias: str) -> str:
    """A column list with a table alias: ("seq, id", "m") -> "m.seq, m.id"."""
    return ", ".join(f"{alias}.{column}" for column in columns.split(", "))


def _placeholders(count: int) -> str:
    return ",".join("?" * count)


def _vector_blob(vector: Sequence[float] | np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


class StoreWriter:
    """The writes of one transaction; obtained from ``ProfileStore.write()``."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn
        # What this transaction did to the vector tables, for the in-memory indexes.
        self.vector_changes: list[VectorChange] = []

    async def log(self, op: str, payload: Any, *, at: str | None = None) -> int:
        cursor = await self._conn.execute(
            "INSERT INTO ledger (at, op, payload) VALUES (?, ?, ?)",
            (at or to_db_time(utc_now()), op, msgspec.json.encode(payload).decode()),
        )
        return int(cursor.lastrowid or 0)

    async def insert_messages(self, messages: Sequence[NewMessage]) -> list[NewMessage]:
        """Insert turns, ignoring ones already stored; returns those that are new."""
        if not messages:
            return []
        ids = [m.id for m in messages]
        existing = await self.existing_message_ids(ids)
        new = [m for m in messages if m.id not in existing]
        new = list({m.id: m for m in new}.values())  # the same turn twice in one request
        if not new:
            return []
        ingested_at = to_db_time(utc_now())
        await self._conn.executemany(
            "INSERT OR IGNORE INTO messages (id, session_id, role, content, created_at, ingested_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(m.id, m.session_id, m.role, m.content, m.created_at, ingested_at) for m in new],
        )
        for session_id in {m.session_id for m in new}:
            first = min(m.created_at for m in new if m.session_id == session_id)
            await self._conn.execute(
                "INSERT INTO sessions (id, started_at) VALUES (?, ?) ON CONFLICT (id) DO UPDATE"
                " SET started_at = min(started_at, excluded.started_at)",
                (session_id, first),
            )
        await self.log("messages", new, at=ingested_at)  # replay restores ingested_at from it
        return new

    async def existing_message_ids(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            sql = f"SELECT id FROM messages WHERE id IN ({_placeholders(len(chunk))})"
            found.update(row[0] for row in await _rows(self._conn, sql, chunk))
        return found

    async def mark_extracted(self, message_ids: Sequence[str], *, log: bool = True) -> None:
        if not message_ids:
            return
        await self._conn.executemany(
            "UPDATE messages SET extracted = 1 WHERE id = ?", [(i,) for i in message_ids]
        )
        if log:
            await self.log("extracted", {"ids": list(message_ids)})

    async def current_by_hash(self, hashes: Iterable[str]) -> dict[str, str]:
        """Current (not superseded or forgotten) memories by content hash: hash -> id."""
        hashes = list(set(hashes))
        if not hashes:
            return {}
        sql = (
            f"SELECT content_hash, id FROM memories WHERE content_hash IN"
            f" ({_placeholders(len(hashes))}) AND superseded_by IS NULL AND forgotten_at IS NULL"
        )
        return {row[0]: row[1] for row in await _rows(self._conn, sql, hashes)}

    async def current_by_topic(self, topic_keys: Iterable[str]) -> dict[str, str]:
        """The head of each topic key's version chain: topic_key -> id."""
        keys = list(set(topic_keys))
        if not keys:
            return {}
        sql = (
            f"SELECT topic_key, id FROM memories WHERE topic_key IN ({_placeholders(len(keys))})"
            " AND superseded_by IS NULL AND forgotten_at IS NULL ORDER BY seq"
        )
        return {row[0]: row[1] for row in await _rows(self._conn, sql, keys)}

    async def insert_memory(self, memory: NewMemory, supersedes: str | None = None) -> None:
        """Insert one memory; when it supersedes another, link the old head to it."""
        await self._conn.execute(
            "INSERT INTO memories (id, type, content, content_hash, topic_key, event_time,"
            " importance, confidence, session_id, source_message_ids, source_spans,"
            " search_queries, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                memory.id,
                memory.type,
                memory.content,
                content_hash(memory.content),
                memory.topic_key,
                memory.event_time,
                memory.importance,
                memory.confidence,
                memory.session_id,
                json.dumps(memory.source_message_ids),
                json.dumps(memory.source_spans),
                "\n".join(memory.search_queries),
                memory.created_at,
            ),
        )
        await self.log("memory", memory)
        if supersedes is not None:
            await self._conn.execute(
                "UPDATE memories SET superseded_by = ? WHERE id = ? AND superseded_by IS NULL",
                (memory.id, supersedes),
            )
            await self._delete_vector(supersedes)
            await self.log("supersede", {"old": supersedes, "new": memory.id})

    async def forget(self, memory_id: str) -> bool:
        """Mark a memory forgotten; False when it is unknown."""
        rows = await _rows(
            self._conn, "SELECT forgotten_at FROM memories WHERE id = ?", (memory_id,)
        )
        if not rows:
            return False
        if rows[0][0] is None:
            at = to_db_time(utc_now())
            await self._conn.execute(
                "UPDATE memories SET forgotten_at = ? WHERE id = ?", (at, memory_id)
            )
            await self._delete_vector(memory_id)
            await self.log("forget", {"id": memory_id, "at": at})
        return True

    async def _delete_vector(self, memory_id: str) -> None:
        await self._delete_vectors(
            "memory_vectors", "SELECT seq FROM memories WHERE id = ?", (memory_id,)
        )

    async def _delete_vectors(self, table: str, seqs_sql: str, params: Sequence[Any]) -> None:
        """Delete the vectors of the rows that ``seqs_sql`` selects."""
        seqs = [row[0] for row in await _rows(self._conn, seqs_sql, params)]
        if not seqs:
            return
        for first in range(0, len(seqs), 500):
            batch = seqs[first : first + 500]
            await self._conn.execute(
                f"DELETE FROM {table} WHERE rowid IN ({_placeholders(len(batch))})", batch
            )
        self.vector_changes.append(VectorChange("remove", table, seqs))

    async def end_session(self, session_id: str) -> None:
        at = to_db_time(utc_now())
        await self._conn.execute(
            "UPDATE sessions SET ended_at = coalesce(ended_at, ?), consolidated_at = ?"
            " WHERE id = ?",
            (at, at, session_id),
        )
        await self.log("session_end", {"id": session_id, "at": at})

    async def delete_session(self, session_id: str) -> tuple[int, int]:
        """Delete a session's turns and forget the memories derived from it.

        Returns (messages deleted, memories forgotten); (0, 0) for an unknown session.
        """
        at = to_db_time(utc_now())
        counts = await self._delete_session(session_id, at)
        if counts != (0, 0):
            await self.log("session_delete", {"id": session_id, "at": at})
        return counts

    async def _delete_session(self, session_id: str, at: str) -> tuple[int, int]:
        await self._delete_vectors(
            "message_vectors", "SELECT seq FROM messages WHERE session_id = ?", (session_id,)
        )
        deleted = await self._conn.execute(
            "DELETE FROM messages WHERE session_id = ?", (session_id,)
        )
        await self._delete_vectors(
            "memory_vectors",
            "SELECT seq FROM memories WHERE session_id = ? AND forgotten_at IS NULL",
            (session_id,),
        )
        forgotten = await self._conn.execute(
            "UPDATE memories SET forgotten_at = ? WHERE session_id = ? AND forgotten_at IS NULL",
            (at, session_id),
        )
        removed = await self._conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        if deleted.rowcount == 0 and forgotten.rowcount == 0 and removed.rowcount == 0:
            return 0, 0
        return deleted.rowcount, forgotten.rowcount

    async def purge_messages(self, before: str) -> int:
        """Retention: delete raw turns stored before ``before``; memories derived from them stay.

        Age counts from when raymem received a turn (``ingested_at``), not from its
        message time: importing last year's conversation today keeps it for the
        whole retention period.
        """
        count = await self._purge_messages(before)
        if count:
            await self.log("purge", {"before": before, "count": count})
        return count

    async def _purge_messages(self, before: str) -> int:
        await self._delete_vectors(
            "message_vectors", "SELECT seq FROM messages WHERE ingested_at < ?", (before,)
        )
        cursor = await self._conn.execute("DELETE FROM messages WHERE ingested_at < ?", (before,))
        return int(cursor.rowcount)

    async def set_vectors(
        self, table: str, rows: Sequence[tuple[int, Sequence[float] | np.ndarray]]
    ) -> None:
        """Store embeddings for memories or messages and mark them vectorised."""
        source = {"memory_vectors": "memories", "message_vectors": "messages"}[table]
        if source == "memories":
            # A memory superseded or forgotten while it was being embedded gets no vector.
            seqs = [seq for seq, _ in rows]
            sql = (
                f"SELECT seq FROM memories WHERE seq IN ({_placeholders(len(seqs))})"
                " AND superseded_by IS NULL AND forgotten_at IS NULL"
            )
            live = {row[0] for row in await _rows(self._conn, sql, seqs)}
            rows = [(seq, vec) for seq, vec in rows if seq in live]
        if not rows:
            return
        # vec0 ignores OR REPLACE: a row the background vectoriser and an ingest both
        # embedded would fail the second insert, so an existing vector is deleted first.
        await self._conn.executemany(
            f"DELETE FROM {table} WHERE rowid = ?", [(seq,) for seq, _ in rows]
        )
        await self._conn.executemany(
            f"INSERT INTO {table} (rowid, embedding) VALUES (?, ?)",
            [(seq, _vector_blob(vec)) for seq, vec in rows],
        )
        await self._conn.executemany(
            f"UPDATE {source} SET vectorised = 1 WHERE seq = ?", [(seq,) for seq, _ in rows]
        )
        vectors = np.stack([np.asarray(vec, dtype=np.float32) for _, vec in rows])
        self.vector_changes.append(VectorChange("upsert", table, [s for s, _ in rows], vectors))

    # ------------------------------------------- restore: import and ledger replay

    async def is_empty(self) -> bool:
        """True when the profile holds no session, message, memory or ledger entry."""
        sql = (
            "SELECT EXISTS (SELECT 1 FROM sessions) OR EXISTS (SELECT 1 FROM messages)"
            " OR EXISTS (SELECT 1 FROM memories) OR EXISTS (SELECT 1 FROM ledger)"
        )
        return not (await _rows(self._conn, sql))[0][0]

    async def restore_rows(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert whole rows as exported (archive import, ledger replay); known ids are skipped.

        Rows carry the columns of ``RESTORE_COLUMNS[table]``; list columns (source
        ids and spans, search queries) as lists. The content hash is derived here;
        vectors are not part of a row: the rows are left to be vectorised.

        Raises:
            ValueError: an unknown table.
        """
        columns = RESTORE_COLUMNS.get(table)
        if columns is None:
            raise ValueError(f"Cannot restore rows of table {table!r}")
        if not rows:
            return
        values = [tuple(_restore_value(column, row) for column in columns) for row in rows]
        names = list(columns)
        if table == "memories":
            names.append("content_hash")
            values = [
                (*value, content_hash(row["content"]))
                for value, row in zip(values, rows, strict=True)
            ]
        await self._conn.executemany(
            f"INSERT OR IGNORE INTO {table} ({', '.join(names)})"
            f" VALUES ({_placeholders(len(names))})",
            values,
        )

    async def append_ledger(self, seq: int, at: str, op: str, payload: str) -> None:
        """Write a ledger entry under a given seq (replay, import); later entries follow it."""
        await self._conn.execute(
            "INSERT INTO ledger (seq, at, op, payload) VALUES (?, ?, ?, ?)",
            (seq, at, op, payload),
        )

    async def replay(self, seq: int, at: str, op: str, payload: str) -> bool:
        """Apply one ledger entry of another copy of this profile, and log it under its seq.

        Idempotent: an entry at or below the local ledger seq is skipped, so
        replaying the same entries twice changes nothing. Returns whether it applied.

        Raises:
            ValueError: an op this version cannot replay.
        """
        if seq <= (await _rows(self._conn, "SELECT coalesce(max(seq), 0) FROM ledger"))[0][0]:
            return False
        data = json.loads(payload)
        if op == "messages":
            await self._replay_messages(data, at)
        elif op == "memory":
            await self.restore_rows("memories", [data])
        elif op == "supersede":
            await self._conn.execute(
                "UPDATE memories SET superseded_by = ? WHERE id = ? AND superseded_by IS NULL",
                (data["new"], data["old"]),
            )
            await self._delete_vector(data["old"])
        elif op == "forget":
            await self._conn.execute(
                "UPDATE memories SET forgotten_at = ? WHERE id = ? AND forgotten_at IS NULL",
                (data["at"], data["id"]),
            )
            await self._delete_vector(data["id"])
        elif op == "session_end":
            await self._conn.execute(
                "UPDATE sessions SET ended_at = coalesce(ended_at, ?), consolidated_at = ?"
                " WHERE id = ?",
                (data["at"], data["at"], data["id"]),
            )
            # consolidate_session marks the session's turns extracted in the same transaction.
            await self._conn.execute(
                "UPDATE messages SET extracted = 1 WHERE session_id = ?", (data["id"],)
            )
        elif op == "extracted":
            await self.mark_extracted(data["ids"], log=False)
        elif op == "import":
            for table in ("sessions", "messages", "memories"):
                await self.restore_rows(table, data.get(table, []))
        elif op == "session_delete":
            await self._delete_session(data["id"], data["at"])
        elif op == "purge":
            await self._purge_messages(data["before"])
        else:
            raise ValueError(f"Cannot replay ledger op {op!r} (seq {seq})")
        await self.append_ledger(seq, at, op, payload)
        return True

    async def _replay_messages(self, messages: list[dict[str, Any]], at: str) -> None:
        rows = [
            {**m, "ingested_at": at, "extracted": REPLAYED_MESSAGES_EXTRACTED} for m in messages
        ]
        await self.restore_rows("messages", rows)
        await self._conn.executemany(
            "INSERT INTO sessions (id, started_at) VALUES (?, ?) ON CONFLICT (id) DO UPDATE"
            " SET started_at = min(started_at, excluded.started_at)",
            [(m["session_id"], m["created_at"]) for m in messages],
        )


class ProfileStore:
    """One profile's SQLite file: messages, memories, indexes, sessions and the ledger."""

    def __init__(
        self,
        path: Path,
        writer: aiosqlite.Connection,
        reader: aiosqlite.Connection,
        dim: int,
        quick_reader: Any,
    ) -> None:
        self.path = path
        self.dim = dim
        self._writer, self._reader = writer, reader
        # Recall's statements are indexed lookups of tens of microseconds: a hop to the
        # async connection's thread and back costs several times that, so they run on
        # this blocking connection, on the event loop's thread (see ``_fetch_quick``).
        self._quick = quick_reader
        self._commits = 0  # transactions committed through ``write`` since opening
        self._latest_activity: tuple[int, datetime | None] = (-1, None)  # (at commits, value)
        self._write_lock = asyncio.Lock()
        self._common_terms: dict[tuple[str, str], tuple[int, float]] = {}  # see term_counts
        self._vector_indexes = {
            table: CachedIndex(path, table, dim) for table in ("memory_vectors", "message_vectors")
        }

    @classmethod
    async def open(cls, path: str | Path, *, dim: int, embedder: str = "") -> "ProfileStore":
        """Open (creating if needed) the store at ``path`` for embeddings of ``dim`` dimensions.

        ``embedder`` names the model that makes the vectors (empty: unknown). When a
        store made by another model is opened, its vectors cannot be compared with
        the new model's, so they are dropped and every row is embedded again by the
        background vectoriser; a change of precision only (``model@bfloat16``) keeps them.

        Raises:
            ValueError: the file was made for embeddings of another dimension.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = await open_connection(path)
        try:
            await cls._migrate(writer, dim=dim, embedder=embedder)
            row = next(iter(await _rows(writer, "SELECT value FROM meta WHERE key = 'dim'")), None)
            stored_dim = int(row[0])
            if stored_dim != dim:
                raise ValueError(
                    f"Store {str(path)!r} holds {stored_dim}-d vectors; the embedder makes {dim}-d"
                )
            if embedder:
                await cls._follow_embedder(writer, path, embedder)
            reader = await open_connection(path, read_only=True)
        except BaseException:
            await writer.close()
            raise
        return cls(path, writer, reader, dim, open_sync(path))

    @staticmethod
    async def _follow_embedder(conn: aiosqlite.Connection, path: Path, embedder: str) -> None:
        """Record ``embedder``; if the vectors were made by another model, queue them all again."""
        rows = await _rows(conn, "SELECT value FROM meta WHERE key = 'embedder'")
        stored = rows[0][0] if rows else ""
        if stored == embedder:
            return
        await conn.execute("BEGIN IMMEDIATE")
        try:
            if stored and stored.split("@")[0] != embedder.split("@")[0]:
                log.warning(
                    "store %s: vectors were made by %s, the embedder is now %s;"
                    " embedding everything again",
                    path,
                    stored,
                    embedder,
                )
                for table, source in (
                    ("memory_vectors", "memories"),
                    ("message_vectors", "messages"),
                ):
                    await conn.execute(f"DELETE FROM {table}")
                    await conn.execute(f"UPDATE {source} SET vectorised = 0 WHERE vectorised = 1")
            await conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('embedder', ?)", (embedder,)
            )
        except BaseException:
            await conn.execute("ROLLBACK")
            raise
        await conn.execute("COMMIT")

    @staticmethod
    async def _migrate(conn: aiosqlite.Connection, *, dim: int, embedder: str) -> None:
        version = (await _rows(conn, "PRAGMA user_version"))[0][0]
        if version == 0:
            schema = resources.files("raymem.store").joinpath("schema.sql").read_text()
            script = schema.replace("{dim}", str(int(dim)))
            await conn.executescript(
                f"BEGIN IMMEDIATE;\n{script}\n"
                f"INSERT INTO meta (key, value) VALUES ('dim', '{int(dim)}');\n"
                f"PRAGMA user_version = {SCHEMA_VERSION};\nCOMMIT;"
            )
            await conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('embedder', ?)", (embedder,)
            )
            return
        while version < SCHEMA_VERSION:
            await conn.executescript(
                f"BEGIN IMMEDIATE;\n{MIGRATIONS[version]}\n"
                f"PRAGMA user_version = {version + 1};\nCOMMIT;"
            )
            version += 1

    async def close(self) -> None:
        async with self._write_lock:
            self._quick.close()
            await self._reader.close()
            await self._writer.close()

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[StoreWriter]:
        """One transaction: everything written inside commits together or not at all."""
        async with self._write_lock:
            await self._writer.execute("BEGIN IMMEDIATE")
            writer = StoreWriter(self._writer)
            try:
                yield writer
            except BaseException:
                await self._writer.execute("ROLLBACK")
                raise
            await self._writer.execute("COMMIT")
            self._commits += 1
            for change in writer.vector_changes:  # no await between commit and here
                self._vector_indexes[change.table].apply(change)

    # ------------------------------------------------------------------ reads

    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return await _rows(self._reader, sql, params)

    def _fetch_quick(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of a short indexed read, run here on the caller's thread.

        For recall's lookups only, whose cost is bounded (by a ``LIMIT``, a list of
        keys, or the full-text postings budget); reads that may scan a profile go
        through ``_fetchall``. The statement is finished at once, so it holds no
        read snapshot afterwards.
        """
        return list(self._quick.execute(sql, params).fetchall())

    async def existing_message_ids(self, ids: Sequence[str]) -> set[str]:
        return await StoreWriter(self._reader).existing_message_ids(ids)

    async def get_memory(self, memory_id: str) -> Memory:
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
        )
        if not rows:
            raise MemoryNotFound(memory_id)
        return _memory_from_row(rows[0])

    async def history(self, memory_id: str) -> list[Memory]:
        """The whole version chain that ``memory_id`` belongs to, oldest first."""
        chain = [await self.get_memory(memory_id)]
        while True:  # walk back: the version this one superseded
            rows = await self._fetchall(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE superseded_by = ?", (chain[0].id,)
            )
            if not rows:
                break
            chain.insert(0, _memory_from_row(rows[0]))
        while chain[-1].superseded_by is not None:  # walk forward to the head
            chain.append(await self.get_memory(chain[-1].superseded_by))
        return chain

    async def list_memories(
        self,
        *,
        types: Sequence[str] | None = None,
        session_id: str | None = None,
        include_superseded: bool = False,
        limit: int = 50,
        before_seq: int | None = None,
    ) -> tuple[list[Memory], int | None]:
        """Newest first; returns the page and the cursor (a seq) of the next page."""
        where, params = self._memory_filters(types, session_id, include_superseded)
        if before_seq is not None:
            where.append("seq < ?")
            params.append(before_seq)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories {clause} ORDER BY seq DESC LIMIT ?",
            [*params, limit + 1],
        )
        next_seq = rows[limit - 1][0] if len(rows) > limit else None
        return [_memory_from_row(row) for row in rows[:limit]], next_seq

    @staticmethod
    def _memory_filters(
        types: Sequence[str] | None, session_id: str | None, include_superseded: bool
    ) -> tuple[list[str], list[Any]]:
        where: list[str] = []
        params: list[Any] = []
        if not include_superseded:
            where.append("superseded_by IS NULL AND forgotten_at IS NULL")
        if types:
            where.append(f"type IN ({_placeholders(len(types))})")
            params.extend(types)
        if session_id is not None:
            where.append("session_id = ?")
            params.append(session_id)
        return where, params

    async def memories_by_seq(self, seqs: Sequence[int]) -> dict[int, Memory]:
        if not seqs:
            return {}
        rows = self._fetch_quick(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE seq IN ({_placeholders(len(seqs))})",
            list(seqs),
        )
        return {row[0]: _memory_from_row(row) for row in rows}

    async def memories_with_turns(
        self, seqs: Sequence[int]
    ) -> dict[int, tuple[Memory, int | None, datetime | None]]:
        """Memories by seq, each with the seq and time of the turn it was first drawn from.

        Recall folds a memory into its evidence turn; reading the turn in the same
        statement saves a round trip. A memory without a stored source has (None, None).
        """
        if not seqs:
            return {}
        rows = self._fetch_quick(
            f"SELECT {_qualified(MEMORY_COLUMNS, 'm')}, t.seq, t.created_at FROM memories m"
            " LEFT JOIN messages t ON t.id = json_extract(m.source_message_ids, '$[0]')"
            f" WHERE m.seq IN ({_placeholders(len(seqs))})",
            list(seqs),
        )
        return {row[0]: (_memory_from_row(row), row[-2], from_db_time(row[-1])) for row in rows}

    async def memories_by_id(self, ids: Sequence[str]) -> list[Memory]:
        if not ids:
            return []
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ({_placeholders(len(ids))})",
            list(ids),
        )
        by_id = {row[1]: _memory_from_row(row) for row in rows}
        return [by_id[i] for i in ids if i in by_id]

    async def messages_by_seq(self, seqs: Sequence[int]) -> dict[int, StoredMessage]:
        if not seqs:
            return {}
        rows = self._fetch_quick(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE seq IN ({_placeholders(len(seqs))})",
            list(seqs),
        )
        return {row[0]: _message_from_row(row) for row in rows}

    async def search_memories_text(
        self,
        fts_query: str,
        *,
        limit: int,
        types: Sequence[str] | None = None,
        session_id: str | None = None,
    ) -> list[int]:
        """Seqs of current memories matching an FTS5 query, best BM25 first.

        CROSS JOIN keeps the full-text index as the outer loop: with a plain JOIN
        the planner may drive from ``memories`` (every current row matches
        ``superseded_by IS NULL``) and run the MATCH once per row, which took 32 s
        per query at 100K memories.
        """
        where, params = self._memory_filters(types, session_id, include_superseded=False)
        keep = " AND ".join(f"m.{clause}" for clause in where) or "1"
        # First the best few hundred by BM25 alone, then the filters on those: joining
        # every match to ``memories`` costs a row lookup each (12 ms for 10K matches).
        shortlist = max(4 * limit, 200)
        rows = self._fetch_quick(
            f"SELECT f.rowid, {keep} FROM (SELECT rowid, bm25(memories_fts, 1.0, 0.5) AS score"
            " FROM memories_fts WHERE memories_fts MATCH ? ORDER BY score LIMIT ?) AS f"
            " CROSS JOIN memories m ON m.seq = f.rowid ORDER BY f.score",
            [*params, fts_query, shortlist],
        )
        found = [row[0] for row in rows if row[1]]
        if len(found) >= limit or len(rows) < shortlist:
            return found[:limit]
        # The filters dropped most of the shortlist: rank every match that passes them.
        rows = self._fetch_quick(
            "SELECT m.seq FROM memories_fts CROSS JOIN memories m ON m.seq = memories_fts.rowid"
            f" WHERE memories_fts MATCH ? AND {keep}"
            " ORDER BY bm25(memories_fts, 1.0, 0.5) LIMIT ?",
            [fts_query, *params, limit],
        )
        return [row[0] for row in rows]

    async def term_counts(self, table: str, phrases: Sequence[str], *, cap: int) -> list[int]:
        """How many rows of ``memories`` or ``messages`` match each FTS5 phrase, up to ``cap``.

        Counting stops at ``cap`` so that a term found in most rows costs no more
        than a rare one; recall uses the counts to leave such terms out.
        """
        fts = {"memories": "memories_fts", "messages": "messages_fts"}[table]
        now = time.monotonic()
        if len(self._common_terms) > COMMON_TERMS_KEPT:
            self._common_terms.clear()
        known = {}
        for phrase in phrases:
            counted = self._common_terms.get((table, phrase))
            if counted is not None and counted[0] >= cap and now - counted[1] < COMMON_TERMS_TTL_S:
                known[phrase] = cap
        unknown = [phrase for phrase in phrases if phrase not in known]
        if unknown:
            count = f"(SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? LIMIT ?))"
            rows = self._fetch_quick(
                "SELECT " + ", ".join([count] * len(unknown)),
                [value for phrase in unknown for value in (phrase, cap)],
            )
            for phrase, found in zip(unknown, rows[0], strict=True):
                known[phrase] = found
                if found >= cap:  # common words stay common: no need to count them each time
                    self._common_terms[(table, phrase)] = (cap, now)
        return [known[phrase] for phrase in phrases]

    async def search_messages_text(
        self,
        fts_query: str,
        *,
        limit: int,
        session_id: str | None = None,
        between: tuple[str, str] | None = None,
    ) -> list[int]:
        """Seqs of raw messages matching an FTS5 query, best BM25 first.

        ``between`` keeps messages whose time is in [start, end) (``to_db_time`` strings).
        """
        where, params = "", []
        if session_id is not None:
            where, params = " AND m.session_id = ?", [session_id]
        if between is not None:
            where += " AND m.created_at >= ? AND m.created_at < ?"
            params += list(between)
        if not where:  # the index alone answers: no row lookup per match
            rows = self._fetch_quick(
                "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?"
                " ORDER BY bm25(messages_fts) LIMIT ?",
                [fts_query, limit],
            )
            return [row[0] for row in rows]
        rows = self._fetch_quick(
            "SELECT m.seq FROM messages_fts CROSS JOIN messages m ON m.seq = messages_fts.rowid"
            f" WHERE messages_fts MATCH ?{where} ORDER BY bm25(messages_fts) LIMIT ?",
            [fts_query, *params, limit],
        )
        return [row[0] for row in rows]

    async def search_vectors(
        self, table: str, vector: Sequence[float] | np.ndarray, *, limit: int
    ) -> list[tuple[int, float]]:
        """Nearest neighbours in ``memory_vectors`` or ``message_vectors``: (seq, cosine distance).

        Answered by the table's in-memory index (see ``vector_index``), read from
        the table on first use.
        """
        if table not in self._vector_indexes:
            raise ValueError(f"Unknown vector table {table!r}")
        index = await self._vector_indexes[table].get()
        return index.search(np.asarray(vector, dtype=np.float32), limit)

    async def warm_vector_indexes(self) -> None:
        """Read both vector tables into memory now, so the first recall does not wait for it."""
        for cached in self._vector_indexes.values():
            await cached.get()

    async def current_by_topic(self, topic_keys: Sequence[str]) -> list[int]:
        """Seqs of the current heads of the given topic keys."""
        if not topic_keys:
            return []
        rows = self._fetch_quick(
            f"SELECT seq FROM memories WHERE topic_key IN ({_placeholders(len(topic_keys))})"
            " AND superseded_by IS NULL AND forgotten_at IS NULL ORDER BY seq DESC",
            list(topic_keys),
        )
        return [row[0] for row in rows]

    async def pending_vectors(self, table: str, limit: int = 256) -> list[tuple[int, str]]:
        """Rows still waiting for an embedding: (seq, text to embed).

        A memory's text is its content alone, as ``reconcile.embedding_text`` makes it
        (its search questions serve full-text search); a turn's is its content and
        the start of the ``CONTEXT_TURNS`` turns before it, nearest first.
        """
        if table == "memory_vectors":
            sql = (
                "SELECT seq, content FROM memories WHERE"
                " vectorised = 0 AND type != 'task' AND superseded_by IS NULL"
                " AND forgotten_at IS NULL ORDER BY seq LIMIT ?"
            )
        else:
            # A turn is embedded with the start of the turns before it in its session: a
            # reply ("I'm drawn to turtles") means what it answers ("which animals?").
            # They are looked for among the few seqs before it, where a batch of turns lies.
            earlier = "".join(
                " || coalesce(char(10) || (SELECT substr(p.content, 1, ?) FROM messages p"
                " WHERE p.seq BETWEEN m.seq - 8 AND m.seq - 1 AND +p.session_id = m.session_id"
                f" ORDER BY p.seq DESC LIMIT 1 OFFSET {back}), '')"
                for back in range(CONTEXT_TURNS)
            )
            sql = (
                f"SELECT m.seq, m.content{earlier} FROM messages m"
                " WHERE m.vectorised = 0 ORDER BY m.seq LIMIT ?"
            )
            rows = await self._fetchall(sql, (*[CONTEXT_CHARS] * CONTEXT_TURNS, limit))
            return [(row[0], row[1].strip()) for row in rows]
        return [(row[0], row[1].strip()) for row in await self._fetchall(sql, (limit,))]

    async def session_messages(
        self, session_id: str, *, last: int | None = None, unextracted_only: bool = False
    ) -> list[tuple[int, StoredMessage]]:
        """A session's turns, oldest first (the last ``last`` of them when given)."""
        where = "session_id = ?" + (" AND extracted = 0" if unextracted_only else "")
        if last is None:
            sql = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE {where} ORDER BY created_at, seq"
            rows = await self._fetchall(sql, (session_id,))
        else:
            sql = (
                f"SELECT * FROM (SELECT {MESSAGE_COLUMNS} FROM messages WHERE {where}"
                " ORDER BY created_at DESC, seq DESC LIMIT ?) ORDER BY created_at, seq"
            )
            rows = await self._fetchall(sql, (session_id, last))
        return [(row[0], _message_from_row(row)) for row in rows]

    async def get_session(self, session_id: str) -> Session:
        rows = await self._fetchall(
            "SELECT s.id, s.started_at, s.ended_at, s.consolidated_at,"
            " (SELECT count(*) FROM messages m WHERE m.session_id = s.id)"
            " FROM sessions s WHERE s.id = ?",
            (session_id,),
        )
        if not rows:
            raise SessionNotFound(session_id)
        return self._session_from_row(rows[0])

    async def list_sessions(self) -> list[Session]:
        rows = await self._fetchall(
            "SELECT s.id, s.started_at, s.ended_at, s.consolidated_at, count(m.seq)"
            " FROM sessions s LEFT JOIN messages m ON m.session_id = s.id"
            " GROUP BY s.id ORDER BY s.started_at DESC"
        )
        return [self._session_from_row(row) for row in rows]

    @staticmethod
    def _session_from_row(row: Sequence[Any]) -> Session:
        return Session(
            id=row[0],
            started_at=datetime.fromisoformat(row[1]),
            ended_at=from_db_time(row[2]),
            consolidated_at=from_db_time(row[3]),
            message_count=row[4],
        )

    async def info(self, name: str) -> ProfileInfo:
        return profile_info(name, (await self._fetchall(COUNTS_SQL))[0])

    async def ledger_seq(self) -> int:
        rows = await self._fetchall("SELECT coalesce(max(seq), 0) FROM ledger")
        return int(rows[0][0])

    # ------------------------------------------------------ reads for recall

    async def search_messages_between(
        self,
        fts_query: str | None,
        start: str,
        end: str,
        *,
        limit: int,
        session_id: str | None = None,
    ) -> list[int]:
        """Seqs of raw messages whose time is in [start, end), best BM25 first.

        With no ``fts_query``, the messages of the range, newest first. Times are
        ``to_db_time`` strings, which sort in time order.
        """
        if fts_query is not None:
            return await self.search_messages_text(
                fts_query, limit=limit, session_id=session_id, between=(start, end)
            )
        where = "m.created_at >= ? AND m.created_at < ?"
        params: list[Any] = [start, end]
        if session_id is not None:
            where += " AND m.session_id = ?"
            params.append(session_id)
        sql = f"SELECT m.seq FROM messages m WHERE {where} ORDER BY m.created_at DESC LIMIT ?"
        return [row[0] for row in self._fetch_quick(sql, [*params, limit])]

    async def adjacent_messages(
        self, seqs: Sequence[int], *, window: int = 1
    ) -> dict[int, list[tuple[int, StoredMessage]]]:
        """For each message seq, the turns next to it in its session (itself excluded).

        Returns seq -> [(neighbour seq, neighbour)], in order, read in one statement.
        """
        if not seqs:
            return {}
        # ``+n.session_id`` keeps the planner on the seq range of the primary key: through
        # the session index it walked every turn of the session (1.5 ms at 10K turns).
        rows = self._fetch_quick(
            f"SELECT m.seq, {_qualified(MESSAGE_COLUMNS, 'n')} FROM messages m"
            " JOIN messages n ON +n.session_id = m.session_id"
            " AND n.seq BETWEEN m.seq - ? AND m.seq + ? AND n.seq != m.seq"
            f" WHERE m.seq IN ({_placeholders(len(seqs))}) ORDER BY m.seq, n.seq",
            [window, window, *seqs],
        )
        adjacent: dict[int, list[tuple[int, StoredMessage]]] = {}
        for row in rows:
            adjacent.setdefault(row[0], []).append((row[1], _message_from_row(row[1:])))
        return adjacent

    async def latest_activity(self) -> datetime | None:
        """The start of the newest session: the profile's present, for relative dates.

        Every recall asks, so the answer is kept until the next commit.
        """
        if self._latest_activity[0] == self._commits:
            return self._latest_activity[1]
        # A blocking read on this thread: no commit can land between it and the record.
        rows = self._fetch_quick("SELECT max(started_at) FROM sessions")
        latest = from_db_time(rows[0][0]) if rows else None
        self._latest_activity = (self._commits, latest)
        return latest

    async def ledger_entries(
        self, after_seq: int, *, limit: int = 1000
    ) -> list[tuple[int, str, str, str]]:
        """Committed ledger entries after ``after_seq``, oldest first: (seq, at, op, payload)."""
        rows = await self._fetchall(
            "SELECT seq, at, op, payload FROM ledger WHERE seq > ? ORDER BY seq LIMIT ?",
            (after_seq, limit),
        )
        return [(row[0], row[1], row[2], row[3]) for row in rows]


COUNTS_SQL = (
    "SELECT (SELECT count(*) FROM messages),"
    " (SELECT count(*) FROM memories WHERE superseded_by IS NULL AND forgotten_at IS NULL),"
    " (SELECT count(*) FROM sessions)"
)


def profile_info(name: str, counts: Sequence[int]) -> ProfileInfo:
    return ProfileInfo(name=name, messages=counts[0], memories=counts[1], sessions=counts[2])


# Whole-row columns of ``StoreWriter.restore_rows``, as the archive writes them.
RESTORE_COLUMNS: dict[str, tuple[str, ...]] = {
    "sessions": ("id", "started_at", "ended_at", "consolidated_at"),
    "messages": ("id", "session_id", "role", "content", "created_at", "ingested_at", "extracted"),
    "memories": (
        "id",
        "type",
        "content",
        "topic_key",
        "event_time",
        "importance",
        "confidence",
        "session_id",
        "source_message_ids",
        "source_spans",
        "search_queries",
        "created_at",
        "superseded_by",
        "forgotten_at",
    ),
}

# A replayed turn starts unextracted; the "extracted" entry that followed it in
# the ledger (same transaction) marks it, exactly as on the original copy.
REPLAYED_MESSAGES_EXTRACTED = False


def _restore_value(column: str, row: Mapping[str, Any]) -> Any:
    value = row.get(column)
    if column in ("source_message_ids", "source_spans"):
        return json.dumps(value or [])
    if column == "search_queries":
        return "\n".join(value or [])
    if column == "extracted":
        return int(bool(value))
    return value
