"""Recall's reads: full-text and vector searches, topic heads, and rows by seq.

Every statement here is an indexed lookup bounded by a ``LIMIT``, a list of keys
or the full-text postings budget, taking tens of microseconds. A hop to an async
connection's thread and back costs several times that, so they run on a blocking
read-only connection, on the caller's thread, as plain functions; reads that may
scan a whole profile live in ``reads.py``.
"""

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from raymem.store.rows import (
    MEMORY_COLUMNS,
    MESSAGE_COLUMNS,
    from_db_time,
    memory_from_row,
    message_from_row,
    placeholders,
    qualified,
)
from raymem.store.vector_index import CachedIndex
from raymem.types import Memory, StoredMessage

#: The full-text index of each searchable table, and the BM25 weight of each of its columns:
#: a memory's generated search questions count half as much as its content.
FTS_TABLES = {"memories": ("memories_fts", "1.0, 0.5"), "messages": ("messages_fts", "")}
#: The memory channel ranks this many of the best BM25 matches (at least) before filtering
#: them: joining every match to ``memories`` costs a row lookup each (12 ms for 10K matches).
SHORTLIST_MIN, SHORTLIST_PER_HIT = 200, 4
COMMON_TERMS_TTL_S = 300.0  # how long a term found in many rows is taken to stay so
COMMON_TERMS_KEPT = 10_000
#: Versions followed at most from a memory to the head of its chain (chains are short;
#: the bound only guards against a cycle an external edit could make).
MAX_CHAIN_STEPS = 64


class MemoryState(NamedTuple):
    """Whether a memory still holds: replaced by a newer version, or forgotten."""

    id: str
    superseded_by: str | None
    forgotten: bool

    @property
    def current(self) -> bool:
        return self.superseded_by is None and not self.forgotten


def current(alias: str = "") -> str:
    """The condition that a memory is current: neither superseded nor forgotten."""
    prefix = f"{alias}." if alias else ""
    return f"{prefix}superseded_by IS NULL AND {prefix}forgotten_at IS NULL"


def _ranked_sql(table: str, where: str, *, rowid_only: bool = False) -> str:
    """Seqs of ``table``'s rows matching an FTS5 query (first parameter), best BM25 first.

    CROSS JOIN keeps the full-text index as the outer loop: with a plain JOIN the
    planner may drive from the table (every current memory matches ``current()``)
    and run the MATCH once per row, which took 32 s per query at 100K memories.
    ``rowid_only``: no filter, so the index alone answers, with no row lookup.
    """
    fts, weights = FTS_TABLES[table]
    rank = f"bm25({fts}{', ' + weights if weights else ''})"
    if rowid_only:
        return (
            f"SELECT rowid, {rank} AS score FROM {fts} WHERE {fts} MATCH ? ORDER BY score LIMIT ?"
        )
    return (
        f"SELECT t.seq FROM {fts} CROSS JOIN {table} t ON t.seq = {fts}.rowid"
        f" WHERE {fts} MATCH ? AND {where} ORDER BY {rank} LIMIT ?"
    )


def memory_filters(
    types: Sequence[str] | None,
    session_id: str | None,
    *,
    include_superseded: bool = False,
    alias: str = "",
) -> tuple[list[str], list[Any]]:
    """SQL conditions over ``memories`` (as ``alias``, if given) and their parameters."""
    prefix = f"{alias}." if alias else ""
    where: list[str] = []
    params: list[Any] = []
    if not include_superseded:
        where.append(current(alias))
    if types:
        where.append(f"{prefix}type IN ({placeholders(len(types))})")
        params.extend(types)
    if session_id is not None:
        where.append(f"{prefix}session_id = ?")
        params.append(session_id)
    return where, params


