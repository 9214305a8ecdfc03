"""Patterns: the current ones, their version chains, and the writes of the pattern pass."""

from collections.abc import Sequence
from datetime import datetime

import aiosqlite

from raymem.store.procedural.rows import carried, columns, from_row, upsert_rows
from raymem.store.rows import placeholders, to_db_time
from raymem.store.writer import StoreWriter, fetch
from raymem.types_procedural import Pattern

CURRENT = "superseded_by IS NULL AND deleted_at IS NULL"


async def current_patterns(conn: aiosqlite.Connection) -> list[Pattern]:
    """Every pattern neither superseded nor deleted."""
    rows = await fetch(conn, f"SELECT {columns('patterns')} FROM patterns WHERE {CURRENT}")
    return [from_row(Pattern, "patterns", row) for row in rows]


async def pattern_keys(conn: aiosqlite.Connection) -> dict[str, tuple[str, str, str | None]]:
    """Every pattern's (action type, target type, error code), superseded and deleted included."""
    rows = await fetch(conn, "SELECT id, action_type, target_type, error_code FROM patterns")
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


async def get_pattern(conn: aiosqlite.Connection, pattern_id: str) -> Pattern | None:
    rows = await fetch(
        conn, f"SELECT {columns('patterns')} FROM patterns WHERE id = ?", (pattern_id,)
    )
    return from_row(Pattern, "patterns", rows[0]) if rows else None


async def patterns_by_id(conn: aiosqlite.Connection, ids: Sequence[str]) -> dict[str, Pattern]:
    if not ids:
        return {}
    rows = await fetch(
        conn,
        f"SELECT {columns('patterns')} FROM patterns WHERE id IN ({placeholders(len(ids))})",
        list(ids),
    )
    patterns = [from_row(Pattern, "patterns", row) for row in rows]
    return {pattern.id: pattern for pattern in patterns}


async def history(conn: aiosqlite.Connection, pattern_id: str) -> list[Pattern]:
    """The version chain ``pattern_id`` belongs to, oldest first (empty for an unknown id)."""
    found = await get_pattern(conn, pattern_id)
    if found is None:
        return []
    chain = [found]
    while True:
        rows = await fetch(
            conn,
            f"SELECT {columns('patterns')} FROM patterns WHERE superseded_by = ?",
            (chain[0].id,),
        )
        if not rows:
            break
        chain.insert(0, from_row(Pattern, "patterns", rows[0]))
    while chain[-1].superseded_by is not None:
        successor = await get_pattern(conn, chain[-1].superseded_by)
        if successor is None:
            break
        chain.append(successor)
    return chain


async def list_patterns(
    conn: aiosqlite.Connection,
    *,
    action_type: str | None = None,
    target_type: str | None = None,
    outcome: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    include_inactive: bool = False,
    limit: int = 100,
) -> list[Pattern]:
    """Patterns by confidence (highest first, then id); ``since``/``until`` bound ``last_seen``.

    ``include_inactive`` adds superseded and deleted ones (suppressed ones are always listed,
    marked as such).
    """
    where, params = ([] if include_inactive else [CURRENT]), []
    for column, value in (
        ("action_type", action_type),
        ("target_type", target_type),
        ("outcome", outcome),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if since is not None:
        where.append("last_seen >= ?")
        params.append(to_db_time(since))
    if until is not None:
        where.append("last_seen < ?")
        params.append(to_db_time(until))
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = await fetch(
        conn,
        f"SELECT {columns('patterns')} FROM patterns {clause} ORDER BY confidence DESC, id LIMIT ?",
        [*params, limit],
    )
    return [from_row(Pattern, "patterns", row) for row in rows]


async def patterns_for_action(
    conn: aiosqlite.Connection, action_type: str, target_type: str, target_ids: Sequence[str]
) -> list[Pattern]:
    """Current patterns about an action: same action and target types, or any action type on
    one of the same targets. Ordered by confidence (highest first), then id."""
    sql = (
        f"SELECT {columns('patterns')} FROM patterns WHERE {CURRENT} AND target_type = ?"
        " AND (action_type = ?"
    )
    params: list[str] = [target_type, action_type]
    if target_ids:
        sql += (
            " OR EXISTS (SELECT 1 FROM json_each(patterns.target_ids) AS t"
            f" WHERE t.value IN ({placeholders(len(target_ids))}))"
        )
        params.extend(target_ids)
    rows = await fetch(conn, sql + ") ORDER BY confidence DESC, id", params)
    return [from_row(Pattern, "patterns", row) for row in rows]


async def write_patterns(writer: StoreWriter, patterns: Sequence[Pattern], *, op: str) -> None:
    """Store new patterns and new states of stored ones, logged as ``op``."""
    if not patterns:
        return
    rows = [carried(pattern) for pattern in patterns]
    await upsert_rows(writer.conn, "patterns", rows)
    await writer.log(op, rows)
