"""Rows of a profile's tables as Python values: ids, times, column lists and conversions."""

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

import msgspec
import numpy as np

from raymem.types import Memory, MemoryFields, MemoryRecord, ProfileInfo, Session, StoredMessage


class NewMessage(msgspec.Struct, kw_only=True):
    """A turn about to be stored; ``created_at`` is a ``to_db_time`` string."""

    id: str
    session_id: str
    role: str
    content: str
    created_at: str


class NewMemory(MemoryRecord, kw_only=True):
    """A memory about to be stored; ``created_at`` is a ``to_db_time`` string."""

    id: str
    created_at: str


def _names(kind: type[msgspec.Struct]) -> tuple[str, ...]:
    return tuple(field.name for field in msgspec.structs.fields(kind))


#: Columns read back as a ``Memory`` (after the row's seq), in ``Memory``'s field terms.
MEMORY_FIELDS = (
    "id",
    *_names(MemoryFields),
    "created_at",
    "superseded_by",
    "forgotten_at",
    "erased_at",
)
MEMORY_COLUMNS = "seq, " + ", ".join(MEMORY_FIELDS)
MESSAGE_COLUMNS = "seq, id, session_id, role, content, created_at"


#: An episode's list columns, stored as JSON text.
EPISODE_LISTS = (
    "scope",
    "resources",
    "decisions",
    "verification",
    "followups",
    "source_message_ids",
    "source_memory_ids",
)


class TableColumns(NamedTuple):
    """A table's whole-row columns as archives carry them and replay restores them.

    Values are stored as SQLite holds them and carried as JSON values: ``json``
    columns hold JSON text (carried as lists or objects), ``lines`` columns
    newline-joined strings (carried as lists), ``flags`` 0/1 (carried as booleans; NULL
    stays null).
    """

    columns: tuple[str, ...]
    json: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()


#: Every table an archive carries and an ``import`` ledger entry restores, in the order
#: they are written; a subsystem with tables of its own adds them here.
RESTORED_TABLES: dict[str, TableColumns] = {
    "sessions": TableColumns(("id", "started_at", "ended_at", "consolidated_at")),
    "messages": TableColumns(
        ("id", "session_id", "role", "content", "created_at", "ingested_at", "extracted"),
        flags=("extracted",),
    ),
    "memories": TableColumns(
        (
            "id",
            *_names(MemoryRecord),
            "created_at",
            "superseded_by",
            "forgotten_at",
            "erased_at",
        ),
        json=("source_message_ids", "source_spans"),
        lines=("search_queries",),
    ),
    # The agent's context (store/blocks.py, store/work.py, store/episodes.py).
    "context_blocks": TableColumns(("name", "char_limit", "created_at")),
    "block_entries": TableColumns(("block", "content", "created_at", "updated_at")),
    "work_items": TableColumns(
        (
            "id",
            "session_id",
            "objective",
            "delivery_target",
            "constraints",
            "scope",
            "status",
            "outcome",
            "opened_at",
            "updated_at",
            "closed_at",
        ),
        json=("constraints", "scope"),
    ),
    "work_entries": TableColumns(
        ("item_id", "type", "content", "done", "created_at", "done_at"), flags=("done",)
    ),
    "episodes": TableColumns(
        (
            "id",
            "trigger",
            "work_item_id",
            "session_id",
            "title",
            "delivery_target",
            "summary",
            *EPISODE_LISTS,
            "started_at",
            "ended_at",
            "created_at",
            "builder",
        ),
        json=EPISODE_LISTS,
    ),
    # Dreaming and the review queue (dreams.sql).
    "retired_memories": TableColumns(("memory_id", "reason")),
    "memory_use": TableColumns(("memory_id", "recalled_count", "last_recalled_at")),
    "review_mode": TableColumns(("id", "mode", "below")),
    "proposals": TableColumns(
        (
            "id",
            "action",
            "memory_id",
            "target_id",
            "confidence",
            "reason",
            "state",
            "created_at",
            "decided_at",
        )
    ),
    # Procedural memory (procedural.sql); the Structs of raymem.types_procedural name the same
    # columns in the same order.
    "procedural_state": TableColumns(("id", "enabled", "updated_at"), flags=("enabled",)),
    "actions": TableColumns(
        (
            "id",
            "session_id",
            "agent_id",
            "action_type",
            "target_type",
            "target_ids",
            "outcome",
            "error_code",
            "duration_ms",
            "intent",
            "at",
            "captured_at",
            "sequence_id",
        ),
        json=("target_ids",),
    ),
    "action_sequences": TableColumns(
        (
            "id",
            "session_id",
            "agent_id",
            "started_at",
            "ended_at",
            "closed_at",
            "closed_by",
            "outcome",
            "action_count",
            "failure_count",
            "duration_ms",
            "intent",
            "summarised_by",
            "steps",
            "warned",
            "avoided",
        ),
        json=("steps", "warned"),
        flags=("avoided",),
    ),
    "patterns": TableColumns(
        (
            "id",
            "action_type",
            "target_type",
            "error_code",
            "outcome",
            "confidence",
            "samples",
            "hits",
            "precondition",
            "target_ids",
            "recommendation",
            "first_seen",
            "last_seen",
            "reinforced_at",
            "decay_steps",
            "evidence_through",
            "created_at",
            "updated_at",
            "superseded_by",
            "deleted_at",
            "suppressed",
            "annotation",
        ),
        json=("target_ids",),
        flags=("suppressed",),
    ),
    "pattern_injections": TableColumns(
        ("id", "session_id", "agent_id", "pattern_id", "at", "sequence_id")
    ),
    "metrics": TableColumns(
        (
            "id",
            "builtin",
            "active",
            "description",
            "action_types",
            "target_types",
            "success_condition",
            "aggregation",
            "value",
            "window_days",
            "baseline",
            "baseline_samples",
            "created_at",
            "updated_at",
        ),
        json=("action_types", "target_types"),
        flags=("builtin", "active"),
    ),
    "metric_benchmarks": TableColumns(
        ("metric_id", "at", "value", "samples", "baseline", "delta_vs_baseline")
    ),
    "skills": TableColumns(
        (
            "id",
            "name",
            "when_to_use",
            "steps",
            "inputs",
            "status",
            "source",
            "source_intent",
            "evidence",
            "created_at",
            "updated_at",
        ),
        json=("steps", "inputs", "evidence"),
    ),
}