class Search:
    """The quick reads recall and reconciliation make, over one blocking read connection.

    Args:
        quick: a blocking read-only connection to the profile's file.
        vector_indexes: the in-memory index of each vector table.
    """

    def __init__(self, quick: Any, vector_indexes: dict[str, CachedIndex]) -> None:
        self._quick = quick
        self._vector_indexes = vector_indexes
        self._common_terms: dict[tuple[str, str], tuple[int, float]] = {}  # see term_counts

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of a short statement, finished at once so it holds no read snapshot."""
        return list(self._quick.execute(sql, params).fetchall())

    # -------------------------------------------------------------- full text

    def memories_text(
        self,
        fts_query: str,
        *,
        limit: int,
        types: Sequence[str] | None = None,
        session_id: str | None = None,
        event_between: tuple[str, str] | None = None,
    ) -> list[int]:
        """Seqs of current memories matching an FTS5 query, best BM25 first.

        ``event_between``: only events and tasks dated in [start, end) (ISO dates).
        """
        where, params = memory_filters(types, session_id, alias="t")
        if event_between is not None:
            where.append("t.event_time >= ? AND t.event_time < ?")
            params.extend(event_between)
        keep = " AND ".join(where)
        # First the best few hundred by BM25 alone, then the filters on those.
        shortlist = max(SHORTLIST_PER_HIT * limit, SHORTLIST_MIN)
        rows = self._fetch(
            f"SELECT f.rowid, {keep} FROM ({_ranked_sql('memories', '', rowid_only=True)}) AS f"
            " CROSS JOIN memories t ON t.seq = f.rowid ORDER BY f.score",
            [*params, fts_query, shortlist],
        )
        found = [row[0] for row in rows if row[1]]
        if len(found) >= limit or len(rows) < shortlist:
            return found[:limit]
        # The filters dropped most of the shortlist: rank every match that passes them.
        return [
            row[0]
            for row in self._fetch(_ranked_sql("memories", keep), [fts_query, *params, limit])
        ]

    def messages_text(
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
        where, params = self._message_filters(session_id, between)
        if not where:
            sql = _ranked_sql("messages", "", rowid_only=True)
        else:
            sql = _ranked_sql("messages", " AND ".join(where))
        return [row[0] for row in self._fetch(sql, [fts_query, *params, limit])]

    def memories_dated(
        self,
        start: str,
        end: str,
        *,
        limit: int,
        types: Sequence[str] | None = None,
        session_id: str | None = None,
    ) -> list[int]:
        """Seqs of current events and tasks dated in [start, end) (ISO dates), latest first."""
        where, params = memory_filters(types, session_id, alias="t")
        sql = (
            f"SELECT t.seq FROM memories t WHERE t.event_time >= ? AND t.event_time < ?"
            f" AND {' AND '.join(where)} ORDER BY t.event_time DESC, t.seq DESC LIMIT ?"
        )
        return [row[0] for row in self._fetch(sql, [start, end, *params, limit])]

    def messages_between(
        self, start: str, end: str, *, limit: int, session_id: str | None = None
    ) -> list[int]:
        """Seqs of raw messages whose time is in [start, end), newest first."""
        where, params = self._message_filters(session_id, (start, end))
        sql = (
            f"SELECT t.seq FROM messages t WHERE {' AND '.join(where)}"
            " ORDER BY t.created_at DESC LIMIT ?"
        )
        return [row[0] for row in self._fetch(sql, [*params, limit])]

    @staticmethod
    def _message_filters(
        session_id: str | None, between: tuple[str, str] | None
    ) -> tuple[list[str], list[Any]]:
        where: list[str] = []
        params: list[Any] = []
        if session_id is not None:
            where.append("t.session_id = ?")
            params.append(session_id)
        if between is not None:
            where.append("t.created_at >= ? AND t.created_at < ?")
            params.extend(between)
        return where, params

    def term_counts(self, table: str, phrases: Sequence[str], *, cap: int) -> list[int]:
        """How many rows of ``memories`` or ``messages`` match each FTS5 phrase, up to ``cap``.

        Counting stops at ``cap`` so that a term found in most rows costs no more
        than a rare one; recall uses the counts to leave such terms out. A term
        found at the cap is remembered for a while: common words stay common.
        """
        fts, _ = FTS_TABLES[table]
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
            rows = self._fetch(
                "SELECT " + ", ".join([count] * len(unknown)),
                [value for phrase in unknown for value in (phrase, cap)],
            )
            for phrase, found in zip(unknown, rows[0], strict=True):
                known[phrase] = found
                if found >= cap:
                    self._common_terms[(table, phrase)] = (cap, now)
        return [known[phrase] for phrase in phrases]

    # ---------------------------------------------------------------- vectors

    async def vectors(
        self, table: str, vector: Sequence[float] | np.ndarray, *, limit: int
    ) -> list[tuple[int, float]]:
        """Nearest neighbours in ``memory_vectors`` or ``message_vectors``: (seq, cosine distance).

        Answered by the table's in-memory index (see ``vector_index``), which is
        read from the table on first use; that first call waits for it.
        """
        cached = self._vector_indexes.get(table)
        if cached is None:
            raise ValueError(f"Unknown vector table {table!r}")
        index = await cached.get()
        return index.search(np.asarray(vector, dtype=np.float32), limit)

    # ---------------------------------------------------------- rows and keys

    def topic_heads(self, topic_keys: Sequence[str]) -> list[int]:
        """Seqs of the current heads of the given topic keys, newest first."""
        if not topic_keys:
            return []
        rows = self._fetch(
            f"SELECT seq FROM memories WHERE topic_key IN ({placeholders(len(topic_keys))})"
            f" AND {current()} ORDER BY seq DESC",
            list(topic_keys),
        )
        return [row[0] for row in rows]

    def memories_by_seq(self, seqs: Sequence[int]) -> dict[int, Memory]:
        if not seqs:
            return {}
        rows = self._fetch(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE seq IN ({placeholders(len(seqs))})",
            list(seqs),
        )
        return {row[0]: memory_from_row(row) for row in rows}

    def memories_with_turns(
        self, seqs: Sequence[int]
    ) -> dict[int, tuple[Memory, int | None, datetime | None]]:
        """Memories by seq, each with the seq and time of the turn it was first drawn from.

        Recall folds a memory into its evidence turn; reading the turn in the same
        statement saves a round trip. A memory without a stored source has (None, None).
        """
        if not seqs:
            return {}
        rows = self._fetch(
            f"SELECT {qualified(MEMORY_COLUMNS, 'm')}, t.seq, t.created_at FROM memories m"
            " LEFT JOIN messages t ON t.id = json_extract(m.source_message_ids, '$[0]')"
            f" WHERE m.seq IN ({placeholders(len(seqs))})",
            list(seqs),
        )
        return {row[0]: (memory_from_row(row[:-2]), row[-2], from_db_time(row[-1])) for row in rows}

    def memories_with_turns_by_id(
        self, ids: Sequence[str]
    ) -> dict[str, tuple[Memory, int | None, datetime | None]]:
        """As ``memories_with_turns``, by memory id."""
        if not ids:
            return {}
        rows = self._fetch(
            f"SELECT seq FROM memories WHERE id IN ({placeholders(len(ids))})", list(ids)
        )
        found = self.memories_with_turns([row[0] for row in rows])
        return {memory.id: (memory, turn, at) for memory, turn, at in found.values()}

    def messages_by_seq(self, seqs: Sequence[int]) -> dict[int, StoredMessage]:
        if not seqs:
            return {}
        rows = self._fetch(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE seq IN ({placeholders(len(seqs))})",
            list(seqs),
        )
        return {row[0]: message_from_row(row) for row in rows}

    def adjacent_messages(
        self, seqs: Sequence[int], *, window: int = 1
    ) -> dict[int, list[tuple[int, StoredMessage]]]:
        """For each message seq, the turns next to it in its session (itself excluded).

        Returns seq -> [(neighbour seq, neighbour)], in order, read in one statement.
        """
        if not seqs:
            return {}
        # ``+n.session_id`` keeps the planner on the seq range of the primary key: through
        # the session index it walked every turn of the session (1.5 ms at 10K turns).
        rows = self._fetch(
            f"SELECT m.seq, {qualified(MESSAGE_COLUMNS, 'n')} FROM messages m"
            " JOIN messages n ON +n.session_id = m.session_id"
            " AND n.seq BETWEEN m.seq - ? AND m.seq + ? AND n.seq != m.seq"
            f" WHERE m.seq IN ({placeholders(len(seqs))}) ORDER BY m.seq, n.seq",
            [window, window, *seqs],
        )
        adjacent: dict[int, list[tuple[int, StoredMessage]]] = {}
        for row in rows:
            adjacent.setdefault(row[0], []).append((row[1], message_from_row(row[1:])))
        return adjacent

    def has_pending_vectors(self) -> bool:
        """Whether a memory or a turn is waiting for its vector (two partial-index lookups)."""
        rows = self._fetch(
            "SELECT EXISTS (SELECT 1 FROM messages WHERE vectorised = 0)"
            " OR EXISTS (SELECT 1 FROM memories WHERE vectorised = 0 AND type != 'task'"
            f" AND {current()})"
        )
        return bool(rows[0][0])

    def turn_memories(self, message_ids: Sequence[str]) -> dict[str, list[MemoryState]]:
        """The memories each turn gave, with their state: message id -> [MemoryState].

        A memory a dream retired counts as not forgotten here: it leaves recall, yet
        the person did not ask to forget it, so the turn it came from still speaks.
        """
        if not message_ids:
            return {}
        rows = self._fetch(
            "SELECT s.message_id, m.id, m.superseded_by,"
            " m.forgotten_at IS NOT NULL AND r.memory_id IS NULL"
            " FROM memory_sources s JOIN memories m ON m.seq = s.memory_seq"
            " LEFT JOIN retired_memories r ON r.memory_id = m.id"
            f" WHERE s.message_id IN ({placeholders(len(message_ids))})",
            list(message_ids),
        )
        states: dict[str, list[MemoryState]] = {}
        for message_id, memory_id, superseded_by, forgotten in rows:
            states.setdefault(message_id, []).append(
                MemoryState(memory_id, superseded_by, bool(forgotten))
            )
        return states

    def chain_heads(self, memory_ids: Sequence[str]) -> dict[str, str]:
        """The current version of each memory's chain: id -> id of its head.

        A memory that is current is its own head; a chain whose newest version was
        forgotten has no head, and its ids are left out.
        """
        heads: dict[str, str] = {}
        pending = {memory_id: memory_id for memory_id in memory_ids}  # start -> reached
        for _ in range(MAX_CHAIN_STEPS):
            if not pending:
                break
            reached = list(set(pending.values()))
            rows = self._fetch(
                "SELECT id, superseded_by, forgotten_at IS NOT NULL FROM memories"
                f" WHERE id IN ({placeholders(len(reached))})",
                reached,
            )
            step = {row[0]: (row[1], bool(row[2])) for row in rows}
            following = {}
            for start, at in pending.items():
                successor, forgotten = step.get(at, (None, True))
                if successor is not None:
                    following[start] = successor
                elif not forgotten:
                    heads[start] = at
            pending = following
        return heads
