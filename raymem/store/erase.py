"""Erasure: the text of memories, sessions or old turns removed from everywhere the file keeps it.

Forgetting hides a memory; erasing removes text. What one erasure reaches:

- a memory: the memory, the turns it was drawn from (whole turns: its text is
  theirs), and every other memory drawn from one of those turns;
- a session: its turns, its memories, every memory drawn from its turns, its row;
  any session left without turns goes too (a session row is made from its turns);
- retention: the turns received before a time; the memories drawn from them stay
  (they are the long-term memory that retention keeps).

The subsystems' tables (work items, episodes, procedural memory, review
proposals, dream changes) lose what was drawn from those: each has one eraser in
``raymem.store.erase_tables``, which says what it reaches.

All of it in one transaction:

- turns are deleted with their vectors (sqlite-vec zeroes a deleted vector) and
  their full-text entries;
- an erased memory stays in its version chain as a tombstone (text, topic key,
  event time, provenance and search questions emptied, ``erased_at`` set), hidden
  like a forgotten memory, its vector deleted;
- the subsystems' rows drawn from them are deleted (or their text emptied) by
  their table erasers (``erase_tables.TABLE_ERASERS``);
- every earlier ledger entry that carries erased text is rewritten by its op's
  redactor (``REDACTORS``), and one entry records the erasure, by ids only;
- the full-text indexes touched are merged ('optimize'): a deleted row's terms
  otherwise stay in older index segments until an automatic merge reaches them.

The writer connection runs with ``secure_delete`` on, so freed cells and pages are
zeroed. Two things remain for the store's owner once the transaction commits: the
old page images in the write-ahead log (``ProfileStore.truncate_wal``) and copies
outside the file (snapshots, shipped ledger segments). ``pending_seq`` says from
which ledger seq on an erasure still waits for them, until ``clear_pending``.
"""

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec

from raymem.errors import MemoryNotFound
from raymem.store import erase_tables
from raymem.store.erase_tables import TABLE_ERASERS, chunks, select_ids
from raymem.store.redaction import Redaction, Redactor, RowRedactor
from raymem.store.rows import content_hash, placeholders
from raymem.store.writer import StoreWriter, fetch

#: Ledger entries read, redacted and rewritten per step of the scan.
LEDGER_BATCH = 2000
#: The ``meta`` key holding the ledger seq of the newest erasure whose old copies remain.
PENDING_KEY = "erasure.pending_seq"
#: A tombstone's content hash: that of empty content, so it reveals nothing.
TOMBSTONE_HASH = content_hash("")


class Erasure(msgspec.Struct, kw_only=True, frozen=True):
    """What one erasure removed, by ids: the payload of its ``erase`` ledger entry."""

    at: str
    memories: list[str] = []  # memories made tombstones
    messages: list[str] = []  # turns deleted
    sessions: list[str] = []  # sessions deleted

    def is_empty(self) -> bool:
        return not (self.memories or self.messages or self.sessions)


def _redaction_of(erasure: Erasure) -> Redaction:
    return Redaction(
        at=erasure.at,
        memories=frozenset(erasure.memories),
        messages=frozenset(erasure.messages),
        sessions=frozenset(erasure.sessions),
    )


class SessionErasure(NamedTuple):
    erasure: Erasure
    memories_forgotten: int  # the session's own memories that were not yet forgotten


# ------------------------------------------------------------------ redactors


def _messages(payload: list[dict[str, Any]], redaction: Redaction, at: str) -> Any:
    # A "messages" entry is logged at the time its turns were received.
    return [turn for turn in payload if not redaction.drops_turn(turn, at)]


def _memory(payload: dict[str, Any], redaction: Redaction, at: str) -> Any:
    return redaction.memory(payload)


def _import(payload: dict[str, Any], redaction: Redaction, at: str) -> Any:
    return {
        table: ROW_REDACTORS[table](rows, redaction) if table in ROW_REDACTORS else rows
        for table, rows in payload.items()
    }


