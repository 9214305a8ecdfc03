"""What an erasure removes from the subsystems' tables, and from the entries that wrote them.

``raymem.store.erase`` deletes the turns, sessions and memories an erasure names;
every other table whose rows hold text drawn from them has one eraser here
(``TABLE_ERASERS``, run in order in the same transaction), and the ledger ops and
archived tables that wrote those rows have a redactor (``REDACTORS``,
``ROW_REDACTORS``). What each reaches:

=====================  ===================  ====================  ==========
table                  memory erased        session erased        retention
=====================  ===================  ====================  ==========
work_items, entries    --                   the session's items   --
episodes               drawn from it or     the session's, and    --
                       from its turns       its items'
actions                --                   the session's         --
action_sequences       --                   the session's         --
pattern_injections     --                   the session's         --
patterns               --                   keys only its actions
                                            showed; its targets   --
skills (proposed,      --                   an intent only its    --
not accepted)                               sequences showed
proposals              naming it            naming its memories   --
retired_memories       its row              its memories' rows    --
dream_changes          changes naming it:   the same              --
                       text emptied
=====================  ===================  ====================  ==========

Retention expires raw turns only; what was drawn from them (memories, episodes,
sequences, patterns) is the long-term memory it keeps. Core memory blocks and
active skills are written by a person (or accepted by one) and never edited by an
erasure: erasing a memory whose text a block repeats leaves the block as it is.
A skill proposed from an intent and not accepted quotes that intent: it goes when
no sequence left shows the intent.
A dream's candidate file is a copy of the profile: the profile actor discards an
open dream after an erasure (``raymem.actors.profile.dreams``).

A redacted ledger entry of a row the erasure deletes keeps the row's ids and
loses its text, so that replay writes a row without text that the ``erase`` entry
after it deletes again, exactly as on the original; rows in a list are dropped.
"""

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from raymem.store.redaction import Redaction, Redactor, RowRedactor
from raymem.store.rows import placeholders
from raymem.store.writer import IN_LIST_ROWS, StoreWriter, fetch


def chunks(ids: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(ids), IN_LIST_ROWS):
        yield ids[start : start + IN_LIST_ROWS]


async def select_ids(writer: StoreWriter, sql: str, ids: Iterable[str]) -> list[str]:
    """The first column of ``sql`` (with one ``IN ({})`` list) over ``ids``, in chunks.

    A set of ids is read in sorted order, a sequence in its own.
    """
    ordered = ids if isinstance(ids, Sequence) else sorted(ids)
    found: dict[str, None] = {}
    for chunk in chunks(ordered):
        rows = await fetch(writer.conn, sql.format(placeholders(len(chunk))), chunk)
        found.update(dict.fromkeys(row[0] for row in rows))
    return list(found)


async def _delete(writer: StoreWriter, table: str, column: str, ids: Sequence[str]) -> None:
    for chunk in chunks(ids):
        await writer.conn.execute(
            f"DELETE FROM {table} WHERE {column} IN ({placeholders(len(chunk))})", chunk
        )


async def _delete_with_vectors(
    writer: StoreWriter, table: str, vectors: str, ids: Sequence[str]
) -> None:
    """Delete rows by id with their vectors, and merge the table's full-text index."""
    for chunk in chunks(ids):
        where = f"id IN ({placeholders(len(chunk))})"
        await writer.delete_vectors(vectors, f"SELECT seq FROM {table} WHERE {where}", chunk)
        await writer.conn.execute(f"DELETE FROM {table} WHERE {where}", chunk)
    if ids:  # a deleted row's terms otherwise stay in older index segments
        await writer.conn.execute(f"INSERT INTO {table}_fts ({table}_fts) VALUES ('optimize')")


#: Removes one table's rows (or their text) that an erasure reaches, inside its
#: transaction; returns what it removed (name -> ids) for the redactors.
TableEraser = Callable[[StoreWriter, Redaction], Awaitable[Mapping[str, Iterable[str]]]]


