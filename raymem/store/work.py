"""Work items: the explicit part of working memory (objective, target, limits, plan, waits).

A work item is opened, updated while open (its todos added and checked, follow-ups
and wait conditions added and resolved) and closed once. Todos, follow-ups and
waits are addressed by their whole normalised text, like block entries. Every
change that alters an item is logged as one ``working_memory`` ledger entry whose
payload is the delta (``action``: open, update or close, and what it set), in the
same transaction; a change that alters nothing logs nothing. The replayer applies
the same delta to another copy.

Reads run on the blocking read connection: they are indexed and bounded.
"""

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from raymem.errors import EntryNotFound, WorkItemClosed, WorkItemNotFound
from raymem.store.refs import memory_ref, normalise, work_item_ref
from raymem.store.rows import from_db_time, placeholders, to_db_time
from raymem.store.writer import StoreWriter, fetch
from raymem.types_context import MemoryLine, WorkEntry, WorkItem, WorkItemOpen, WorkItemUpdate

LEDGER_OP = "working_memory"
ITEM_COLUMNS = (
    "seq, id, session_id, objective, delivery_target, constraints, scope, status, outcome,"
    " opened_at, updated_at, closed_at"
)
ENTRY_COLUMNS = "item_id, type, content, done, created_at, done_at"
#: The list of a ``WorkItem`` that holds each kind of entry.
ENTRY_LISTS = {"todo": "todos", "followup": "followups", "wait": "waits"}
#: The fields of ``WorkItemUpdate`` that add entries, or mark them done or not done.
ADDS = {"add_todos": "todo", "add_followups": "followup", "add_waits": "wait"}
MARKS = {
    "check_todos": ("todo", True),
    "uncheck_todos": ("todo", False),
    "resolve_followups": ("followup", True),
    "resolve_waits": ("wait", True),
}
SETTABLE = ("objective", "delivery_target", "constraints", "scope")


# ----------------------------------------------------------------- rows


def _entry(row: Sequence[Any]) -> WorkEntry:
    return WorkEntry(
        content=row[2],
        done=bool(row[3]),
        created_at=datetime.fromisoformat(row[4]),
        done_at=from_db_time(row[5]),
    )


def _item(row: Sequence[Any], entries: Sequence[Sequence[Any]]) -> WorkItem:
    lists: dict[str, list[WorkEntry]] = {name: [] for name in ENTRY_LISTS.values()}
    for entry in entries:
        lists[ENTRY_LISTS[entry[1]]].append(_entry(entry))
    opened_at = datetime.fromisoformat(row[9])
    return WorkItem(
        id=row[1],
        source_ref=work_item_ref(row[1]),
        session_id=row[2],
        objective=row[3],
        delivery_target=row[4],
        constraints=json.loads(row[5]),
        scope=json.loads(row[6]),
        status=row[7],
        outcome=row[8],
        opened_at=opened_at,
        updated_at=datetime.fromisoformat(row[10]),
        closed_at=from_db_time(row[11]),
        **lists,
    )


def _items(quick: Any, rows: Sequence[Sequence[Any]]) -> list[WorkItem]:
    """Items for their rows, with their entries read in one statement."""
    if not rows:
        return []
    ids = [row[1] for row in rows]
    entries: dict[str, list[Sequence[Any]]] = {item_id: [] for item_id in ids}
    for entry in quick.execute(
        f"SELECT {ENTRY_COLUMNS} FROM work_entries WHERE item_id IN ({placeholders(len(ids))})"
        " ORDER BY seq",
        ids,
    ).fetchall():
        entries[entry[0]].append(entry)
    return [_item(row, entries[row[1]]) for row in rows]


# ----------------------------------------------------------------- reads


def read_item(quick: Any, item_id: str) -> WorkItem:
    """One work item with its entries.

    Raises:
        WorkItemNotFound: no work item has this id.
    """
    rows = quick.execute(f"SELECT {ITEM_COLUMNS} FROM work_items WHERE id = ?", (item_id,))
    found = rows.fetchall()
    if not found:
        raise WorkItemNotFound(item_id)
    return _items(quick, found)[0]


def list_items(
    quick: Any,
    *,
    session_id: str | None = None,
    status: str | None = None,
    limit: int = 50,
    before_seq: int | None = None,
) -> tuple[list[WorkItem], int | None]:
    """Work items, newest first; returns the page and the cursor (a seq) of the next one."""
    where, params = _filters(session_id, status)
    if before_seq is not None:
        where.append("seq < ?")
        params.append(before_seq)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = quick.execute(
        f"SELECT {ITEM_COLUMNS} FROM work_items {clause} ORDER BY seq DESC LIMIT ?",
        [*params, limit + 1],
    ).fetchall()
    next_seq = rows[limit - 1][0] if len(rows) > limit else None
    return _items(quick, rows[:limit]), next_seq