#: Archived tables whose rows an ``import`` entry carries and an erasure reaches; a
#: subsystem whose archived rows hold text drawn from turns or memories adds its own.
ROW_REDACTORS: dict[str, RowRedactor] = {
    "sessions": lambda rows, r: [row for row in rows if row["id"] not in r.sessions],
    "messages": lambda rows, r: [row for row in rows if not r.drops_turn(row, row["ingested_at"])],
    "memories": lambda rows, r: [r.memory_row(row) for row in rows],
    **erase_tables.ROW_REDACTORS,
}

#: Ledger ops whose payloads can carry text: op -> its redactor. A subsystem that
#: logs text (or text drawn from turns or memories) under an op of its own adds it.
REDACTORS: dict[str, Redactor] = {
    "messages": _messages,
    "memory": _memory,
    "import": _import,
    **erase_tables.REDACTORS,
}


async def _redact_ledger(writer: StoreWriter, redaction: Redaction) -> int:
    """Rewrite every ledger entry that carries erased text; returns how many changed.

    Every entry of a redactable op is decoded: about 5 µs an entry on LoCoMo's
    ledgers, where letting SQLite pick the entries that name an erased id (``instr``)
    was slower from 8 ids on (benchmarks/erase.py). A subsystem's op is read only
    when the erasure reached its rows, and an entry of it decoded only when its text
    names one of them (``erase_tables.NEEDLES``): its entries can be many (captured
    actions) and most erasures (a memory, retention) reach none of them.
    """
    needles = {op: erase_tables.needles(op, redaction) for op in REDACTORS}
    ops = [op for op in REDACTORS if needles[op] != []]
    sql = (
        f"SELECT seq, at, op, payload FROM ledger WHERE seq > ?"
        f" AND op IN ({placeholders(len(ops))}) ORDER BY seq LIMIT ?"
    )
    after, changed = 0, 0
    while rows := await fetch(writer.conn, sql, (after, *ops, LEDGER_BATCH)):
        updates = []
        for seq, at, op, payload in rows:
            wanted = needles[op]
            if wanted is not None and not any(needle in payload for needle in wanted):
                continue
            before = msgspec.json.decode(payload)
            redacted = REDACTORS[op](before, redaction, at)
            if redacted != before:
                updates.append((msgspec.json.encode(redacted).decode(), seq))
        if updates:
            await writer.conn.executemany("UPDATE ledger SET payload = ? WHERE seq = ?", updates)
        changed += len(updates)
        after = rows[-1][0]
    return changed


# ---------------------------------------------------------------- the rows


async def _drawn_from(writer: StoreWriter, turn_ids: Sequence[str]) -> list[str]:
    """Memories not yet erased whose sources include one of ``turn_ids``."""
    sql = (
        "SELECT DISTINCT m.id FROM memories m, json_each(m.source_message_ids) s"
        " WHERE m.erased_at IS NULL AND s.value IN ({})"
    )
    return await select_ids(writer, sql, turn_ids)


