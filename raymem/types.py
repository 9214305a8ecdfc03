"""The wire schema: msgspec Structs shared by the server, the client, the CLI and Ray calls.

Inbound bodies forbid unknown fields, so a misspelt key is a 400 rather than a
silently ignored option. Every Struct lives here, in an importable module,
because Ray pickles them between processes.
"""

from datetime import datetime
from typing import Annotated, Literal

import msgspec

MemoryType = Literal["fact", "event", "instruction", "task"]
#: What recall's ``types`` may ask for: memories of these types, and episodes.
RecallType = Literal["fact", "event", "instruction", "task", "episode"]
Role = Literal["user", "assistant", "tool", "system"]

# Names of profiles and sessions: they become directory names and actor names,
# so they are restricted to a safe alphabet and may not start with a dot.
NAME_PATTERN = r"^[A-Za-z0-9_\-][A-Za-z0-9._\-]{0,127}$"
Name = Annotated[str, msgspec.Meta(pattern=NAME_PATTERN)]
Fraction = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
NonEmptyText = Annotated[str, msgspec.Meta(min_length=1)]


class Schema(msgspec.Struct, kw_only=True):
    """Base for every type that crosses HTTP, Ray or object storage."""


class Request(Schema, forbid_unknown_fields=True):
    """Inbound bodies: unknown fields are rejected."""


# ----------------------------------------------------------------- requests


class MessageIn(Request, kw_only=True):
    role: Role
    content: NonEmptyText
    created_at: datetime | None = None  # message time; defaults to the time it is stored


class IngestRequest(Request, kw_only=True):
    session_id: Name
    messages: list[MessageIn]


class RememberRequest(Request, kw_only=True):
    content: NonEmptyText
    session_id: Name | None = None
    type: MemoryType | None = None  # None: classify it
    importance: Fraction | None = None


class RecallRequest(Request, kw_only=True):
    query: NonEmptyText
    limit: Annotated[int, msgspec.Meta(ge=1)] = 10
    types: list[RecallType] | None = None
    session_id: Name | None = None
    synthesize: bool = True
    include_messages: bool = True  # the raw-message channel (the safety net)
    # "Now" for the relative dates of the query ("yesterday", "how long ago"): the
    # server's clock when not given; replays and benchmarks pass the question's date.
    as_of: datetime | None = None


class AppendRequest(Request, kw_only=True):
    role: Role
    content: NonEmptyText
    created_at: datetime | None = None


# ---------------------------------------------------------------- responses


class MemoryFields(Schema, kw_only=True):
    """What every form of a memory carries: a candidate, a stored row, the wire ``Memory``.

    The one list of a memory's descriptive fields; each form adds what it alone has
    (a candidate its provenance spans and questions, a row its id and chain pointers).
    """

    type: str
    content: str
    topic_key: str | None = None
    event_time: str | None = None  # events: the ISO date they happened
    importance: float = 0.5
    confidence: float = 1.0
    session_id: str | None = None
    source_message_ids: list[str] = []


class MemoryRecord(MemoryFields, kw_only=True):
    """A memory as extraction proposes it and the store keeps it, beyond what the wire shows."""

    source_spans: list[tuple[int, int]] = []  # (first, last) sentence of each source message
    search_queries: list[str] = []  # 3-5 questions it answers, for full-text search


class Memory(MemoryFields, kw_only=True):
    id: str
    created_at: datetime
    superseded_by: str | None = None
    forgotten_at: datetime | None = None
    erased_at: datetime | None = None  # an erased memory is a tombstone: its text is gone


class MemoryWithHistory(Memory, kw_only=True):
    history: list[Memory] = []  # the supersession chain, oldest first, this one included


class RecallHit(Memory, kw_only=True):
    """A recalled memory, a raw message (type "message") that only the message channels
    found, or an episode (type "episode": its title and summary as content).

    A raw message whose memories were all replaced since is ``stale``: it ranks below
    what replaced it, and ``superseded_by`` names the memory that holds now.
    """

    score: float = 0.0
    channels: list[str] = []
    role: str | None = None  # set on raw messages only
    stale: bool = False
    source_ref: str = ""  # what GET …/refs/{source_ref} resolves: mem_…, msg_… or epi_…


class RecallResult(Schema, kw_only=True):
    answer: str
    memories: list[RecallHit]
    method: str
    latency_ms: dict[str, float]
    # Which stages a configured model ran: {"analysis": "rules+model", "answer": "model"};
    # "rules" without a model, "rules (model failed: ...)" when it failed or was slow.
    generated_by: dict[str, str] = {}


class StoredMessage(Schema, kw_only=True):
    id: str
    session_id: str
    role: str
    content: str
    created_at: datetime


class MessageCounts(Schema, kw_only=True):
    stored: int
    duplicates: int


class MemoryCounts(Schema, kw_only=True):
    added: int
    superseded: int
    duplicates: int


class IngestResult(Schema, kw_only=True):
    session_id: str
    messages: MessageCounts
    memories: MemoryCounts
    memory_ids: list[str]
    latency_ms: dict[str, float] = {}  # per pipeline stage, and total


class MemoryPage(Schema, kw_only=True):
    memories: list[Memory]
    next_cursor: str | None = None


class MessageList(Schema, kw_only=True):
    messages: list[StoredMessage]


class Session(Schema, kw_only=True):
    id: str
    started_at: datetime
    ended_at: datetime | None = None
    consolidated_at: datetime | None = None
    message_count: int = 0


class SessionList(Schema, kw_only=True):
    sessions: list[Session]


