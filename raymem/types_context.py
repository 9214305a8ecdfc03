"""Wire types of the agent's context: core blocks, work items, episodes, context, references.

Shared by the server, the clients and Ray calls, like ``raymem.types``: requests
forbid unknown fields, and every Struct lives in this importable module because
Ray pickles them between processes.
"""

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from raymem.types import (
    MemoryCounts,
    MemoryWithHistory,
    MessageCounts,
    MessageIn,
    Name,
    NonEmptyText,
    Request,
    Schema,
    StoredMessage,
)

PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
ContextFormat = Literal["markdown", "text"]
WorkItemStatus = Literal["open", "closed"]
SectionName = Literal["core", "working_memory", "memories", "episodes", "recent_turns"]
#: The sections of an assembled context, in their fixed order: slowest-changing first.
SECTION_ORDER: tuple[SectionName, ...] = (
    "core",
    "working_memory",
    "memories",
    "episodes",
    "recent_turns",
)

# ------------------------------------------------------------- core blocks


class BlockLimitRequest(Request, kw_only=True):
    """Create a block, or change its limit (characters of the rendered block)."""

    limit: PositiveInt


class EntryRequest(Request, kw_only=True):
    content: NonEmptyText


class EntryReplaceRequest(Request, kw_only=True):
    old: NonEmptyText  # the entry's whole text; case and spacing do not matter
    new: NonEmptyText


class Block(Schema, kw_only=True):
    name: str
    limit: int
    size: int  # characters of the rendered block: its entries joined by the separator
    entries: list[str]
    entry_refs: list[str] = msgspec.field(
        default_factory=list
    )  # the source_ref of each entry, in the same order


class BlockList(Schema, kw_only=True):
    blocks: list[Block]


class BlockSaved(Schema, kw_only=True):
    """A block whose limit was set, and whether that created it."""

    block: Block
    created: bool


class BlockWrite(Schema, kw_only=True):
    """The block after a write, and whether the entry was there already."""

    block: Block
    duplicate: bool = False
    source_ref: str = ""  # of the entry written (or of the one that already said it)


# ------------------------------------------------------------ working memory


class WorkEntry(Schema, kw_only=True):
    """A todo, follow-up or wait condition of a work item."""

    content: str
    done: bool = False  # a todo checked, a follow-up or wait resolved
    created_at: datetime
    done_at: datetime | None = None


class WorkItem(Schema, kw_only=True):
    id: str
    source_ref: str
    session_id: str | None = None
    objective: str
    delivery_target: str | None = None
    constraints: list[str] = msgspec.field(default_factory=list)
    scope: list[str] = msgspec.field(default_factory=list)  # scope limits: what is in and out
    status: WorkItemStatus = "open"
    outcome: str | None = None
    todos: list[WorkEntry] = msgspec.field(default_factory=list)  # the plan, in order
    followups: list[WorkEntry] = msgspec.field(default_factory=list)
    waits: list[WorkEntry] = msgspec.field(default_factory=list)  # what the work is waiting on
    opened_at: datetime
    updated_at: datetime
    closed_at: datetime | None = None


class WorkItemOpen(Request, kw_only=True):
    objective: NonEmptyText
    session_id: Name | None = None
    delivery_target: str | None = None
    constraints: list[NonEmptyText] = msgspec.field(default_factory=list)
    scope: list[NonEmptyText] = msgspec.field(default_factory=list)
    todos: list[NonEmptyText] = msgspec.field(default_factory=list)
    followups: list[NonEmptyText] = msgspec.field(default_factory=list)
    waits: list[NonEmptyText] = msgspec.field(default_factory=list)


class WorkItemUpdate(Request, kw_only=True):
    """Changes to an open work item; fields left out stay as they are.

    Todos, follow-ups and waits are addressed by their whole text (case and spacing
    aside). ``delivery_target: ""`` clears the target; ``constraints`` and ``scope``
    replace the lists.
    """

    objective: NonEmptyText | None = None
    delivery_target: str | None = None
    constraints: list[NonEmptyText] | None = None
    scope: list[NonEmptyText] | None = None
    add_todos: list[NonEmptyText] = msgspec.field(default_factory=list)
    check_todos: list[NonEmptyText] = msgspec.field(default_factory=list)
    uncheck_todos: list[NonEmptyText] = msgspec.field(default_factory=list)
    add_followups: list[NonEmptyText] = msgspec.field(default_factory=list)
    resolve_followups: list[NonEmptyText] = msgspec.field(default_factory=list)
    add_waits: list[NonEmptyText] = msgspec.field(default_factory=list)
    resolve_waits: list[NonEmptyText] = msgspec.field(default_factory=list)


class WorkItemClose(Request, kw_only=True):
    outcome: str | None = None


class WorkItemList(Schema, kw_only=True):
    work_items: list[WorkItem]  # newest first
    next_cursor: str | None = None