# ------------------------------------------------------------ the agent's context


async def _work_items(writer: StoreWriter, r: Redaction) -> Mapping[str, Iterable[str]]:
    """A session's work items (their objective and entries are that session's work)."""
    ids = await select_ids(writer, "SELECT id FROM work_items WHERE session_id IN ({})", r.sessions)
    await _delete(writer, "work_entries", "item_id", ids)
    await _delete(writer, "work_items", "id", ids)
    return {"work_items": ids}


async def _episodes(writer: StoreWriter, r: Redaction) -> Mapping[str, Iterable[str]]:
    """Episodes of an erased session or work item, or drawn from an erased memory or turn."""
    if r.is_retention:
        return {}
    select = "SELECT DISTINCT e.id FROM episodes e"
    ids = await select_ids(writer, f"{select} WHERE e.session_id IN ({{}})", r.sessions)
    ids += await select_ids(writer, f"{select} WHERE e.work_item_id IN ({{}})", r.ids("work_items"))
    for column, erased in (("source_memory_ids", r.memories), ("source_message_ids", r.messages)):
        ids += await select_ids(
            writer, f"{select}, json_each(e.{column}) s WHERE s.value IN ({{}})", erased
        )
    ids = list(dict.fromkeys(ids))
    await _delete_with_vectors(writer, "episodes", "episode_vectors", ids)
    return {"episodes": ids}


_EPISODE_TEXT: dict[str, Any] = {
    "title": "",
    "delivery_target": None,
    "summary": "",
    "scope": [],
    "resources": [],
    "decisions": [],
    "verification": [],
    "followups": [],
}


def _episode(payload: dict[str, Any], r: Redaction, at: str) -> Any:
    return {**payload, **_EPISODE_TEXT} if payload["id"] in r.ids("episodes") else payload


_WORK_ITEM_TEXT: dict[str, Any] = {
    "objective": "",
    "delivery_target": None,
    "constraints": [],
    "scope": [],
}


def _working_memory(payload: dict[str, Any], r: Redaction, at: str) -> Any:
    """A work item's delta: open, update or close; an erased item's keeps only its ids."""
    item_id = payload["item"]["id"] if payload["action"] == "open" else payload["id"]
    if item_id not in r.ids("work_items"):
        return payload
    blank = [{**entry, "content": ""} for entry in payload.get("add", [])]
    if payload["action"] == "open":
        return {**payload, "item": {**payload["item"], **_WORK_ITEM_TEXT}, "add": blank}
    if payload["action"] == "update":
        changed = {field: _WORK_ITEM_TEXT[field] for field in payload["set"]}
        marks = [{**mark, "content": ""} for mark in payload["mark"]]
        return {**payload, "set": changed, "add": blank, "mark": marks}
    return {**payload, "outcome": None}


# ------------------------------------------------------------- procedural memory


async def _actions(writer: StoreWriter, r: Redaction) -> Mapping[str, Iterable[str]]:
    """A session's captured actions; the targets and failure kinds they showed, for patterns."""
    rows = []
    for chunk in chunks(sorted(r.sessions)):
        # Through the indexes: a session's closed actions by its sequences, its open ones
        # by the partial index of open actions (the table has no index of sessions).
        where = placeholders(len(chunk))
        rows += await fetch(
            writer.conn,
            f"SELECT {_ACTION_COLUMNS} FROM actions WHERE sequence_id IN"
            f" (SELECT id FROM action_sequences WHERE session_id IN ({where}))"
            f" UNION ALL SELECT {_ACTION_COLUMNS} FROM actions"
            f" WHERE session_id IN ({where}) AND sequence_id IS NULL",
            [*chunk, *chunk],
        )
    ids = [row[0] for row in rows]
    await _delete(writer, "actions", "id", ids)
    return {
        "actions": ids,
        "action_targets": {target for row in rows for target in json.loads(row[1])},
        "action_keys": {_key(*row[2:5]) for row in rows if row[5] != "success"},
    }


