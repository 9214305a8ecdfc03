"""Reads that may scan a profile: memories and their chains, sessions, counts, the ledger.

They run on the profile's async read connection (its own thread), so a long
listing never holds the actor's event loop; recall's short indexed lookups are in
``search.py`` instead.
"""

from collections.abc import Sequence
from typing import Any

import aiosqlite

from raymem.errors import MemoryErased, MemoryNotFound, MessageNotFound, SessionNotFound
from raymem.store import episodes as episode_store
from raymem.store.rows import (
    COUNTS_SQL,
    MEMORY_COLUMNS,
    MESSAGE_COLUMNS,
    memory_from_row,
    message_from_row,
    placeholders,
    profile_info,
    session_from_row,
)
from raymem.store.search import memory_filters
from raymem.store.writer import existing_message_ids, fetch
from raymem.types import Memory, ProfileInfo, Session, StoredMessage

#: The vector tables whose rows waiting for an embedding ``pending_vectors`` reads.
PENDING_TABLES = ("memory_vectors", "message_vectors", "episode_vectors")

# A turn's vector also holds the start of the turns before it in its session.
# On LoCoMo turn-level any@10: none .836, one .843, two .849. The first 200
# characters of each do as well as 300 (.856 / .855) and keep long turns cheap.
CONTEXT_TURNS = 2
CONTEXT_CHARS = 200
#: A turn's predecessors are looked for among this many seqs before it, where the
#: turns of one request lie; a turn whose session was interleaved with another's
#: further back than that is embedded without them.
CONTEXT_SEQ_SPAN = 8

_SESSION_COLUMNS = (
    "s.id, s.started_at, s.ended_at, s.consolidated_at,"
    " (SELECT count(*) FROM messages m WHERE m.session_id = s.id)"
)