def open_items(quick: Any, session_id: str | None, *, limit: int) -> list[WorkItem]:
    """The open work items, oldest first: a session's and the profile-wide ones, or all.

    At most ``limit``, the oldest: an item keeps its place in working memory while
    newer ones come and go.
    """
    where = ["status = 'open'"]
    params: list[Any] = []
    if session_id is not None:
        where.append("(session_id = ? OR session_id IS NULL)")
        params.append(session_id)
    rows = quick.execute(
        f"SELECT {ITEM_COLUMNS} FROM work_items WHERE {' AND '.join(where)} ORDER BY seq LIMIT ?",
        [*params, limit],
    ).fetchall()
    return _items(quick, rows)


def _filters(session_id: str | None, status: str | None) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    if session_id is not None:
        where.append("session_id = ?")
        params.append(session_id)
    if status is not None:
        where.append("status = ?")
        params.append(status)
    return where, params


# ---------------------------------------------------------------- writes


async def _load(writer: StoreWriter, item_id: str) -> tuple[Sequence[Any], list[Sequence[Any]]]:
    """An item's row and entries, read inside the write transaction."""
    rows = await fetch(
        writer.conn, f"SELECT {ITEM_COLUMNS} FROM work_items WHERE id = ?", (item_id,)
    )
    if not rows:
        raise WorkItemNotFound(item_id)
    entries = await fetch(
        writer.conn,
        f"SELECT {ENTRY_COLUMNS} FROM work_entries WHERE item_id = ? ORDER BY seq",
        (item_id,),
    )
    return rows[0], entries


def _dedupe(texts: Sequence[str]) -> list[str]:
    """Trimmed texts, each normal form once, in order."""
    seen: dict[str, str] = {}
    for text in texts:
        seen.setdefault(normalise(text), text.strip())
    return list(seen.values())


async def open_item(
    writer: StoreWriter, request: WorkItemOpen, *, item_id: str, now: datetime
) -> WorkItem:
    """Open a work item with its objective, limits and first todos, follow-ups and waits."""
    at = to_db_time(now)
    item = {
        "id": item_id,
        "session_id": request.session_id,
        "objective": request.objective.strip(),
        "delivery_target": (request.delivery_target or "").strip() or None,
        "constraints": _dedupe(request.constraints),
        "scope": _dedupe(request.scope),
        "opened_at": at,
    }
    adds = [
        {"type": kind, "content": text}
        for kind, texts in (
            ("todo", request.todos),
            ("followup", request.followups),
            ("wait", request.waits),
        )
        for text in _dedupe(texts)
    ]
    payload = {"action": "open", "item": item, "add": adds}
    await apply(writer, payload, at)
    await writer.log(LEDGER_OP, payload, at=at)
    row, entries = await _load(writer, item_id)
    return _item(row, entries)


async def update_item(
    writer: StoreWriter, item_id: str, request: WorkItemUpdate, *, now: datetime
) -> WorkItem:
    """Apply an update to an open item; a change that alters nothing logs nothing.

    Raises:
        WorkItemNotFound: no work item has this id.
        WorkItemClosed: the item is closed.
        EntryNotFound: a todo, follow-up or wait to mark does not exist.
    """
    row, entries = await _load(writer, item_id)
    if row[7] != "open":
        raise WorkItemClosed(item_id)
    current = _item(row, entries)
    changes: dict[str, Any] = {}
    for field in SETTABLE:
        value = getattr(request, field)
        if value is None:
            continue
        if field == "delivery_target":
            value = value.strip() or None
        elif field == "objective":
            value = value.strip()
        else:
            value = _dedupe(value)
        if value != getattr(current, field):
            changes[field] = value
    known = {(entry[1], normalise(entry[2])): bool(entry[3]) for entry in entries}
    adds = []
    for field, kind in ADDS.items():
        for text in _dedupe(getattr(request, field)):
            if (kind, normalise(text)) not in known:
                known[(kind, normalise(text))] = False
                adds.append({"type": kind, "content": text})
    marks = []
    for field, (kind, done) in MARKS.items():
        for text in getattr(request, field):
            key = (kind, normalise(text))
            if key not in known:
                raise EntryNotFound(f"work item {item_id!r} ({ENTRY_LISTS[kind]})", text)
            if known[key] != done:
                known[key] = done
                marks.append({"type": kind, "content": key[1], "done": done})
    if not (changes or adds or marks):
        return current
    at = to_db_time(now)
    payload = {
        "action": "update",
        "id": item_id,
        "at": at,
        "set": changes,
        "add": adds,
        "mark": marks,
    }
    await apply(writer, payload, at)
    await writer.log(LEDGER_OP, payload, at=at)
    row, entries = await _load(writer, item_id)
    return _item(row, entries)