class MemoryLine(Schema, kw_only=True):
    """A task or instruction from memory, as working memory shows it."""

    source_ref: str
    type: str
    content: str
    created_at: datetime


class WorkingMemory(Schema, kw_only=True):
    """Where the work stands: derived from records, the same records give the same snapshot."""

    session_id: str | None = None
    work_items: list[WorkItem]  # open ones, oldest first
    tasks: list[MemoryLine]
    instructions: list[MemoryLine]


# ------------------------------------------------------------------ episodes


class Episode(Schema, kw_only=True):
    """What happened in a piece of work: finalised once, never changed."""

    id: str
    source_ref: str
    trigger: Literal["work_item", "session"]
    work_item_id: str | None = None
    session_id: str | None = None
    title: str
    delivery_target: str | None = None
    summary: str
    scope: list[str] = msgspec.field(default_factory=list)
    resources: list[str] = msgspec.field(default_factory=list)  # files, URLs and ids it touched
    decisions: list[str] = msgspec.field(default_factory=list)
    verification: list[str] = msgspec.field(default_factory=list)  # test, CI and check results
    followups: list[str] = msgspec.field(
        default_factory=list
    )  # carried forward: open todos, follow-ups and waits
    source_message_ids: list[str] = msgspec.field(default_factory=list)
    source_memory_ids: list[str] = msgspec.field(default_factory=list)
    started_at: datetime | None = None
    ended_at: datetime
    created_at: datetime
    builder: str = "rules"  # "rules", or the model backend that wrote it


class ClosedWorkItem(Schema, kw_only=True):
    work_item: WorkItem
    episode: Episode


class EpisodePage(Schema, kw_only=True):
    episodes: list[Episode]
    next_cursor: str | None = None


# ---------------------------------------------------------- context assembly


class ContextRequest(Request, kw_only=True):
    """What to assemble: for a query (or the session's latest user turn), within a budget.

    Give ``budget_chars`` or ``budget_tokens`` (converted with the configured
    characters per token), not both; neither: the configured default.
    """

    query: str = ""
    session_id: Name | None = None
    budget_chars: PositiveInt | None = None
    budget_tokens: PositiveInt | None = None
    format: ContextFormat = "markdown"
    # "Now" for the query's relative dates, as recall's ``as_of``; the server's clock
    # when not given.
    as_of: datetime | None = None


class ContextItem(Schema, kw_only=True):
    source_ref: str
    kind: str  # block_entry, work_item, memory, message, episode
    content: str  # as the text shows it
    type: str | None = None  # a memory's type, a block's name for a block entry
    role: str | None = None  # a turn's role
    score: float | None = None  # a recalled item's fused score
    created_at: datetime | None = None


class ContextSection(Schema, kw_only=True):
    name: SectionName
    items: list[ContextItem]
    chars: int  # characters this section takes in ``text``, its heading included


class ContextResult(Schema, kw_only=True):
    sections: list[ContextSection]  # every section, in the fixed order, empty ones included
    text: str  # ready to paste into a system prompt; never longer than budget_chars
    budget_chars: int
    dropped: dict[str, list[str]]  # section -> source_refs of the items cut to fit
    latency_ms: dict[str, float]  # per section, and total


# --------------------------------------------------------------------- flush


class FlushRequest(Request, kw_only=True):
    session_id: Name
    messages: list[MessageIn]


class FlushResult(Schema, kw_only=True):
    """What a flush stored; ``error`` says what failed instead of failing the call."""

    session_id: str
    messages: MessageCounts
    memories: MemoryCounts
    memory_ids: list[str]
    known: int = 0  # memories not stored because a core block already says them
    error: str | None = None
    latency_ms: dict[str, float] = msgspec.field(default_factory=dict)


# ---------------------------------------------------------------- references


class Resolved(Schema, kw_only=True, tag_field="kind"):
    """The record a ``source_ref`` names; ``kind`` tells which."""

    source_ref: str


class ResolvedMemory(Resolved, kw_only=True, tag="memory"):
    memory: MemoryWithHistory


class ResolvedMessage(Resolved, kw_only=True, tag="message"):
    message: StoredMessage
    before: list[StoredMessage] = msgspec.field(
        default_factory=list
    )  # the turns before it in its session, oldest first
    after: list[StoredMessage] = msgspec.field(default_factory=list)


class ResolvedEpisode(Resolved, kw_only=True, tag="episode"):
    episode: Episode


class ResolvedBlockEntry(Resolved, kw_only=True, tag="block_entry"):
    block: str
    content: str
    position: int  # 0-based place in the block


class ResolvedWorkItem(Resolved, kw_only=True, tag="work_item"):
    work_item: WorkItem


ResolvedRef = (
    ResolvedMemory | ResolvedMessage | ResolvedEpisode | ResolvedBlockEntry | ResolvedWorkItem
)