async def _apply(writer: StoreWriter, redaction: Redaction) -> None:
    """Delete the turns and sessions, make the memories tombstones, remove what the
    subsystems' tables drew from them (``TABLE_ERASERS``), redact the ledger."""
    conn = writer.conn
    messages, memories = sorted(redaction.messages), sorted(redaction.memories)
    touched = await select_ids(
        writer, "SELECT DISTINCT session_id FROM messages WHERE id IN ({})", messages
    )
    for chunk in chunks(messages):
        where = f"id IN ({placeholders(len(chunk))})"
        await writer.delete_vectors(
            "message_vectors", f"SELECT seq FROM messages WHERE {where}", chunk
        )
        await conn.execute(f"DELETE FROM messages WHERE {where}", chunk)
    for chunk in chunks(memories):
        where = f"id IN ({placeholders(len(chunk))})"
        await writer.delete_vectors(
            "memory_vectors", f"SELECT seq FROM memories WHERE {where}", chunk
        )
        await conn.execute(
            "UPDATE memories SET content = '', content_hash = ?, topic_key = NULL,"
            " event_time = NULL, source_message_ids = '[]', source_spans = '[]',"
            " search_queries = '', forgotten_at = coalesce(forgotten_at, ?),"
            f" erased_at = coalesce(erased_at, ?) WHERE {where}",
            (TOMBSTONE_HASH, redaction.at, redaction.at, *chunk),
        )
    for chunk in chunks(sorted(redaction.sessions)):
        await conn.execute(f"DELETE FROM sessions WHERE id IN ({placeholders(len(chunk))})", chunk)
    # Retention expires old turns but keeps their sessions (and the memories drawn from
    # them): a session row gone would read as evidence erased (a dream retires those).
    await _follow_remaining_turns(writer, touched, keep_empty=redaction.is_retention)
    for eraser in TABLE_ERASERS.values():
        redaction = redaction.adding(await eraser(writer, redaction))
    await _redact_ledger(writer, redaction)
    # Merge each touched full-text index into one segment without the deleted terms.
    if messages or redaction.messages_before is not None:
        await conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('optimize')")
    if memories:
        await conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
    await _mark_pending(writer)


async def _follow_remaining_turns(
    writer: StoreWriter, session_ids: Sequence[str], *, keep_empty: bool = False
) -> None:
    """Sessions that lost turns: gone with their last turn (unless ``keep_empty``), else
    starting at their first turn left.

    A session row is made from its turns (it starts at the earliest), so replaying
    the redacted ledger, which no longer holds the erased turns, makes the same rows.
    """
    for chunk in chunks(session_ids):
        where = f"id IN ({placeholders(len(chunk))})"
        if not keep_empty:
            await writer.conn.execute(
                f"DELETE FROM sessions WHERE {where}"
                " AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id = sessions.id)",
                chunk,
            )
        await writer.conn.execute(
            "UPDATE sessions SET started_at = coalesce((SELECT min(m.created_at) FROM messages m"
            f" WHERE m.session_id = sessions.id), started_at) WHERE {where}",
            chunk,
        )


async def _mark_pending(writer: StoreWriter) -> None:
    """Record that old copies of the file's content wait for removal.

    The mark is the seq of the ledger entry about to record this erasure (written
    after this, or appended under its own seq by replay: the mark is at most that
    seq). It replaces an older mark: old copies are removed by taking a new
    snapshot, which covers every erasure before it.
    """
    await writer.conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) SELECT ?, coalesce(max(seq), 0) + 1 FROM ledger",
        (PENDING_KEY,),
    )


# ------------------------------------------------------------- erasures


async def erase_memories(writer: StoreWriter, memory_ids: Sequence[str], *, at: str) -> Erasure:
    """Erase memories, the turns they were drawn from and every memory drawn from those.

    Already erased memories are left as they are; when nothing is left to erase,
    nothing is logged and the erasure returned is empty.

    Raises:
        MemoryNotFound: one of ``memory_ids`` is unknown.
    """
    rows = []
    for chunk in chunks(list(dict.fromkeys(memory_ids))):
        rows += await fetch(
            writer.conn,
            "SELECT id, source_message_ids, erased_at FROM memories"
            f" WHERE id IN ({placeholders(len(chunk))})",
            chunk,
        )
    known = {row[0] for row in rows}
    for memory_id in memory_ids:
        if memory_id not in known:
            raise MemoryNotFound(memory_id)
    targets = [row for row in rows if row[2] is None]
    sources = list(dict.fromkeys(i for row in targets for i in json.loads(row[1])))
    turns = await select_ids(writer, "SELECT id FROM messages WHERE id IN ({})", sources)
    drawn = await _drawn_from(writer, sources)
    memories = list(dict.fromkeys([row[0] for row in targets] + drawn))
    erasure = Erasure(at=at, memories=memories, messages=turns)
    return await _log(writer, erasure)