class SessionEnded(Schema, kw_only=True):
    session: Session
    memories: MemoryCounts
    memory_ids: list[str]
    latency_ms: dict[str, float] = {}  # per pipeline stage, and total
    # The episode finalised from the session's turns since its last one (GET …/refs/epi_<id>);
    # None when there were no new turns.
    episode_id: str | None = None
    action_sequence_id: str | None = None  # the sequence its agent's actions were closed into


class ProfileInfo(Schema, kw_only=True):
    name: str
    messages: int
    memories: int
    sessions: int


class ProfileList(Schema, kw_only=True):
    profiles: list[ProfileInfo]


class ErrorDetail(Schema, kw_only=True):
    code: str
    message: str


class ErrorBody(Schema, kw_only=True):
    error: ErrorDetail


class SnapshotResult(Schema, kw_only=True):
    key: str
    ledger_seq: int


class ArchiveCounts(Schema, kw_only=True, omit_defaults=True):
    sessions: int
    messages: int
    memories: int
    # Rows of the other tables (blocks, actions, ...) by table; left out when there are none.
    other: dict[str, int] = {}


class ImportResult(Schema, kw_only=True):
    profile: str
    ledger_seq: int
    counts: ArchiveCounts


class MemoryErasure(Schema, kw_only=True):
    """A memory erased: its text is gone from every copy (see the README).

    Erasing a memory also erases the turns it was drawn from and every other memory
    drawn from one of those turns. Erasing a memory erased before is a success that
    erases nothing more (a retry after a 503 finishes removing older copies).
    """

    memory_id: str
    memories_erased: int  # tombstones made now: this memory and those sharing its turns
    messages_erased: int  # turns deleted
    erased_memory_ids: list[str]


class SessionDeleted(Schema, kw_only=True):
    """A session erased: its turns and memories are gone from every copy (see the README)."""

    session_id: str
    messages_deleted: int
    memories_forgotten: int  # the session's memories that were still visible until now
    memories_erased: int = 0  # every memory erased: the session's, and others drawn from its turns


# ---------------------------------------------- dreams and the review queue
#
# A dream re-organises a copy of a profile into a candidate that a person reviews
# (its diff), then adopts or discards; the review queue holds low-confidence
# supersessions and merges until a person approves or rejects them.

DreamState = Literal["running", "ready", "adopted", "discarded", "failed", "cancelled"]
DreamAction = Literal["merge", "replace", "retire", "insight"]
ReviewModeName = Literal["apply", "review"]
ProposalAction = Literal["supersede", "merge"]
ProposalState = Literal["pending", "approved", "rejected"]

#: Plain-text instructions for a dream ("focus on coding preferences"), at most this long.
MAX_INSTRUCTIONS_CHARS = 4_000


class DreamRequest(Request, kw_only=True):
    """Start a dream; ``max_sessions`` bounds the recent sessions it reads (the
    server's ``dreams.max_sessions`` is the default and the maximum)."""

    instructions: Annotated[str, msgspec.Meta(max_length=MAX_INSTRUCTIONS_CHARS)] = ""
    max_sessions: Annotated[int, msgspec.Meta(ge=1)] | None = None


class DreamProgress(Schema, kw_only=True):
    """How far a dream got: the last step it completed, of ``total``."""

    step: str
    done: int
    total: int


class DreamStatus(Schema, kw_only=True):
    """A dream: its state, progress and counts (memories read, merged, replaced, ...)."""

    id: str
    state: DreamState
    progress: DreamProgress
    counts: dict[str, int]
    instructions: str
    max_sessions: int
    started_at: str
    finished_at: str | None = None
    error: str | None = None


class DreamList(Schema, kw_only=True):
    dreams: list[DreamStatus]


class DreamChange(Schema, kw_only=True):
    """One change of a dream, with why.

    ``merge`` and ``replace`` keep ``kept`` and supersede the other ``memory_ids``
    by it; ``retire`` hides ``memory_ids`` from recall (never deletes them);
    ``insight`` adds a new statement drawn from ``memory_ids``. ``content`` is what
    holds afterwards (for ``retire``, what was retired); ``evidence`` the turns
    that support it.
    """

    action: DreamAction
    memory_ids: list[str]
    content: str
    reason: str
    kept: str | None = None
    evidence: list[str] = msgspec.field(default_factory=list)


class DreamDiff(Schema, kw_only=True):
    """Every change a ready (or adopted) dream makes to its profile, in order."""

    id: str
    state: DreamState
    changes: list[DreamChange]


class SkippedChange(Schema, kw_only=True):
    """A change adopting left out: a write during the dream changed its memories."""

    change: DreamChange
    reason: str


class DreamAdopted(Schema, kw_only=True):
    dream: DreamStatus
    applied: int
    skipped: list[SkippedChange]


class ReviewMode(Schema, kw_only=True):
    """``review``: supersessions and merges with a confidence under ``below`` wait as
    proposals; ``apply``: reconciliation makes them at once."""

    mode: ReviewModeName
    below: Fraction


class ReviewModeRequest(Request, kw_only=True):
    mode: ReviewModeName
    below: Fraction | None = None  # None: keep the profile's threshold


class Proposal(Schema, kw_only=True):
    """A change waiting for review: ``memory_id`` (new) would supersede ``target_id``
    (``supersede``) or be folded into it (``merge``)."""

    id: str
    action: ProposalAction
    memory_id: str
    target_id: str
    confidence: float
    reason: str
    state: ProposalState
    created_at: str
    decided_at: str | None = None


class ProposalList(Schema, kw_only=True):
    proposals: list[Proposal]