class Reads:
    """Reads over the profile's async read-only connection."""

    def __init__(self, reader: aiosqlite.Connection) -> None:
        self._reader = reader

    async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return await fetch(self._reader, sql, params)

    # -------------------------------------------------------------- memories

    async def get_memory(self, memory_id: str) -> Memory:
        """One memory, superseded or forgotten as well as current.

        Raises:
            MemoryNotFound: no memory has this id.
            MemoryErased: the memory was erased (only its tombstone is left).
        """
        memory = await self._memory(memory_id)
        if memory.erased_at is not None:
            raise MemoryErased(memory_id)
        return memory

    async def _memory(self, memory_id: str) -> Memory:
        """One memory row, tombstones included."""
        rows = await self._fetch(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
        )
        if not rows:
            raise MemoryNotFound(memory_id)
        return memory_from_row(rows[0])

    async def history(self, memory_id: str) -> list[Memory]:
        """The whole version chain that ``memory_id`` belongs to, oldest first.

        Where a dream merged several statements into one, every statement that led
        to ``memory_id`` comes before it, in the order they were written. An erased
        version keeps its place as a tombstone (no text, ``erased_at`` set).

        Raises:
            MemoryNotFound: no memory has this id.
            MemoryErased: ``memory_id`` itself was erased.
        """
        memory = await self.get_memory(memory_id)
        earlier: dict[str, tuple[int, Memory]] = {}
        frontier = [memory_id]
        while frontier:  # walk back: the versions this one (and those) superseded
            rows = await self._fetch(
                f"SELECT {MEMORY_COLUMNS} FROM memories"
                f" WHERE superseded_by IN ({placeholders(len(frontier))})",
                frontier,
            )
            found = {row[1]: (row[0], memory_from_row(row)) for row in rows}
            frontier = [i for i in found if i not in earlier and i != memory_id]
            earlier.update(found)
        chain = [m for _, m in sorted(earlier.values(), key=lambda pair: pair[0])] + [memory]
        while chain[-1].superseded_by is not None:  # walk forward to the head
            chain.append(await self._memory(chain[-1].superseded_by))
        return chain

    async def memories_by_id(self, ids: Sequence[str]) -> list[Memory]:
        """The memories with these ids, in the order asked; unknown ids are left out."""
        if not ids:
            return []
        rows = await self._fetch(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ({placeholders(len(ids))})",
            list(ids),
        )
        by_id = {row[1]: memory_from_row(row) for row in rows}
        return [by_id[i] for i in ids if i in by_id]

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
        where, params = memory_filters(types, session_id, include_superseded=include_superseded)
        where.append("erased_at IS NULL")  # a tombstone has nothing to list
        if before_seq is not None:
            where.append("seq < ?")
            params.append(before_seq)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = await self._fetch(
            f"SELECT {MEMORY_COLUMNS} FROM memories {clause} ORDER BY seq DESC LIMIT ?",
            [*params, limit + 1],
        )
        next_seq = rows[limit - 1][0] if len(rows) > limit else None
        return [memory_from_row(row) for row in rows[:limit]], next_seq

    async def pending_vectors(
        self, table: str, limit: int = 256, *, newest_first: bool = False
    ) -> list[tuple[int, str]]:
        """Rows still waiting for an embedding: (seq, text to embed), oldest first by default.

        A memory's text is its content alone, as ``reconcile.embedding_text`` makes it
        (its search questions serve full-text search); tasks get no vector. A turn's
        is its content and the start of the ``CONTEXT_TURNS`` turns before it,
        nearest first: a reply ("I'm drawn to turtles") means what it answers. An
        episode's is its title and the start of its summary.
        """
        if table not in PENDING_TABLES:  # procedural memory reads its own (store/procedural)
            raise ValueError(f"Pending rows of {table!r} are not read here")
        order = "DESC" if newest_first else "ASC"
        if table == "episode_vectors":  # an episode's title and summary
            return await episode_store.pending_vectors(
                self._reader, limit=limit, newest_first=newest_first
            )
        if table == "memory_vectors":
            sql = (
                "SELECT seq, content FROM memories WHERE vectorised = 0 AND type != 'task'"
                f" AND superseded_by IS NULL AND forgotten_at IS NULL ORDER BY seq {order} LIMIT ?"
            )
            return [(row[0], row[1].strip()) for row in await self._fetch(sql, (limit,))]
        earlier = "".join(
            " || coalesce(char(10) || (SELECT substr(p.content, 1, ?) FROM messages p"
            f" WHERE p.seq BETWEEN m.seq - {CONTEXT_SEQ_SPAN} AND m.seq - 1"
            " AND +p.session_id = m.session_id"
            f" ORDER BY p.seq DESC LIMIT 1 OFFSET {back}), '')"
            for back in range(CONTEXT_TURNS)
        )
        sql = (
            f"SELECT m.seq, m.content{earlier} FROM messages m WHERE m.vectorised = 0"
            f" ORDER BY m.seq {order} LIMIT ?"
        )
        rows = await self._fetch(sql, (*[CONTEXT_CHARS] * CONTEXT_TURNS, limit))
        return [(row[0], row[1].strip()) for row in rows]

    # ----------------------------------------------------------------- turns

    async def existing_message_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are stored turns."""
        return await existing_message_ids(self._reader, ids)

    async def message_by_id(self, message_id: str) -> StoredMessage:
        """One stored turn.

        Raises:
            MessageNotFound: no turn has this id.
        """
        rows = await self._fetch(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
        )
        if not rows:
            raise MessageNotFound(message_id)
        return message_from_row(rows[0])

    async def session_messages(
        self, session_id: str, *, last: int | None = None, unextracted_only: bool = False
    ) -> list[tuple[int, StoredMessage]]:
        """A session's turns, oldest first (the last ``last`` of them when given), with seqs."""
        where = "session_id = ?" + (" AND extracted = 0" if unextracted_only else "")
        if last is None:
            sql = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE {where} ORDER BY created_at, seq"
            rows = await self._fetch(sql, (session_id,))
        else:
            sql = (
                f"SELECT * FROM (SELECT {MESSAGE_COLUMNS} FROM messages WHERE {where}"
                " ORDER BY created_at DESC, seq DESC LIMIT ?) ORDER BY created_at, seq"
            )
            rows = await self._fetch(sql, (session_id, last))
        return [(row[0], message_from_row(row)) for row in rows]

    # -------------------------------------------------------------- sessions

    async def get_session(self, session_id: str) -> Session:
        """One session with its turn count.

        Raises:
            SessionNotFound: no session has this id.
        """
        rows = await self._fetch(
            f"SELECT {_SESSION_COLUMNS} FROM sessions s WHERE s.id = ?", (session_id,)
        )
        if not rows:
            raise SessionNotFound(session_id)
        return session_from_row(rows[0])

    async def list_sessions(self) -> list[Session]:
        """Every session, newest first."""
        rows = await self._fetch(
            "SELECT s.id, s.started_at, s.ended_at, s.consolidated_at, count(m.seq)"
            " FROM sessions s LEFT JOIN messages m ON m.session_id = s.id"
            " GROUP BY s.id ORDER BY s.started_at DESC"
        )
        return [session_from_row(row) for row in rows]

    # ------------------------------------------------------- counts and ledger

    async def info(self, name: str) -> ProfileInfo:
        """The profile's counts of turns, current memories and sessions."""
        return profile_info(name, (await self._fetch(COUNTS_SQL))[0])

    async def ledger_seq(self) -> int:
        """The seq of the newest ledger entry (0 for none)."""
        rows = await self._fetch("SELECT coalesce(max(seq), 0) FROM ledger")
        return int(rows[0][0])

    async def ledger_entries(
        self, after_seq: int, *, limit: int = 1000
    ) -> list[tuple[int, str, str, str]]:
        """Committed ledger entries after ``after_seq``, oldest first: (seq, at, op, payload)."""
        rows = await self._fetch(
            "SELECT seq, at, op, payload FROM ledger WHERE seq > ? ORDER BY seq LIMIT ?",
            (after_seq, limit),
        )
        return [(row[0], row[1], row[2], row[3]) for row in rows]