_ACTION_COLUMNS = "id, target_ids, action_type, target_type, error_code, outcome"


def _key(action_type: str, target_type: str, error_code: str | None) -> str:
    """A pattern's key, as a string a redaction can hold."""
    return json.dumps([action_type, target_type, error_code])


async def _action_sequences(writer: StoreWriter, r: Redaction) -> Mapping[str, Iterable[str]]:
    sql = "SELECT id FROM action_sequences WHERE session_id IN ({})"
    ids = await select_ids(writer, sql, r.sessions)
    await _delete_with_vectors(writer, "action_sequences", "action_sequence_vectors", ids)
    return {"action_sequences": ids}


async def _pattern_injections(writer: StoreWriter, r: Redaction) -> Mapping[str, Iterable[str]]:
    sql = "SELECT id FROM pattern_injections WHERE session_id IN ({})"
    ids = await select_ids(writer, sql, r.sessions)
    await _delete(writer, "pattern_injections", "id", ids)
    return {"pattern_injections": ids}


async def _patterns(writer: StoreWriter, r: Redaction) -> Mapping[str, Iterable[str]]:
    """Patterns (every version) only erased actions showed; targets only they named.

    Runs after ``_actions``: the actions left are the evidence that remains.
    """
    keys, targets = r.ids("action_keys"), r.ids("action_targets")
    if not (keys or targets):
        return {}
    dead = set()
    for key in sorted(keys):  # a key still shown is found early; few are not
        if not await fetch(
            writer.conn,
            "SELECT 1 FROM actions WHERE action_type = ? AND target_type = ?"
            " AND error_code IS ? AND outcome != 'success' LIMIT 1",
            json.loads(key),
        ):
            dead.add(key)
    kept = await select_ids(
        writer,
        "SELECT DISTINCT j.value FROM actions a, json_each(a.target_ids) j WHERE j.value IN ({})",
        targets,
    )
    orphans = targets - set(kept)
    rows = await fetch(
        writer.conn, "SELECT id, action_type, target_type, error_code, target_ids FROM patterns"
    )
    gone = [row[0] for row in rows if _key(*row[1:4]) in dead]
    await _delete(writer, "patterns", "id", gone)
    pruned = [
        (json.dumps(left), row[0])
        for row in rows
        if row[0] not in gone
        and (left := [t for t in json.loads(row[4]) if t not in orphans]) != json.loads(row[4])
    ]
    await writer.conn.executemany("UPDATE patterns SET target_ids = ? WHERE id = ?", pruned)
    return {"patterns": gone, "pattern_targets": orphans}


async def _skills(writer: StoreWriter, r: Redaction) -> Mapping[str, Iterable[str]]:
    """Skills proposed from an intent that only erased sequences showed, not accepted
    (a candidate, or discarded): their name and when-to-use quote the intent.

    Runs after ``_action_sequences``: the sequences left are the evidence that remains.
    """
    if not r.ids("action_sequences"):
        return {}
    rows = await fetch(
        writer.conn,
        "SELECT id, source_intent FROM skills WHERE source = 'proposed'"
        " AND status != 'active' AND source_intent IS NOT NULL",
    )
    gone = [
        skill_id
        for skill_id, intent in rows
        if not await fetch(
            writer.conn, "SELECT 1 FROM action_sequences WHERE lower(intent) = ? LIMIT 1", (intent,)
        )
    ]
    await _delete_with_vectors(writer, "skills", "skill_vectors", gone)
    return {"skills": gone}


def _skill_rows(rows: list[dict[str, Any]], r: Redaction, at: str = "") -> Any:
    return [row for row in rows if row["id"] not in r.ids("skills")]


def _session_rows(rows: list[dict[str, Any]], r: Redaction, at: str = "") -> Any:
    """Rows of actions, sequences or injections, without the erased sessions'."""
    return [row for row in rows if row["session_id"] not in r.sessions]


