"""What a JSON Lines archive is made of: its header and one line type per archived table.

Each archived table has a line type (a tagged Struct whose fields are the
table's columns, as ``raymem.store.rows.RESTORED_TABLES`` declares them) and an
entry in ``ARCHIVE_TABLES``, in the order the tables are written. A subsystem
that keeps tables of its own adds its line types and entries here.
"""

from typing import Any, Literal, NamedTuple

import msgspec

from raymem.store.rows import RESTORED_TABLES, TableColumns
from raymem.types import Name

ARCHIVE_FORMAT = "raymem-archive"
ARCHIVE_VERSION = 1


class Line(msgspec.Struct, kw_only=True, tag_field="kind", forbid_unknown_fields=True):
    """One line of an archive."""


class Counts(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    sessions: int
    messages: int
    memories: int  # every version, superseded and forgotten ones included
    other: dict[str, int] = {}  # rows of the other archived tables, by table


class Header(Line, tag="header", kw_only=True):
    format: str = ARCHIVE_FORMAT
    version: int = ARCHIVE_VERSION
    profile: str
    ledger_seq: int  # the source's ledger seq when the archive was written
    counts: Counts


class SessionLine(Line, tag="session", kw_only=True):
    id: Name  # names become API paths: an archive cannot smuggle in '../x'
    started_at: str
    ended_at: str | None
    consolidated_at: str | None


class MessageLine(Line, tag="message", kw_only=True):
    id: str
    session_id: Name
    role: str
    content: str
    created_at: str
    ingested_at: str
    extracted: bool


class MemoryLine(Line, tag="memory", kw_only=True, omit_defaults=True):
    id: str
    type: str
    content: str
    topic_key: str | None
    event_time: str | None
    importance: float
    confidence: float
    session_id: Name | None
    source_message_ids: list[str]
    source_spans: list[tuple[int, int]]
    search_queries: list[str]
    created_at: str
    superseded_by: str | None
    forgotten_at: str | None
    # Left out unless set, so a profile without erasures archives as it always did.
    erased_at: str | None = None


class BlockLine(Line, tag="block", kw_only=True):
    name: Name
    char_limit: int
    created_at: str


class BlockEntryLine(Line, tag="block_entry", kw_only=True):
    block: Name
    content: str
    created_at: str
    updated_at: str


class WorkItemLine(Line, tag="work_item", kw_only=True):
    id: str
    session_id: Name | None
    objective: str
    delivery_target: str | None
    constraints: list[str]
    scope: list[str]
    status: Literal["open", "closed"]
    outcome: str | None
    opened_at: str
    updated_at: str
    closed_at: str | None


class WorkEntryLine(Line, tag="work_entry", kw_only=True):
    item_id: str
    type: Literal["todo", "followup", "wait"]
    content: str
    done: bool
    created_at: str
    done_at: str | None


class EpisodeLine(Line, tag="episode", kw_only=True):
    id: str
    trigger: Literal["work_item", "session"]
    work_item_id: str | None
    session_id: Name | None
    title: str
    delivery_target: str | None
    summary: str
    scope: list[str]
    resources: list[str]
    decisions: list[str]
    verification: list[str]
    followups: list[str]
    source_message_ids: list[str]
    source_memory_ids: list[str]
    started_at: str | None
    ended_at: str
    created_at: str
    builder: str


class RetiredMemoryLine(Line, tag="retired_memory", kw_only=True):
    memory_id: str
    reason: str


class MemoryUseLine(Line, tag="memory_use", kw_only=True):
    memory_id: str
    recalled_count: int
    last_recalled_at: str


class ReviewModeLine(Line, tag="review_mode", kw_only=True):
    id: int
    mode: Literal["apply", "review"]
    below: float


class ProposalLine(Line, tag="proposal", kw_only=True):
    id: str
    action: Literal["supersede", "merge"]
    memory_id: str
    target_id: str
    confidence: float
    reason: str
    state: Literal["pending", "approved", "rejected"]
    created_at: str
    decided_at: str | None


class ProceduralStateLine(Line, tag="procedural_state", kw_only=True):
    id: int
    enabled: bool
    updated_at: str


class ActionLine(Line, tag="action", kw_only=True):
    id: str
    session_id: Name
    agent_id: str | None
    action_type: str
    target_type: str
    target_ids: list[str]
    outcome: str
    error_code: str | None
    duration_ms: float | None
    intent: str
    at: str
    captured_at: str
    sequence_id: str | None


class ActionSequenceLine(Line, tag="action_sequence", kw_only=True):
    id: str
    session_id: Name
    agent_id: str | None
    started_at: str
    ended_at: str
    closed_at: str
    closed_by: str
    outcome: str
    action_count: int
    failure_count: int
    duration_ms: float
    intent: str
    summarised_by: str
    steps: list[Any]
    warned: list[str]
    avoided: bool | None


class PatternLine(Line, tag="pattern", kw_only=True):
    id: str
    action_type: str
    target_type: str
    error_code: str | None
    outcome: str
    confidence: float
    samples: int
    hits: int
    precondition: str | None
    target_ids: list[str]
    recommendation: str
    first_seen: str
    last_seen: str
    reinforced_at: str
    decay_steps: int
    evidence_through: str
    created_at: str
    updated_at: str
    superseded_by: str | None
    deleted_at: str | None
    suppressed: bool
    annotation: str | None


class PatternInjectionLine(Line, tag="pattern_injection", kw_only=True):
    id: str
    session_id: Name
    agent_id: str | None
    pattern_id: str
    at: str
    sequence_id: str | None


class MetricLine(Line, tag="metric", kw_only=True):
    id: Name
    builtin: bool
    active: bool
    description: str
    action_types: list[str]
    target_types: list[str]
    success_condition: str
    aggregation: str
    value: str
    window_days: float
    baseline: float | None
    baseline_samples: int
    created_at: str
    updated_at: str


class MetricBenchmarkLine(Line, tag="metric_benchmark", kw_only=True):
    metric_id: Name
    at: str
    value: float | None
    samples: int
    baseline: float | None
    delta_vs_baseline: float | None


class SkillLine(Line, tag="skill", kw_only=True):
    id: str
    name: str
    when_to_use: str
    steps: list[str]
    inputs: list[dict[str, Any]]
    status: str
    source: str
    source_intent: str | None
    evidence: dict[str, Any]
    created_at: str
    updated_at: str


class ArchiveTable(NamedTuple):
    """One archived table: its name, the column giving insertion order, and its line type."""

    table: str
    order_by: str
    line: type[Line]

    @property
    def columns(self) -> TableColumns:
        return RESTORED_TABLES[self.table]


ARCHIVE_TABLES: list[ArchiveTable] = [
    ArchiveTable("sessions", "rowid", SessionLine),
    ArchiveTable("messages", "seq", MessageLine),
    ArchiveTable("memories", "seq", MemoryLine),
    ArchiveTable("context_blocks", "rowid", BlockLine),
    ArchiveTable("block_entries", "seq", BlockEntryLine),
    ArchiveTable("work_items", "seq", WorkItemLine),
    ArchiveTable("work_entries", "seq", WorkEntryLine),
    ArchiveTable("episodes", "seq", EpisodeLine),
    ArchiveTable("retired_memories", "memory_id", RetiredMemoryLine),
    ArchiveTable("memory_use", "memory_id", MemoryUseLine),
    ArchiveTable("review_mode", "id", ReviewModeLine),
    ArchiveTable("proposals", "seq", ProposalLine),
    ArchiveTable("procedural_state", "id", ProceduralStateLine),
    ArchiveTable("actions", "seq", ActionLine),
    ArchiveTable("action_sequences", "seq", ActionSequenceLine),
    ArchiveTable("patterns", "seq", PatternLine),
    ArchiveTable("pattern_injections", "seq", PatternInjectionLine),
    ArchiveTable("metrics", "seq", MetricLine),
    ArchiveTable("metric_benchmarks", "seq", MetricBenchmarkLine),
    ArchiveTable("skills", "seq", SkillLine),
]
#: The tables ``Counts`` names; any other archived table is counted in ``Counts.other``.
COUNTED_TABLES = ("sessions", "messages", "memories")
