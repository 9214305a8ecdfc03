"""Applying another copy's ledger to this one, and restoring exported rows.

Ledger shipping and restore replay the entries a profile's ledger holds onto a
snapshot of it; an archive import restores whole rows. Each ledger op has one
replayer in ``REPLAYERS``: a subsystem that logs ops of its own adds its
replayers there.
"""

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from raymem.store import blocks, dreams, episodes, erase, memory_use, review, work
from raymem.store.procedural import replay as procedural
from raymem.store.rows import RESTORED_TABLES, content_hash, placeholders, stored_value
from raymem.store.writer import SESSION_UPSERT, StoreWriter, fetch

# A replayed turn starts unextracted; the "extracted" entry that followed it in
# the ledger (same transaction) marks it, exactly as on the original copy.
REPLAYED_MESSAGES_EXTRACTED = False

#: Applies one ledger entry's decoded payload (and the entry's time) to a transaction.
Replayer = Callable[[StoreWriter, Any, str], Awaitable[None]]


async def restore_rows(writer: StoreWriter, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert whole rows as exported (archive import, ledger replay); known ids are skipped.

    Rows carry the columns of ``RESTORED_TABLES[table]`` as archives carry them (list
    columns as lists). A memory's content hash is derived here; vectors are not part
    of a row: the rows are left to be vectorised.

    Raises:
        ValueError: an unknown table.
    """
    spec = RESTORED_TABLES.get(table)
    if spec is None:
        raise ValueError(f"Cannot restore rows of table {table!r}")
    if not rows:
        return
    names = list(spec.columns)
    values = [
        tuple(stored_value(spec, column, row.get(column)) for column in spec.columns)
        for row in rows
    ]
    if table == "memories":
        names.append("content_hash")
        values = [
            (*value, content_hash(row["content"])) for value, row in zip(values, rows, strict=True)
        ]
    await writer.conn.executemany(
        f"INSERT OR IGNORE INTO {table} ({', '.join(names)}) VALUES ({placeholders(len(names))})",
        values,
    )


async def replay(writer: StoreWriter, seq: int, at: str, op: str, payload: str) -> bool:
    """Apply one ledger entry of another copy of this profile, and log it under its seq.

    Idempotent: an entry at or below the local ledger seq is skipped, so replaying
    the same entries twice changes nothing. Returns whether it applied.

    Raises:
        ValueError: an op this version cannot replay.
    """
    if seq <= (await fetch(writer.conn, "SELECT coalesce(max(seq), 0) FROM ledger"))[0][0]:
        return False
    replayer = REPLAYERS.get(op)
    if replayer is None:
        raise ValueError(f"Cannot replay ledger op {op!r} (seq {seq})")
    await replayer(writer, json.loads(payload), at)
    await writer.append_ledger(seq, at, op, payload)
    return True


async def _messages(writer: StoreWriter, messages: list[dict[str, Any]], at: str) -> None:
    rows = [{**m, "ingested_at": at, "extracted": REPLAYED_MESSAGES_EXTRACTED} for m in messages]
    await restore_rows(writer, "messages", rows)
    await writer.conn.executemany(
        SESSION_UPSERT, [(m["session_id"], m["created_at"]) for m in messages]
    )


async def _memory(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    await restore_rows(writer, "memories", [data])


async def _supersede(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    await writer.supersede(data["old"], data["new"])


async def _forget(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    await writer.mark_forgotten(data["id"], data["at"])


async def _session_end(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    await writer.mark_session_ended(data["id"], data["at"])
    # consolidate_session marks the session's turns extracted in the same transaction.
    await writer.conn.execute(
        "UPDATE messages SET extracted = 1 WHERE session_id = ?", (data["id"],)
    )


async def _extracted(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    await writer.mark_extracted(data["ids"], log=False)


async def _import(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    for table in RESTORED_TABLES:
        await restore_rows(writer, table, data.get(table, []))


REPLAYERS: dict[str, Replayer] = {
    "messages": _messages,
    "memory": _memory,
    "supersede": _supersede,
    "forget": _forget,
    "session_end": _session_end,
    "extracted": _extracted,
    "import": _import,
    "session_delete": erase.replay_session_delete,
    "purge": erase.replay_purge,
    "erase": erase.replay_erase,
    # The agent's context.
    "block_limit": blocks.apply_limit,
    "block_delete": blocks.apply_delete,
    "block_entry_add": blocks.apply_add,
    "block_entry_replace": blocks.apply_replace,
    "block_entry_remove": blocks.apply_remove,
    "working_memory": work.apply,
    "episode": episodes.apply,
    "dream_adopt": dreams.replay_adopt,
    "memory_use": memory_use.replay_use,
    "review_mode": review.replay_mode,
    "proposal": review.replay_proposal,
    "proposal_decide": review.replay_decision,
    "procedural_enabled": procedural.enabled,
    "actions": procedural.captured,
    "action_sequences": procedural.sequences,
    "pattern_injections": procedural.injections,
    "patterns": procedural.patterns,
    "pattern_annotate": procedural.patterns,
    "metrics": procedural.metric_rows,
    "metric_delete": procedural.metric_delete,
    "metric_benchmarks": procedural.benchmarks,
    "skills": procedural.skill_rows,
    "skill_delete": procedural.skill_delete,
}