def _pattern_rows(rows: list[dict[str, Any]], r: Redaction, at: str = "") -> Any:
    orphans = r.ids("pattern_targets")
    return [
        {**row, "target_ids": [t for t in row["target_ids"] if t not in orphans]}
        if orphans.intersection(row["target_ids"])
        else row
        for row in rows
        if row["id"] not in r.ids("patterns")
    ]


def _action_sequences_entry(payload: dict[str, Any], r: Redaction, at: str) -> Any:
    """Closed sequences with their members' ids, without the erased sessions'."""
    kept = _session_rows(payload["sequences"], r)
    if len(kept) == len(payload["sequences"]):
        return payload
    ids = {row["id"] for row in kept}
    return {
        "sequences": kept,
        **{part: {k: v for k, v in payload[part].items() if k in ids} for part in _MEMBERS},
    }


_MEMBERS = ("actions", "injections")


# ---------------------------------------------------------- dreams and the review


async def _proposals(writer: StoreWriter, r: Redaction) -> Mapping[str, Iterable[str]]:
    """Proposals that name an erased memory (their reason may quote it)."""
    sql = "SELECT id FROM proposals WHERE memory_id IN ({0}) OR target_id IN ({0})"
    ids: list[str] = []
    for chunk in chunks(sorted(r.memories)):
        rows = await fetch(writer.conn, sql.format(placeholders(len(chunk))), [*chunk, *chunk])
        ids += [row[0] for row in rows]
    await _delete(writer, "proposals", "id", ids)
    return {"proposals": ids}


def _proposal(payload: dict[str, Any], r: Redaction, at: str) -> Any:
    return {**payload, "reason": ""} if payload["id"] in r.ids("proposals") else payload


def redact_change(change: dict[str, Any], r: Redaction) -> dict[str, Any]:
    """A dream's change (decoded JSON) that names an erased memory, without its text."""
    named = {*change["memory_ids"], change.get("kept"), (change.get("memory") or {}).get("id")}
    if r.memories.isdisjoint(named):
        return change
    redacted = {**change, "content": "", "reason": ""}
    if change.get("memory"):
        redacted["memory"] = r.memory(change["memory"])
    if "evidence" in change:
        redacted["evidence"] = [turn for turn in change["evidence"] if turn not in r.messages]
    return redacted


async def _dream_changes(writer: StoreWriter, r: Redaction) -> Mapping[str, Iterable[str]]:
    """Adopted dreams' changes naming an erased memory lose their text; retired memories'
    reasons (a change's reason) go with it, and an erased memory's retirement row.
    """
    if not r.memories:
        return {}
    rows = await fetch(writer.conn, "SELECT dream_id, number, change FROM dream_changes")
    updates, retired = [], []
    for dream_id, number, text in rows:
        change = msgspec.json.decode(text)
        redacted = redact_change(change, r)
        if redacted != change:
            updates.append((msgspec.json.encode(redacted).decode(), dream_id, number))
            if change["action"] == "retire":
                retired += change["memory_ids"]
    await writer.conn.executemany(
        "UPDATE dream_changes SET change = ? WHERE dream_id = ? AND number = ?", updates
    )
    await writer.conn.executemany(
        "UPDATE retired_memories SET reason = '' WHERE memory_id = ?", [(i,) for i in retired]
    )
    await _delete(writer, "retired_memories", "memory_id", sorted(r.memories))
    return {}


def _dream_adopt(payload: dict[str, Any], r: Redaction, at: str) -> Any:
    return {**payload, "changes": [redact_change(c, r) for c in payload["changes"]]}


# ------------------------------------------------------------------- registries