COUNTS_SQL = (
    "SELECT (SELECT count(*) FROM messages),"
    " (SELECT count(*) FROM memories WHERE superseded_by IS NULL AND forgotten_at IS NULL),"
    " (SELECT count(*) FROM sessions)"
)


def utc_now() -> datetime:
    return datetime.now(UTC)


def to_db_time(moment: datetime) -> str:
    """UTC ISO 8601 with microseconds: sorts as text in time order. Naive times are UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def from_db_time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def message_id(session_id: str, role: str, content: str) -> str:
    """Content-addressed message id: the first 128 bits of SHA-256, as hex."""
    digest = hashlib.sha256()
    for part in (session_id, role, content):
        data = part.encode()
        digest.update(len(data).to_bytes(8, "big"))  # length-prefixed: no ambiguous joins
        digest.update(data)
    return digest.hexdigest()[:32]


def content_hash(content: str) -> str:
    """Hash of the normalised content (case and whitespace folded), for duplicate detection."""
    normalised = " ".join(content.lower().split()).rstrip(".!")
    return hashlib.sha256(normalised.encode()).hexdigest()[:32]


def memory_from_row(row: Sequence[Any]) -> Memory:
    """A ``Memory`` from a row of ``MEMORY_COLUMNS`` (its seq first, ignored)."""
    fields = dict(zip(MEMORY_FIELDS, row[1:], strict=True))
    fields["source_message_ids"] = json.loads(fields["source_message_ids"])
    fields["created_at"] = datetime.fromisoformat(fields["created_at"])
    fields["forgotten_at"] = from_db_time(fields["forgotten_at"])
    fields["erased_at"] = from_db_time(fields["erased_at"])
    return Memory(**fields)


def message_from_row(row: Sequence[Any]) -> StoredMessage:
    """A ``StoredMessage`` from a row of ``MESSAGE_COLUMNS`` (its seq first, ignored)."""
    return StoredMessage(
        id=row[1],
        session_id=row[2],
        role=row[3],
        content=row[4],
        created_at=datetime.fromisoformat(row[5]),
    )


def session_from_row(row: Sequence[Any]) -> Session:
    """A ``Session`` from (id, started_at, ended_at, consolidated_at, message count)."""
    return Session(
        id=row[0],
        started_at=datetime.fromisoformat(row[1]),
        ended_at=from_db_time(row[2]),
        consolidated_at=from_db_time(row[3]),
        message_count=row[4],
    )


def profile_info(name: str, counts: Sequence[int]) -> ProfileInfo:
    """A profile's counts, from a row of ``COUNTS_SQL``."""
    return ProfileInfo(name=name, messages=counts[0], memories=counts[1], sessions=counts[2])


def memory_values(memory: NewMemory) -> dict[str, Any]:
    """The ``memories`` columns of a new memory, list columns encoded as stored."""
    values = msgspec.structs.asdict(memory)
    values["source_message_ids"] = json.dumps(memory.source_message_ids)
    values["source_spans"] = json.dumps(memory.source_spans)
    values["search_queries"] = "\n".join(memory.search_queries)
    values["content_hash"] = content_hash(memory.content)
    return values


def stored_value(table: TableColumns, column: str, value: Any) -> Any:
    """A column's value as SQLite holds it, from the value an archive carries."""
    if column in table.json:
        return json.dumps(value if value is not None else [])
    if column in table.lines:
        return "\n".join(value or [])
    if column in table.flags:
        return None if value is None else int(bool(value))
    return value


def carried_value(table: TableColumns, column: str, value: Any) -> Any:
    """A column's value as an archive carries it, from the value SQLite holds."""
    if column in table.json:
        return json.loads(value) if value is not None else None
    if column in table.lines:
        return value.split("\n") if value else []
    if column in table.flags:
        return None if value is None else bool(value)
    return value


def placeholders(count: int) -> str:
    """``?,?,?`` for an ``IN (...)`` list of ``count`` values."""
    return ",".join("?" * count)


def qualified(columns: str, alias: str) -> str:
    """A column list with a table alias: ("seq, id", "m") -> "m.seq, m.id"."""
    return ", ".join(f"{alias}.{column}" for column in columns.split(", "))


def vector_blob(vector: Sequence[float] | np.ndarray) -> bytes:
    """A vector as sqlite-vec stores it: little-endian float32."""
    return np.asarray(vector, dtype=np.float32).tobytes()
