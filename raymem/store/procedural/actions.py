"""The enabled flag, captured actions, their sequences, and the injections made in sessions.

Writes take the ``StoreWriter`` of an open transaction and log what they change;
reads take the profile's async read connection.
"""

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import aiosqlite

from raymem.store.procedural.rows import (
    Row,
    carried,
    columns,
    from_row,
    from_rows,
    insert_rows,
)
from raymem.store.rows import RESTORED_TABLES, placeholders, to_db_time
from raymem.store.writer import IN_LIST_ROWS, StoreWriter, fetch
from raymem.types_procedural import Action, ActionSequence, ProceduralCounts

#: A page cursor is "<time>|<seq>" of the last row of the page before.
_CURSOR_SEP = "|"
_CURSOR_SEQ = re.compile(r"[0-9]{1,18}")  # a row seq that SQLite can hold


def _column_index(table: str, column: str) -> int:
    """Where ``column`` is in a row selected as ``seq, columns(table)``."""
    return RESTORED_TABLES[table].columns.index(column) + 1


# ------------------------------------------------------------------ enabled


async def enabled_state(conn: aiosqlite.Connection) -> tuple[bool, datetime | None]:
    """Whether procedural memory is on (off until first enabled), and when that was set."""
    rows = await fetch(conn, "SELECT enabled, updated_at FROM procedural_state WHERE id = 1")
    if not rows:
        return False, None
    return bool(rows[0][0]), datetime.fromisoformat(rows[0][1])


async def set_enabled(writer: StoreWriter, enabled: bool, at: datetime) -> bool:
    """Turn procedural memory on or off; returns whether that changed anything."""
    current, since = await enabled_state(writer.conn)
    if since is not None and current == enabled:
        return False
    row = {"id": 1, "enabled": enabled, "updated_at": to_db_time(at)}
    await apply_enabled(writer, row)
    await writer.log("procedural_enabled", row)
    return True


async def apply_enabled(writer: StoreWriter, row: Row) -> None:
    """Store the flag's row (not logged)."""
    await writer.conn.execute(
        "INSERT OR REPLACE INTO procedural_state (id, enabled, updated_at) VALUES (1, ?, ?)",
        (int(bool(row["enabled"])), row["updated_at"]),
    )


async def counts(conn: aiosqlite.Connection) -> ProceduralCounts:
    rows = await fetch(
        conn,
        "SELECT (SELECT count(*) FROM actions),"
        " (SELECT count(*) FROM actions WHERE sequence_id IS NULL),"
        " (SELECT count(*) FROM action_sequences),"
        " (SELECT count(*) FROM patterns WHERE superseded_by IS NULL AND deleted_at IS NULL),"
        " (SELECT count(*) FROM skills WHERE status = 'active')",
    )
    actions, open_actions, sequences, patterns, skills = rows[0]
    return ProceduralCounts(
        actions=actions,
        open_actions=open_actions,
        sequences=sequences,
        patterns=patterns,
        skills=skills,
    )


# ------------------------------------------------------------------ actions


async def existing_action_ids(conn: aiosqlite.Connection, ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(ids), IN_LIST_ROWS):
        chunk = ids[start : start + IN_LIST_ROWS]
        sql = f"SELECT id FROM actions WHERE id IN ({placeholders(len(chunk))})"
        found.update(row[0] for row in await fetch(conn, sql, chunk))
    return found


async def insert_actions(writer: StoreWriter, rows: Sequence[Row]) -> int:
    """Store carried action rows, skipping ids already stored (and repeats); returns how many
    were new."""
    unique = list({row["id"]: row for row in rows}.values())
    existing = await existing_action_ids(writer.conn, [row["id"] for row in unique])
    new = [row for row in unique if row["id"] not in existing]
    if new:
        await insert_rows(writer.conn, "actions", new)
        await writer.log("actions", new)
    return len(new)


