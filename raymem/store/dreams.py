"""Dream jobs and their changes in a profile's file: job rows, change lists, applying changes.

A dream (``raymem.pipelines.dream``) re-organises a copy of the profile, its
candidate (``<profile dir>/dreams/<id>.db``), and records each change it makes
there as a ``Change``. One function applies a change: to the candidate while the
dream runs, to the profile when it adopts the dream, and to another copy of the
profile replaying the ``dream_adopt`` ledger entry, so all three agree.
"""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import aiosqlite
import msgspec

from raymem.store.connection import open_sync
from raymem.store.rows import NewMemory, memory_values, placeholders
from raymem.store.writer import StoreWriter, fetch

Action = Literal["merge", "replace", "retire", "insight"]
DreamState = Literal["running", "ready", "adopted", "discarded", "failed", "cancelled"]
#: States in which a dream is still open: at most one per profile.
OPEN_STATES = ("running", "ready")

#: The columns of a memory a merge may rewrite: its content never changes in place.
MERGED_COLUMNS = (
    "source_message_ids",
    "source_spans",
    "search_queries",
    "importance",
    "confidence",
)


class Change(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One change a dream makes to the profile, with why.

    - ``merge``: ``memory_ids`` say one thing; all but ``kept`` are superseded by it.
    - ``replace``: ``memory_ids`` contradict each other; all but ``kept``, the newest,
      are superseded by it.
    - ``retire``: ``memory_ids`` are retired (hidden from recall, never deleted).
    - ``insight``: ``memory`` is a new statement drawn from ``memory_ids``.

    ``memory`` is the row the change writes: a new memory (an insight, a statement
    a model wrote for a merge), or ``kept`` with the merged sources and questions.
    ``content`` is the statement that holds afterwards (for ``retire``, what was
    retired); ``evidence`` the turns that support it.
    """

    action: Action
    memory_ids: list[str]
    content: str
    reason: str
    kept: str | None = None
    memory: NewMemory | None = None
    evidence: list[str] = []


class DreamRow(msgspec.Struct, kw_only=True):
    """A dream job as its row holds it; times are ``to_db_time`` strings."""

    id: str
    state: DreamState
    step: str
    instructions: str
    max_sessions: int
    base_seq: int
    counts: dict[str, int]
    started_at: str
    finished_at: str | None = None
    error: str | None = None


_COLUMNS = tuple(field.name for field in msgspec.structs.fields(DreamRow))
SELECT_DREAMS = f"SELECT {', '.join(_COLUMNS)} FROM dreams"


def dream_from_row(row: Sequence[Any]) -> DreamRow:
    values = dict(zip(_COLUMNS, row, strict=True))
    values["counts"] = json.loads(values["counts"])
    return msgspec.convert(values, DreamRow)


def _values(dream: DreamRow) -> list[Any]:
    values = msgspec.structs.asdict(dream)
    values["counts"] = json.dumps(dream.counts, sort_keys=True)
    return [values[column] for column in _COLUMNS]


# ------------------------------------------------------------------- jobs


async def get_dream(conn: aiosqlite.Connection, dream_id: str) -> DreamRow | None:
    rows = await fetch(conn, f"{SELECT_DREAMS} WHERE id = ?", (dream_id,))
    return dream_from_row(rows[0]) if rows else None


async def open_dream(conn: aiosqlite.Connection) -> DreamRow | None:
    """The dream that is running or waiting for review, if any."""
    sql = f"{SELECT_DREAMS} WHERE state IN ({placeholders(len(OPEN_STATES))}) ORDER BY started_at"
    rows = await fetch(conn, sql, OPEN_STATES)
    return dream_from_row(rows[0]) if rows else None


async def list_dreams(conn: aiosqlite.Connection, *, limit: int) -> list[DreamRow]:
    """The latest dreams, newest first."""
    rows = await fetch(conn, f"{SELECT_DREAMS} ORDER BY started_at DESC, id LIMIT ?", (limit,))
    return [dream_from_row(row) for row in rows]


async def save_dream(conn: aiosqlite.Connection, dream: DreamRow) -> None:
    """Insert or update a job row (job state is bookkeeping: it is not logged)."""
    await conn.execute(
        f"INSERT OR REPLACE INTO dreams ({', '.join(_COLUMNS)})"
        f" VALUES ({placeholders(len(_COLUMNS))})",
        _values(dream),
    )


# ---------------------------------------------------------------- changes


async def record_changes(
    conn: aiosqlite.Connection, dream_id: str, changes: Sequence[Change]
) -> None:
    """Append changes to a dream's list, after those already recorded."""
    rows = await fetch(
        conn, "SELECT coalesce(max(number), 0) FROM dream_changes WHERE dream_id = ?", (dream_id,)
    )
    first = int(rows[0][0]) + 1
    await conn.executemany(
        "INSERT INTO dream_changes (dream_id, number, change) VALUES (?, ?, ?)",
        [
            (dream_id, first + offset, msgspec.json.encode(change).decode())
            for offset, change in enumerate(changes)
        ],
    )


async def read_changes(conn: aiosqlite.Connection, dream_id: str) -> list[Change]:
    """A dream's changes, in the order it made them."""
    rows = await fetch(
        conn, "SELECT change FROM dream_changes WHERE dream_id = ? ORDER BY number", (dream_id,)
    )
    return [msgspec.json.decode(row[0], type=Change) for row in rows]


async def conflict(conn: aiosqlite.Connection, change: Change) -> str | None:
    """Why ``change`` cannot apply to this copy any more (None: it can).

    A change applies only to the memories it was computed from: each must still be
    current (not superseded or forgotten since). A write that arrived during the
    dream wins over the dream's change to the same memories.
    """
    ids = list(dict.fromkeys(change.memory_ids))
    rows = await fetch(
        conn,
        f"SELECT id, superseded_by IS NULL AND forgotten_at IS NULL FROM memories"
        f" WHERE id IN ({placeholders(len(ids))})",
        ids,
    )
    state = {row[0]: bool(row[1]) for row in rows}
    for memory_id in ids:
        if memory_id not in state:
            return f"memory {memory_id} no longer exists"
        if not state[memory_id]:
            return f"memory {memory_id} was superseded or forgotten since the dream began"
    return None


async def apply_change(writer: StoreWriter, change: Change, at: str) -> None:
    """Make one change inside the caller's transaction (not logged: see ``adopt``)."""
    if change.memory is not None:
        await _write_memory(writer, change.memory)
    if change.action in ("merge", "replace"):
        assert change.kept is not None  # a merge or replace always keeps one memory
        for memory_id in change.memory_ids:
            if memory_id != change.kept:
                await writer.supersede(memory_id, change.kept)
    elif change.action == "retire":
        for memory_id in change.memory_ids:
            await writer.mark_forgotten(memory_id, at)
        await writer.conn.executemany(
            "INSERT OR IGNORE INTO retired_memories (memory_id, reason) VALUES (?, ?)",
            [(memory_id, change.reason) for memory_id in change.memory_ids],
        )


async def _write_memory(writer: StoreWriter, memory: NewMemory) -> None:
    """Insert a new memory, or rewrite the merged columns of an existing one."""
    values = memory_values(memory)
    exists = await fetch(writer.conn, "SELECT 1 FROM memories WHERE id = ?", (memory.id,))
    if exists:
        assignments = ", ".join(f"{column} = :{column}" for column in MERGED_COLUMNS)
        await writer.conn.execute(f"UPDATE memories SET {assignments} WHERE id = :id", values)
        return
    columns = [name for name in values if name != "seq"]
    await writer.conn.execute(
        f"INSERT INTO memories ({', '.join(columns)})"
        f" VALUES ({', '.join(':' + name for name in columns)})",
        values,
    )


class Adopted(msgspec.Struct, kw_only=True):
    """What adopting a dream did: the changes applied, and those skipped with why."""

    applied: list[Change]
    skipped: list[tuple[Change, str]]


async def adopt(
    writer: StoreWriter, dream: DreamRow, changes: Sequence[Change], at: str
) -> Adopted:
    """Apply a dream's changes to the profile in the caller's transaction; one ledger entry.

    Changes whose memories were changed by writes that arrived during the dream
    are skipped; the rest apply in order. The profile keeps the applied changes
    (its diff stays readable) and marks the dream adopted.
    """
    outcome = Adopted(applied=[], skipped=[])
    for change in changes:
        reason = await conflict(writer.conn, change)
        if reason is not None:
            outcome.skipped.append((change, reason))
            continue
        await apply_change(writer, change, at)
        outcome.applied.append(change)
    adopted = msgspec.structs.replace(
        dream,
        state="adopted",
        finished_at=at,
        counts={**dream.counts, "applied": len(outcome.applied), "skipped": len(outcome.skipped)},
    )
    await _finish_adopt(writer, adopted, outcome.applied)
    await writer.log("dream_adopt", {"dream": adopted, "at": at, "changes": outcome.applied}, at=at)
    return outcome


async def _finish_adopt(writer: StoreWriter, dream: DreamRow, applied: Sequence[Change]) -> None:
    await writer.conn.execute("DELETE FROM dream_changes WHERE dream_id = ?", (dream.id,))
    await record_changes(writer.conn, dream.id, applied)
    await save_dream(writer.conn, dream)


async def replay_adopt(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    """The ``dream_adopt`` replayer: the changes the original applied, in order."""
    changes = msgspec.convert(data["changes"], list[Change])
    for change in changes:
        await apply_change(writer, change, data["at"])
    await _finish_adopt(writer, msgspec.convert(data["dream"], DreamRow), changes)


# ------------------------------------------------------------------ files


def candidate_dir(profile_path: Path) -> Path:
    """Where a profile's dreams write their candidates: ``<profile dir>/dreams``."""
    return profile_path.parent / "dreams"


def candidate_path(profile_path: Path, dream_id: str) -> Path:
    """Where a dream writes its candidate: ``<profile dir>/dreams/<dream id>.db``."""
    return candidate_dir(profile_path) / f"{dream_id}.db"


def copy_profile(source: Path, target: Path) -> None:
    """Copy a live profile file, consistent at one commit, with SQLite's backup API (blocking).

    The source is read through a read-only connection, so the copy never writes
    it, and writers go on meanwhile (WAL): the copy holds what was committed when
    it began.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_files(target)
    reader = open_sync(source)
    try:
        copy = open_sync(target, read_only=False)
        try:
            reader.backup(copy)
        finally:
            copy.close()
    finally:
        reader.close()


def remove_files(path: Path) -> None:
    """Delete an SQLite file with its ``-wal`` and ``-shm`` companions, if present."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
