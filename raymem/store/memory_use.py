"""How often recall returned each memory, and when it last did.

The profile actor counts the memories each recall returns and writes the counts
now and then in one transaction (``record``), off the request path. Ranking's
prior (``pipelines.prior``) and a dream's decay read them back.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import aiosqlite
import msgspec

from raymem.store.rows import placeholders
from raymem.store.writer import IN_LIST_ROWS, StoreWriter, fetch

_UPSERT = (
    "INSERT INTO memory_use (memory_id, recalled_count, last_recalled_at) VALUES (?, ?, ?)"
    " ON CONFLICT (memory_id) DO UPDATE SET"
    " recalled_count = recalled_count + excluded.recalled_count,"
    " last_recalled_at = max(last_recalled_at, excluded.last_recalled_at)"
)


class Use(msgspec.Struct, frozen=True):
    """A memory's use: how many recalls returned it, the last one at ``last_recalled_at``."""

    recalled_count: int
    last_recalled_at: str


async def add_use(writer: StoreWriter, counts: Mapping[str, int], at: str) -> None:
    """Add recall counts (memory id -> times returned) last seen at ``at`` (not logged)."""
    await writer.conn.executemany(
        _UPSERT, [(memory_id, count, at) for memory_id, count in sorted(counts.items())]
    )


async def record(writer: StoreWriter, counts: Mapping[str, int], at: str) -> None:
    """Add recall counts and log them, in the caller's transaction."""
    if not counts:
        return
    await add_use(writer, counts, at)
    await writer.log("memory_use", {"at": at, "counts": dict(sorted(counts.items()))}, at=at)


async def replay_use(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    """The ``memory_use`` replayer."""
    await add_use(writer, data["counts"], data["at"])


async def use_of(conn: aiosqlite.Connection, memory_ids: Sequence[str]) -> dict[str, Use]:
    """The use of each memory that recall has returned at least once."""
    found: dict[str, Use] = {}
    ids = list(memory_ids)
    for start in range(0, len(ids), IN_LIST_ROWS):
        chunk = ids[start : start + IN_LIST_ROWS]
        rows = await fetch(
            conn,
            "SELECT memory_id, recalled_count, last_recalled_at FROM memory_use"
            f" WHERE memory_id IN ({placeholders(len(chunk))})",
            chunk,
        )
        found.update({row[0]: Use(row[1], row[2]) for row in rows})
    return found


def use_of_sync(quick: Any, memory_ids: Sequence[str]) -> dict[str, Use]:
    """``use_of`` on a blocking connection, for recall: one indexed lookup per memory."""
    if not memory_ids:
        return {}
    rows = quick.execute(
        "SELECT memory_id, recalled_count, last_recalled_at FROM memory_use"
        f" WHERE memory_id IN ({placeholders(len(memory_ids))})",
        list(memory_ids),
    ).fetchall()
    return {row[0]: Use(row[1], row[2]) for row in rows}
