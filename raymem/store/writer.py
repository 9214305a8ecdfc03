"""The writes of one transaction: turns, memories, supersessions, forgetting, sessions, vectors.

A ``StoreWriter`` is handed out by ``ProfileStore.write()`` and lives for one
transaction; every mutation it makes is also appended to the ledger, which
snapshots, ledger shipping and replay on another copy rely on. Vector changes are
collected so the profile's in-memory indexes can follow once the transaction has
committed.
"""

from collections.abc import Iterable, Sequence
from typing import Any

import aiosqlite
import msgspec
import numpy as np

from raymem.store.rows import (
    NewMemory,
    NewMessage,
    memory_values,
    placeholders,
    to_db_time,
    utc_now,
    vector_blob,
)
from raymem.store.schema import VECTOR_SOURCES
from raymem.store.vector_index import VectorChange

#: Rows per ``IN (...)`` list: well below SQLite's limit on bound parameters.
IN_LIST_ROWS = 500

#: A session starts at its earliest turn, whichever request stored that turn.
SESSION_UPSERT = (
    "INSERT INTO sessions (id, started_at) VALUES (?, ?) ON CONFLICT (id) DO UPDATE"
    " SET started_at = min(started_at, excluded.started_at)"
)


async def fetch(conn: aiosqlite.Connection, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    """Run a query and fetch every row in one step on the connection's thread.

    A statement left open across an ``await`` would pin the connection's read
    snapshot while other coroutines use it, so that a reader misses writes
    committed since; fetching in one step finishes the statement at once.
    """
    return list(await conn.execute_fetchall(sql, params))


async def existing_message_ids(conn: aiosqlite.Connection, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` are stored turns."""
    found: set[str] = set()
    for start in range(0, len(ids), IN_LIST_ROWS):
        chunk = ids[start : start + IN_LIST_ROWS]
        sql = f"SELECT id FROM messages WHERE id IN ({placeholders(len(chunk))})"
        found.update(row[0] for row in await fetch(conn, sql, chunk))
    return found


class StoreWriter:
    """The writes of one transaction; obtained from ``ProfileStore.write()``."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn
        # What this transaction did to the vector tables, for the in-memory indexes.
        self.vector_changes: list[VectorChange] = []

    async def log(self, op: str, payload: Any, *, at: str | None = None) -> int:
        """Append a ledger entry; returns its seq."""
        cursor = await self.conn.execute(
            "INSERT INTO ledger (at, op, payload) VALUES (?, ?, ?)",
            (at or to_db_time(utc_now()), op, msgspec.json.encode(payload).decode()),
        )
        return int(cursor.lastrowid or 0)

    async def append_ledger(self, seq: int, at: str, op: str, payload: str) -> None:
        """Write a ledger entry under a given seq (replay, import); later entries follow it."""
        await self.conn.execute(
            "INSERT INTO ledger (seq, at, op, payload) VALUES (?, ?, ?, ?)",
            (seq, at, op, payload),
        )

    async def is_empty(self) -> bool:
        """True when the profile holds no session, message, memory or ledger entry."""
        sql = (
            "SELECT EXISTS (SELECT 1 FROM sessions) OR EXISTS (SELECT 1 FROM messages)"
            " OR EXISTS (SELECT 1 FROM memories) OR EXISTS (SELECT 1 FROM ledger)"
        )
        return not (await fetch(self.conn, sql))[0][0]

    # ----------------------------------------------------------------- turns

    async def insert_messages(self, messages: Sequence[NewMessage]) -> list[NewMessage]:
        """Insert turns, ignoring ones already stored; returns those that are new."""
        if not messages:
            return []
        existing = await existing_message_ids(self.conn, [m.id for m in messages])
        new = [m for m in messages if m.id not in existing]
        new = list({m.id: m for m in new}.values())  # the same turn twice in one request
        if not new:
            return []
        ingested_at = to_db_time(utc_now())
        await self.conn.executemany(
            "INSERT OR IGNORE INTO messages (id, session_id, role, content, created_at, ingested_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(m.id, m.session_id, m.role, m.content, m.created_at, ingested_at) for m in new],
        )
        for session_id in {m.session_id for m in new}:
            first = min(m.created_at for m in new if m.session_id == session_id)
            await self.conn.execute(SESSION_UPSERT, (session_id, first))
        await self.log("messages", new, at=ingested_at)  # replay restores ingested_at from it
        return new

    async def mark_extracted(self, message_ids: Sequence[str], *, log: bool = True) -> None:
        if not message_ids:
            return
        await self.conn.executemany(
            "UPDATE messages SET extracted = 1 WHERE id = ?", [(i,) for i in message_ids]
        )
        if log:
            await self.log("extracted", {"ids": list(message_ids)})

    # -------------------------------------------------------------- memories

    async def current_by_hash(self, hashes: Iterable[str]) -> dict[str, str]:
        """Current (not superseded or forgotten) memories by content hash: hash -> id."""
        wanted = list(set(hashes))
        if not wanted:
            return {}
        sql = (
            f"SELECT content_hash, id FROM memories WHERE content_hash IN"
            f" ({placeholders(len(wanted))}) AND superseded_by IS NULL AND forgotten_at IS NULL"
        )
        return {row[0]: row[1] for row in await fetch(self.conn, sql, wanted)}

    async def topic_head_ids(self, topic_keys: Iterable[str]) -> dict[str, str]:
        """The head of each topic key's version chain, read inside the transaction: key -> id."""
        keys = list(set(topic_keys))
        if not keys:
            return {}
        sql = (
            f"SELECT topic_key, id FROM memories WHERE topic_key IN ({placeholders(len(keys))})"
            " AND superseded_by IS NULL AND forgotten_at IS NULL ORDER BY seq"
        )
        return {row[0]: row[1] for row in await fetch(self.conn, sql, keys)}

    async def insert_memory(self, memory: NewMemory, supersedes: str | None = None) -> int:
        """Insert one memory; when it supersedes another, link the old head to it. Returns its seq."""
        values = memory_values(memory)
        columns = [name for name in values if name != "seq"]
        cursor = await self.conn.execute(
            f"INSERT INTO memories ({', '.join(columns)})"
            f" VALUES ({', '.join(':' + name for name in columns)})",
            values,
        )
        await self.log("memory", memory)
        if supersedes is not None:
            await self.supersede(supersedes, memory.id)
            await self.log("supersede", {"old": supersedes, "new": memory.id})
        return int(cursor.lastrowid or 0)

    async def supersede(self, old_id: str, new_id: str) -> None:
        """Point the old head of a chain at its successor and drop its vector (not logged)."""
        await self.conn.execute(
            "UPDATE memories SET superseded_by = ? WHERE id = ? AND superseded_by IS NULL",
            (new_id, old_id),
        )
        await self.delete_memory_vector(old_id)

    async def forget(self, memory_id: str) -> bool:
        """Mark a memory forgotten; False when it is unknown."""
        rows = await fetch(
            self.conn, "SELECT forgotten_at FROM memories WHERE id = ?", (memory_id,)
        )
        if not rows:
            return False
        if rows[0][0] is None:
            at = to_db_time(utc_now())
            await self.mark_forgotten(memory_id, at)
            await self.log("forget", {"id": memory_id, "at": at})
        return True

    async def mark_forgotten(self, memory_id: str, at: str) -> None:
        """Hide a memory from recall from ``at`` on and drop its vector (not logged)."""
        await self.conn.execute(
            "UPDATE memories SET forgotten_at = ? WHERE id = ? AND forgotten_at IS NULL",
            (at, memory_id),
        )
        await self.delete_memory_vector(memory_id)

    # -------------------------------------------------------------- sessions

    async def end_session(self, session_id: str) -> None:
        at = to_db_time(utc_now())
        await self.mark_session_ended(session_id, at)
        await self.log("session_end", {"id": session_id, "at": at})

    async def mark_session_ended(self, session_id: str, at: str) -> None:
        """End a session (not logged); ending it consolidates every turn it holds."""
        await self.conn.execute(
            "UPDATE sessions SET ended_at = coalesce(ended_at, ?), consolidated_at = ?"
            " WHERE id = ?",
            (at, at, session_id),
        )

    # --------------------------------------------------------------- vectors

    async def set_vectors(
        self, table: str, rows: Sequence[tuple[int, Sequence[float] | np.ndarray]]
    ) -> None:
        """Store embeddings for memories, messages or episodes and mark them vectorised."""
        source = VECTOR_SOURCES[table]
        if source == "memories":
            # A memory superseded or forgotten while it was being embedded gets no vector.
            seqs = [seq for seq, _ in rows]
            sql = (
                f"SELECT seq FROM memories WHERE seq IN ({placeholders(len(seqs))})"
                " AND superseded_by IS NULL AND forgotten_at IS NULL"
            )
            live = {row[0] for row in await fetch(self.conn, sql, seqs)}
            rows = [(seq, vec) for seq, vec in rows if seq in live]
        if not rows:
            return
        # vec0 ignores OR REPLACE: a row the background vectoriser and an ingest both
        # embedded would fail the second insert, so an existing vector is deleted first.
        await self.conn.executemany(
            f"DELETE FROM {table} WHERE rowid = ?", [(seq,) for seq, _ in rows]
        )
        await self.conn.executemany(
            f"INSERT INTO {table} (rowid, embedding) VALUES (?, ?)",
            [(seq, vector_blob(vec)) for seq, vec in rows],
        )
        await self.conn.executemany(
            f"UPDATE {source} SET vectorised = 1 WHERE seq = ?", [(seq,) for seq, _ in rows]
        )
        vectors = np.stack([np.asarray(vec, dtype=np.float32) for _, vec in rows])
        self.vector_changes.append(VectorChange("upsert", table, [s for s, _ in rows], vectors))

    async def delete_memory_vector(self, memory_id: str) -> None:
        await self.delete_vectors(
            "memory_vectors", "SELECT seq FROM memories WHERE id = ?", (memory_id,)
        )

    async def delete_vectors(self, table: str, seqs_sql: str, params: Sequence[Any]) -> None:
        """Delete the vectors of the rows that ``seqs_sql`` selects."""
        seqs = [row[0] for row in await fetch(self.conn, seqs_sql, params)]
        if not seqs:
            return
        for first in range(0, len(seqs), IN_LIST_ROWS):
            batch = seqs[first : first + IN_LIST_ROWS]
            await self.conn.execute(
                f"DELETE FROM {table} WHERE rowid IN ({placeholders(len(batch))})", batch
            )
        self.vector_changes.append(VectorChange("remove", table, seqs))