#: Every subsystem table an erasure reaches, in the order its eraser runs (each one
#: sees what those before it recorded). A subsystem whose rows hold text drawn from
#: turns, memories or a session adds its eraser here.
TABLE_ERASERS: dict[str, TableEraser] = {
    "work_items": _work_items,  # with work_entries
    "episodes": _episodes,
    "actions": _actions,
    "action_sequences": _action_sequences,
    "pattern_injections": _pattern_injections,
    "patterns": _patterns,
    "skills": _skills,
    "proposals": _proposals,
    "dream_changes": _dream_changes,  # with retired_memories
}

#: Tables whose rows belong to a session (``session_id``): a session known only to them
#: (actions captured, a work item opened, without a turn) is a session to erase all the same.
SESSION_TABLES = ("work_items", "episodes", "action_sequences", "pattern_injections")


async def has_session_rows(writer: StoreWriter, session_id: str) -> bool:
    """Whether a subsystem's table holds a row of the session."""
    for table in SESSION_TABLES:
        if await fetch(
            writer.conn, f"SELECT 1 FROM {table} WHERE session_id = ? LIMIT 1", (session_id,)
        ):
            return True
    # Its actions: the open ones by their partial index; closed ones have a sequence above.
    sql = "SELECT 1 FROM actions WHERE session_id = ? AND sequence_id IS NULL LIMIT 1"
    return bool(await fetch(writer.conn, sql, (session_id,)))


#: Ledger ops of the subsystems whose payloads carry what the erasers remove.
REDACTORS: dict[str, Redactor] = {
    "episode": _episode,
    "working_memory": _working_memory,
    "actions": _session_rows,
    "action_sequences": _action_sequences_entry,
    "pattern_injections": _session_rows,
    "patterns": _pattern_rows,
    "pattern_annotate": _pattern_rows,
    "skills": _skill_rows,
    "proposal": _proposal,
    "dream_adopt": _dream_adopt,
}


def _quoted(ids: Iterable[str]) -> list[str]:
    """Ids as the ledger's JSON writes them, to look for in an entry's text."""
    return [msgspec.json.encode(i).decode() for i in sorted(ids)]


#: For the ops above: (redaction) -> the JSON strings one of which an entry's text holds
#: when the redaction can change it; an empty list: no entry of the op can change.
NEEDLES: dict[str, Callable[[Redaction], list[str]]] = {
    "episode": lambda r: _quoted(r.ids("episodes")),
    "working_memory": lambda r: _quoted(r.ids("work_items")),
    "actions": lambda r: _quoted(r.sessions),
    "action_sequences": lambda r: _quoted(r.sessions),
    "pattern_injections": lambda r: _quoted(r.sessions),
    "patterns": lambda r: _quoted(r.ids("patterns") | r.ids("pattern_targets")),
    "pattern_annotate": lambda r: _quoted(r.ids("patterns") | r.ids("pattern_targets")),
    "skills": lambda r: _quoted(r.ids("skills")),
    "proposal": lambda r: _quoted(r.ids("proposals")),
    "dream_adopt": lambda r: _quoted(r.memories),
}


def needles(op: str, redaction: Redaction) -> list[str] | None:
    """What an entry of ``op`` must contain to be redacted; None: any entry may be."""
    find = NEEDLES.get(op)
    return None if find is None else find(redaction)


def _without(column: str, name: str) -> RowRedactor:
    """Rows whose ``column`` names a row an eraser removed (recorded under ``name``)."""
    return lambda rows, r: [row for row in rows if row[column] not in r.ids(name)]


#: Archived tables of the subsystems whose rows an ``import`` entry carries.
ROW_REDACTORS: dict[str, RowRedactor] = {
    "work_items": _without("id", "work_items"),
    "work_entries": _without("item_id", "work_items"),
    "episodes": _without("id", "episodes"),
    "actions": _session_rows,
    "action_sequences": _session_rows,
    "pattern_injections": _session_rows,
    "patterns": _pattern_rows,
    "skills": _skill_rows,
    "proposals": _without("id", "proposals"),
    "retired_memories": lambda rows, r: [row for row in rows if row["memory_id"] not in r.memories],
}