async def erase_session(writer: StoreWriter, session_id: str, *, at: str) -> SessionErasure:
    """Erase a session: its turns, its memories, the memories drawn from its turns, its row,
    and what the subsystems keep of it (``erase_tables``), even with no turn of it stored.

    Returns an empty erasure for a session nothing holds (unknown, or already erased).
    """
    forgotten = await fetch(
        writer.conn,
        "SELECT count(*) FROM memories WHERE session_id = ? AND forgotten_at IS NULL",
        (session_id,),
    )
    erasure = await _log(writer, await _session_erasure(writer, session_id, at))
    return SessionErasure(erasure, forgotten[0][0])


async def _session_erasure(writer: StoreWriter, session_id: str, at: str) -> Erasure:
    """What erasing a session reaches, read inside the transaction."""
    turns = [
        row[0]
        for row in await fetch(
            writer.conn, "SELECT id FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
        )
    ]
    own = await fetch(
        writer.conn,
        "SELECT id FROM memories WHERE session_id = ? AND erased_at IS NULL ORDER BY seq",
        (session_id,),
    )
    memories = list(dict.fromkeys([row[0] for row in own] + await _drawn_from(writer, turns)))
    found = await fetch(writer.conn, "SELECT id FROM sessions WHERE id = ?", (session_id,))
    known = bool(found) or await erase_tables.has_session_rows(writer, session_id)
    return Erasure(at=at, memories=memories, messages=turns, sessions=[session_id] if known else [])


async def _log(writer: StoreWriter, erasure: Erasure) -> Erasure:
    if not erasure.is_empty():
        await _apply(writer, _redaction_of(erasure))
        await writer.log("erase", erasure, at=erasure.at)
    return erasure


async def erase_turns_before(writer: StoreWriter, before: str) -> int:
    """Retention: erase the turns received before ``before``; returns how many.

    Age counts from when raymem received a turn (``ingested_at``), not from its
    message time: importing last year's conversation today keeps it for the whole
    retention period. The memories drawn from them stay.
    """
    count = await _erase_turns_before(writer, before)
    if count:
        await writer.log("purge", {"before": before, "count": count})
    return count


async def _erase_turns_before(writer: StoreWriter, before: str) -> int:
    rows = await fetch(writer.conn, "SELECT id FROM messages WHERE ingested_at < ?", (before,))
    if rows:
        redaction = Redaction(
            at=before,  # no memory becomes a tombstone: unused
            messages=frozenset(row[0] for row in rows),
            messages_before=before,
        )
        await _apply(writer, redaction)
    return len(rows)


# -------------------------------------------------------------- pending copies


async def pending_seq(writer: StoreWriter) -> int | None:
    """The ledger seq of the newest erasure whose old copies remain; None when none do."""
    rows = await fetch(writer.conn, "SELECT value FROM meta WHERE key = ?", (PENDING_KEY,))
    return int(rows[0][0]) if rows else None


async def clear_pending(writer: StoreWriter, *, upto_seq: int) -> None:
    """Old copies are gone as of ledger seq ``upto_seq``; a later erasure stays pending."""
    await writer.conn.execute(
        "DELETE FROM meta WHERE key = ? AND CAST(value AS INTEGER) <= ?", (PENDING_KEY, upto_seq)
    )


# ------------------------------------------------------------------- replay


async def replay_erase(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    await _apply(writer, _redaction_of(msgspec.convert(data, Erasure)))


async def replay_purge(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    await _erase_turns_before(writer, data["before"])


async def replay_session_delete(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    """An older version's session deletion (it forgot the memories); replayed as an erasure."""
    erasure = await _session_erasure(writer, data["id"], data["at"])
    if not erasure.is_empty():
        await _apply(writer, _redaction_of(erasure))