async def close_item(
    writer: StoreWriter,
    item_id: str,
    *,
    outcome: str | None,
    now: datetime,
    expected_update: datetime | None = None,
) -> WorkItem | None:
    """Close an open item; None when it changed since ``expected_update`` (nothing written).

    Raises:
        WorkItemNotFound: no work item has this id.
        WorkItemClosed: the item is closed already.
    """
    row, entries = await _load(writer, item_id)
    if row[7] != "open":
        raise WorkItemClosed(item_id)
    if expected_update is not None and datetime.fromisoformat(row[10]) != expected_update:
        return None
    at = to_db_time(now)
    payload = {
        "action": "close",
        "id": item_id,
        "at": at,
        "outcome": (outcome or "").strip() or None,
    }
    await apply(writer, payload, at)
    await writer.log(LEDGER_OP, payload, at=at)
    row, entries = await _load(writer, item_id)
    return _item(row, entries)


# ------------------------------------ applying a delta: the write above, or its replay


async def apply(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    """Apply one ``working_memory`` delta (open, update or close)."""
    action = data["action"]
    if action == "open":
        item = data["item"]
        await writer.conn.execute(
            "INSERT INTO work_items (id, session_id, objective, delivery_target, constraints,"
            " scope, status, opened_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?)",
            (
                item["id"],
                item["session_id"],
                item["objective"],
                item["delivery_target"],
                json.dumps(item["constraints"]),
                json.dumps(item["scope"]),
                item["opened_at"],
                item["opened_at"],
            ),
        )
        await _add_entries(writer, item["id"], data["add"], item["opened_at"])
    elif action == "update":
        await _apply_update(writer, data)
    elif action == "close":
        await writer.conn.execute(
            "UPDATE work_items SET status = 'closed', outcome = ?, closed_at = ?, updated_at = ?"
            " WHERE id = ?",
            (data["outcome"], data["at"], data["at"], data["id"]),
        )
    else:
        raise ValueError(f"Unknown working-memory action {action!r}")


async def _add_entries(
    writer: StoreWriter, item_id: str, adds: Sequence[dict[str, Any]], at: str
) -> None:
    await writer.conn.executemany(
        "INSERT INTO work_entries (item_id, type, content, created_at) VALUES (?, ?, ?, ?)",
        [(item_id, add["type"], add["content"], at) for add in adds],
    )


async def _apply_update(writer: StoreWriter, data: dict[str, Any]) -> None:
    item_id, at = data["id"], data["at"]
    for field, value in data["set"].items():
        if field not in SETTABLE:
            raise ValueError(f"Unknown work item field {field!r}")
        stored = json.dumps(value) if field in ("constraints", "scope") else value
        await writer.conn.execute(
            f"UPDATE work_items SET {field} = ? WHERE id = ?", (stored, item_id)
        )
    await _add_entries(writer, item_id, data["add"], at)
    rows = await fetch(
        writer.conn, "SELECT seq, type, content FROM work_entries WHERE item_id = ?", (item_id,)
    )
    for mark in data["mark"]:
        seq = next(
            (r[0] for r in rows if r[1] == mark["type"] and normalise(r[2]) == mark["content"]),
            None,
        )
        if seq is not None:
            await writer.conn.execute(
                "UPDATE work_entries SET done = ?, done_at = ? WHERE seq = ?",
                (int(mark["done"]), at if mark["done"] else None, seq),
            )
    await writer.conn.execute("UPDATE work_items SET updated_at = ? WHERE id = ?", (at, item_id))


def memory_lines(quick: Any, memory_type: str, *, limit: int) -> list[MemoryLine]:
    """The newest ``limit`` current memories of a type (tasks, instructions), oldest first."""
    rows = quick.execute(
        "SELECT id, type, content, created_at FROM memories WHERE type = ?"
        " AND superseded_by IS NULL AND forgotten_at IS NULL ORDER BY seq DESC LIMIT ?",
        (memory_type, limit),
    ).fetchall()
    return [
        MemoryLine(
            source_ref=memory_ref(row[0]),
            type=row[1],
            content=row[2],
            created_at=datetime.fromisoformat(row[3]),
        )
        for row in reversed(rows)
    ]