async def list_actions(
    conn: aiosqlite.Connection,
    *,
    session_id: str | None = None,
    agent_id: str | None = None,
    action_type: str | None = None,
    outcome: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> tuple[list[Action], str | None]:
    """The timeline, newest first, filtered; returns a page and the next page's cursor.

    ``since`` is inclusive and ``until`` exclusive. The cursor is opaque to callers.
    """
    where: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("session_id", session_id),
        ("agent_id", agent_id),
        ("action_type", action_type),
        ("outcome", outcome),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if since is not None:
        where.append("at >= ?")
        params.append(to_db_time(since))
    if until is not None:
        where.append("at < ?")
        params.append(to_db_time(until))
    if cursor is not None:
        at, _, seq = cursor.rpartition(_CURSOR_SEP)
        where.append("(at, seq) < (?, ?)")
        params.extend([at, int(seq)])
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = await fetch(
        conn,
        f"SELECT seq, {columns('actions')} FROM actions {clause} ORDER BY at DESC, seq DESC LIMIT ?",
        [*params, limit + 1],
    )
    page = [from_row(Action, "actions", row[1:]) for row in rows[:limit]]
    last = rows[limit - 1] if len(rows) > limit else None
    next_cursor = None if last is None else _cursor(last, _column_index("actions", "at"))
    return page, next_cursor


def _cursor(row: Sequence[Any], time_index: int) -> str:
    return f"{row[time_index]}{_CURSOR_SEP}{row[0]}"


def valid_cursor(cursor: str) -> bool:
    """Whether ``cursor`` has the shape ``list_actions`` and ``list_sequences`` make."""
    at, sep, seq = cursor.rpartition(_CURSOR_SEP)
    if not sep or not _CURSOR_SEQ.fullmatch(seq):
        return False
    try:
        datetime.fromisoformat(at)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------- sequences


async def quiet_sessions(conn: aiosqlite.Connection, quiet_since: datetime) -> list[str]:
    """Sessions with open actions, none of them at or after ``quiet_since``."""
    rows = await fetch(
        conn,
        "SELECT session_id FROM actions WHERE sequence_id IS NULL"
        " GROUP BY session_id HAVING max(at) < ? ORDER BY min(at), session_id",
        (to_db_time(quiet_since),),
    )
    return [row[0] for row in rows]


async def open_actions(
    conn: aiosqlite.Connection, session_ids: Sequence[str]
) -> dict[str, list[Action]]:
    """Each session's actions not yet in a sequence, in the order they happened."""
    found: dict[str, list[Action]] = {}
    for start in range(0, len(session_ids), IN_LIST_ROWS):
        chunk = session_ids[start : start + IN_LIST_ROWS]
        rows = await fetch(
            conn,
            f"SELECT {columns('actions')} FROM actions WHERE sequence_id IS NULL"
            f" AND session_id IN ({placeholders(len(chunk))}) ORDER BY session_id, at, seq",
            chunk,
        )
        for action in await from_rows(Action, "actions", rows):
            found.setdefault(action.session_id, []).append(action)
    return found


async def open_injections(
    conn: aiosqlite.Connection, session_ids: Sequence[str]
) -> dict[str, list[tuple[str, str]]]:
    """Each session's recorded injections not yet in a sequence: [(id, pattern id)], in order."""
    found: dict[str, list[tuple[str, str]]] = {}
    for start in range(0, len(session_ids), IN_LIST_ROWS):
        chunk = session_ids[start : start + IN_LIST_ROWS]
        rows = await fetch(
            conn,
            "SELECT session_id, id, pattern_id FROM pattern_injections WHERE sequence_id IS NULL"
            f" AND session_id IN ({placeholders(len(chunk))}) ORDER BY session_id, at, seq",
            chunk,
        )
        for session_id, injection_id, pattern_id in rows:
            found.setdefault(session_id, []).append((injection_id, pattern_id))
    return found


async def open_action_ids(conn: aiosqlite.Connection, action_ids: Sequence[str]) -> set[str]:
    """Which of these actions are still outside a sequence."""
    found: set[str] = set()
    for start in range(0, len(action_ids), IN_LIST_ROWS):
        chunk = action_ids[start : start + IN_LIST_ROWS]
        # Filtered here rather than in SQL: with "sequence_id IS NULL" in the query, the
        # planner walked the partial index of open actions (0.5 s per call at 100K of them).
        rows = await fetch(
            conn,
            f"SELECT id, sequence_id FROM actions WHERE id IN ({placeholders(len(chunk))})",
            chunk,
        )
        found.update(row[0] for row in rows if row[1] is None)
    return found


#: Closed sequences per ledger entry, so that a large pass makes entries of bounded size.
SEQUENCES_PER_ENTRY = 100


class ClosedSequence(NamedTuple):
    """A sequence about to be stored, with the ids of its actions and injections."""

    sequence: ActionSequence
    action_ids: list[str]
    injection_ids: list[str]


async def insert_sequences(writer: StoreWriter, closed: Sequence[ClosedSequence]) -> None:
    """Store closed sequences and mark their actions and injections as part of them."""
    for start in range(0, len(closed), SEQUENCES_PER_ENTRY):
        chunk = closed[start : start + SEQUENCES_PER_ENTRY]
        payload = {
            "sequences": [carried(item.sequence) for item in chunk],
            "actions": {item.sequence.id: item.action_ids for item in chunk},
            "injections": {item.sequence.id: item.injection_ids for item in chunk},
        }
        await apply_sequences(writer, payload)
        await writer.log("action_sequences", payload)


async def apply_sequences(writer: StoreWriter, payload: dict[str, Any]) -> None:
    """``insert_sequences`` without the ledger entry (replay logs the original's)."""
    await insert_rows(writer.conn, "action_sequences", payload["sequences"])
    for table in ("actions", "injections"):
        members = [(sequence_id, i) for sequence_id, ids in payload[table].items() for i in ids]
        await writer.conn.executemany(
            f"UPDATE {_MEMBER_TABLES[table]} SET sequence_id = ? WHERE id = ?", members
        )


_MEMBER_TABLES = {"actions": "actions", "injections": "pattern_injections"}


async def get_sequence(conn: aiosqlite.Connection, sequence_id: str) -> ActionSequence | None:
    rows = await fetch(
        conn,
        f"SELECT {columns('action_sequences')} FROM action_sequences WHERE id = ?",
        (sequence_id,),
    )
    return from_row(ActionSequence, "action_sequences", rows[0]) if rows else None


async def list_sequences(
    conn: aiosqlite.Connection,
    *,
    session_id: str | None = None,
    agent_id: str | None = None,
    outcome: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> tuple[list[ActionSequence], str | None]:
    """Sequences by the time they ended, newest first, filtered; a page and the next cursor."""
    where: list[str] = []
    params: list[Any] = []
    for column, value in (("session_id", session_id), ("agent_id", agent_id), ("outcome", outcome)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if since is not None:
        where.append("ended_at >= ?")
        params.append(to_db_time(since))
    if until is not None:
        where.append("ended_at < ?")
        params.append(to_db_time(until))
    if cursor is not None:
        at, _, seq = cursor.rpartition(_CURSOR_SEP)
        where.append("(ended_at, seq) < (?, ?)")
        params.extend([at, int(seq)])
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = await fetch(
        conn,
        f"SELECT seq, {columns('action_sequences')} FROM action_sequences {clause}"
        " ORDER BY ended_at DESC, seq DESC LIMIT ?",
        [*params, limit + 1],
    )
    page = [from_row(ActionSequence, "action_sequences", row[1:]) for row in rows[:limit]]
    last = rows[limit - 1] if len(rows) > limit else None
    next_cursor = (
        None if last is None else _cursor(last, _column_index("action_sequences", "ended_at"))
    )
    return page, next_cursor


async def sequences_ended_between(
    conn: aiosqlite.Connection, start: datetime, end: datetime
) -> list[ActionSequence]:
    """Every sequence that ended after ``start`` and no later than ``end``, oldest first."""
    rows = await fetch(
        conn,
        f"SELECT {columns('action_sequences')} FROM action_sequences"
        " WHERE ended_at > ? AND ended_at <= ? ORDER BY ended_at, seq",
        (to_db_time(start), to_db_time(end)),
    )
    return await from_rows(ActionSequence, "action_sequences", rows)


async def first_sequences(conn: aiosqlite.Connection, count: int) -> list[ActionSequence]:
    """The first ``count`` sequences by the time they ended (a baseline)."""
    rows = await fetch(
        conn,
        f"SELECT {columns('action_sequences')} FROM action_sequences ORDER BY ended_at, seq LIMIT ?",
        (count,),
    )
    return await from_rows(ActionSequence, "action_sequences", rows)


async def intent_counts(conn: aiosqlite.Connection) -> list[tuple[str, int, int]]:
    """Per sequence intent (case folded): (intent, sequences, successful sequences)."""
    rows = await fetch(
        conn,
        "SELECT lower(intent), count(*), sum(outcome = 'success') FROM action_sequences"
        " WHERE intent != '' GROUP BY lower(intent)",
    )
    return [(row[0], row[1], row[2]) for row in rows]


async def action_paths(
    conn: aiosqlite.Connection, intent: str, *, outcome: str, limit: int
) -> list[list[tuple[str, str]]]:
    """The (action type, target type) path of each of the latest ``limit`` sequences with this
    intent (case folded) and outcome."""
    rows = await fetch(
        conn,
        "SELECT a.sequence_id, a.action_type, a.target_type FROM actions a WHERE a.sequence_id IN"
        " (SELECT id FROM action_sequences WHERE lower(intent) = ? AND outcome = ?"
        " ORDER BY ended_at DESC LIMIT ?) ORDER BY a.sequence_id, a.at, a.seq",
        (intent, outcome, limit),
    )
    paths: dict[str, list[tuple[str, str]]] = {}
    for sequence_id, action_type, target_type in rows:
        paths.setdefault(sequence_id, []).append((action_type, target_type))
    return list(paths.values())


async def sequences_text(conn: aiosqlite.Connection, fts_query: str, *, limit: int) -> list[int]:
    """Seqs of sequences whose intent matches an FTS5 query, best BM25 first."""
    sql = (
        "SELECT rowid FROM action_sequences_fts WHERE action_sequences_fts MATCH ?"
        " ORDER BY bm25(action_sequences_fts) LIMIT ?"
    )
    return [row[0] for row in await fetch(conn, sql, (fts_query, limit))]


async def sequences_by_seq(
    conn: aiosqlite.Connection, seqs: Sequence[int]
) -> dict[int, ActionSequence]:
    if not seqs:
        return {}
    rows = await fetch(
        conn,
        f"SELECT seq, {columns('action_sequences')} FROM action_sequences"
        f" WHERE seq IN ({placeholders(len(seqs))})",
        list(seqs),
    )
    return {row[0]: from_row(ActionSequence, "action_sequences", row[1:]) for row in rows}


# --------------------------------------------------------------- injections


async def record_injections(writer: StoreWriter, rows: Sequence[Row]) -> None:
    """Record that patterns were shown to an agent in a session (for the utilisation metric)."""
    if rows:
        await insert_rows(writer.conn, "pattern_injections", rows)
        await writer.log("pattern_injections", list(rows))
