"""Context assembly: a prompt-ready block within a character budget, slowest-changing first.

Sections, in a fixed order: core blocks, working memory, relevant memories,
relevant episodes, the session's recent turns. The first two depend only on what
is stored, not on the query: they get at most their configured shares of the
budget, computed from the budget alone, so their text (the prefix a provider's
prompt cache keys on) stays byte-identical from turn to turn until a block or a
work item changes. What they leave goes to the other three, by their shares
first, then in order to whichever can still use it.

Each section takes its candidates in priority order and keeps one only while the
section's rendered text still fits its allotment (a candidate too large is
skipped and reported in ``dropped``; recent turns stop at the first that does not
fit, so they stay contiguous). Every section is charged its text plus the blank
line before it, so the whole text never passes the budget, whatever it is.

What it costs: the memories come from a light recall (``Recaller.light``: no
model stages, ``recall_candidates`` per channel), read while the session's recent
turns are read on the store's reader thread; the core blocks and working memory
are read once per change of the store (``SlowSections``), not on every turn.
"""

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Iterator, Sequence

import numpy as np

from raymem.config import ContextSettings
from raymem.errors import InvalidRequest
from raymem.pipelines.context import render
from raymem.pipelines.context.working import snapshot
from raymem.pipelines.recall import Recaller
from raymem.store import ProfileStore
from raymem.store import blocks as block_store
from raymem.store.episodes import read_episode
from raymem.store.refs import message_ref
from raymem.types import RecallHit, RecallRequest, StoredMessage
from raymem.types_context import (
    SECTION_ORDER,
    ContextFormat,
    ContextItem,
    ContextRequest,
    ContextResult,
    ContextSection,
    SectionName,
)

log = logging.getLogger(__name__)

#: A turn taken as the query (no query given) counts with its first characters only:
#: the default limit on a recall query.
QUERY_CHARS = 2_000


def block_limits(settings: ContextSettings) -> dict[str, int]:
    """The default blocks and their limits, in the order contexts show them."""
    return {"user": settings.user_block_limit, "project": settings.project_block_limit}


def budget_of(request: ContextRequest, settings: ContextSettings) -> int:
    """The budget in characters that a request asks for.

    Raises:
        InvalidRequest: both budgets given, or one above the configured maximum.
    """
    if request.budget_chars is not None and request.budget_tokens is not None:
        raise InvalidRequest("Give budget_chars or budget_tokens, not both")
    if request.budget_tokens is not None:
        budget = math.floor(request.budget_tokens * settings.chars_per_token)
    else:
        budget = request.budget_chars or settings.default_budget_chars
    if budget > settings.max_budget_chars:
        raise InvalidRequest(
            f"A context budget is at most {settings.max_budget_chars:,} characters"
            f" ({budget:,} asked)"
        )
    return budget


class Section:
    """One section's candidates in priority order, and which of them it has taken."""

    def __init__(
        self,
        name: SectionName,
        candidates: Sequence[ContextItem],
        *,
        newest_first: bool = False,
    ) -> None:
        self.name = name
        self.candidates = list(candidates)
        self.taken = [False] * len(self.candidates)
        # Recent turns are taken newest first, shown oldest first, and stay contiguous.
        self.newest_first = newest_first
        self.chars = 0  # what the section is charged: its text and the line before it

    def items(self) -> list[ContextItem]:
        """The taken items, in the order the text shows them."""
        taken = [item for item, kept in zip(self.candidates, self.taken, strict=True) if kept]
        return taken[::-1] if self.newest_first else taken

    def dropped(self) -> list[str]:
        return [
            item.source_ref
            for item, kept in zip(self.candidates, self.taken, strict=True)
            if not kept
        ]

    def charge(self, fmt: ContextFormat, items: Sequence[ContextItem] | None = None) -> int:
        """What the section (or these items of it) takes: its text and the line before it."""
        text = render.render_section(self.name, self.items() if items is None else items, fmt)
        return len(text) + 1 if text else 0

    def wanted(self, fmt: ContextFormat) -> int:
        """What the section would take with every candidate."""
        shown = self.candidates[::-1] if self.newest_first else self.candidates
        return self.charge(fmt, shown)

    def fill(self, allotment: int, fmt: ContextFormat) -> int:
        """Take candidates, best first, while the section's charge stays within ``allotment``."""
        for index, kept in enumerate(self.taken):
            if kept:
                continue
            self.taken[index] = True
            if self.charge(fmt) > allotment:
                self.taken[index] = False
                if self.newest_first:
                    break
        self.chars = self.charge(fmt)
        return self.chars


def allocate(
    sections: dict[SectionName, Section], budget: int, settings: ContextSettings, fmt: ContextFormat
) -> None:
    """Fill the sections within ``budget``: the slow ones by their shares, the rest after.

    The other sections' allotments are settled before any of them is filled: each
    gets its share of what the slow ones left, or what it can use if less, and the
    remainder goes to those that can use more, in order. Each is then filled once,
    best candidate first, so a long top hit is not crowded out by shorter ones
    below it; what is still left after that is offered to each in order. Every
    allotment is capped by what is left, so shares that add up to more than the
    whole still never pass the budget.
    """
    slow: tuple[tuple[SectionName, float], ...] = (
        ("core", settings.core_share),
        ("working_memory", settings.working_memory_share),
    )
    used = 0
    for name, share in slow:
        used += sections[name].fill(min(math.floor(budget * share), budget - used), fmt)
    rest = budget - used
    shares: dict[SectionName, float] = {
        "memories": settings.memories_share,
        "episodes": settings.episodes_share,
        "recent_turns": settings.recent_turns_share,
    }
    wanted = {name: sections[name].wanted(fmt) for name in shares}
    allotted: dict[SectionName, int] = {}
    for name, share in shares.items():
        allotted[name] = min(wanted[name], math.floor(rest * share), rest - sum(allotted.values()))
    for name in shares:
        allotted[name] += min(wanted[name] - allotted[name], rest - sum(allotted.values()))
    for name in shares:
        sections[name].fill(allotted[name], fmt)
    for name in shares:
        spare = rest - sum(sections[other].chars for other in shares)
        sections[name].fill(sections[name].chars + spare, fmt)


# ---------------------------------------------------------------- sections


class SlowSections:
    """The core-block and working-memory candidates, kept until the store changes.

    Both are derived from stored records alone (working memory is deterministic),
    so they are read again only when another connection (the store's writer) has
    committed since: SQLite's ``data_version`` of the read connection says so in a
    microsecond. The profile actor keeps one per profile; a reopened store has a
    new read connection, which empties it.
    """

    def __init__(self) -> None:
        self._key: tuple[object, int] | None = None
        self._core: list[ContextItem] | None = None
        self._working: dict[str | None, list[ContextItem]] = {}

    def _check(self, store: ProfileStore) -> None:
        key = (store.quick, store.quick.execute("PRAGMA data_version").fetchone()[0])
        if self._key is None or self._key[0] is not key[0] or self._key[1] != key[1]:
            self._key, self._core, self._working = key, None, {}

    def core(self, store: ProfileStore, settings: ContextSettings) -> list[ContextItem]:
        self._check(store)
        if self._core is None:
            self._core = core_items(store, settings)
        return self._core

    def working_memory(
        self, store: ProfileStore, settings: ContextSettings, session_id: str | None
    ) -> list[ContextItem]:
        self._check(store)
        if session_id not in self._working:
            self._working[session_id] = working_memory_items(store, settings, session_id)
        return self._working[session_id]


def core_items(store: ProfileStore, settings: ContextSettings) -> list[ContextItem]:
    return [
        ContextItem(source_ref=ref, kind="block_entry", content=entry, type=block.name)
        for block in block_store.read_blocks(store.quick, block_limits(settings))
        for entry, ref in zip(block.entries, block.entry_refs, strict=True)
    ]


def working_memory_items(
    store: ProfileStore, settings: ContextSettings, session_id: str | None
) -> list[ContextItem]:
    """Open work items, then standing instructions, then tasks: as the snapshot holds them."""
    memory = snapshot(store, settings, session_id)
    items = [
        ContextItem(
            source_ref=item.source_ref,
            kind="work_item",
            content=render.work_item_text(item),
            created_at=item.opened_at,
        )
        for item in memory.work_items
    ]
    for line in [*memory.instructions, *memory.tasks]:
        items.append(
            ContextItem(
                source_ref=line.source_ref,
                kind="memory",
                content=render.memory_line_text(line),
                type=line.type,
                created_at=line.created_at,
            )
        )
    return items


def turn_item(message: StoredMessage) -> ContextItem:
    return ContextItem(
        source_ref=message_ref(message.id),
        kind="message",
        content=render.turn_text(message.role, message.content),
        role=message.role,
        created_at=message.created_at,
    )


def memory_items(hits: Sequence[RecallHit], shown_turns: set[str], limit: int) -> list[ContextItem]:
    """Recall's hits that tell the current truth, best first, at most ``limit``.

    Left out: episodes (they have their own section), stale turns (recall marks a
    turn whose memories were all replaced, and ranks what replaced it instead) and
    turns the recent-turns section holds already.
    """
    items = []
    for hit in hits:
        if hit.type == "episode" or hit.stale or hit.id in shown_turns:
            continue
        if hit.type == "message":
            when = hit.created_at.date().isoformat()
            label = f"{hit.role or 'user'} said"
        else:
            when = hit.event_time or ""
            label = hit.type
        items.append(
            ContextItem(
                source_ref=hit.source_ref,
                kind="message" if hit.type == "message" else "memory",
                content=render.recalled_memory_text(label, hit.content, when or None),
                type=None if hit.type == "message" else hit.type,
                role=hit.role,
                score=hit.score,
                created_at=hit.created_at,
            )
        )
    return items[:limit]


def episode_items(store: ProfileStore, hits: Sequence[RecallHit], limit: int) -> list[ContextItem]:
    """The episodes among recall's hits, best first, at most ``limit``."""
    items = []
    for hit in [hit for hit in hits if hit.type == "episode"][:limit]:
        episode = read_episode(store.quick, hit.id)
        items.append(
            ContextItem(
                source_ref=episode.source_ref,
                kind="episode",
                content=render.episode_text(episode),
                score=hit.score,
                created_at=episode.ended_at,
            )
        )
    return items


# ------------------------------------------------------------------ assembly


async def assemble(
    store: ProfileStore,
    recaller: Recaller,
    request: ContextRequest,
    settings: ContextSettings,
    *,
    query_vector: np.ndarray | None = None,
    slow: SlowSections | None = None,
) -> ContextResult:
    """The context for ``request``: sections in the fixed order, ``len(text) <= budget``.

    Args:
        store: the profile's store.
        recaller: recall over the same store (memories; its embedder for the query).
        request: the query (or none: the session's latest user turn), session and budget.
        settings: the context settings (limits, shares, how many candidates).
        query_vector: the query's vector when the caller has it (benchmarks); it is
            used only for the query the request gives.
        slow: the profile's cache of the core blocks and working memory; None
            reads them for this call alone.

    Raises:
        InvalidRequest: a budget that cannot be honoured.
    """
    started = time.perf_counter()
    budget = budget_of(request, settings)
    slow = slow if slow is not None else SlowSections()
    timings: dict[str, float] = {}
    candidates: dict[SectionName, list[ContextItem]] = {}

    with _timed(timings, "core"):
        candidates["core"] = slow.core(store, settings)
    with _timed(timings, "working_memory"):
        candidates["working_memory"] = slow.working_memory(store, settings, request.session_id)
    # The recent turns are read on the store's reader thread while recall runs here;
    # without a query, the latest user turn among them is the query, so recall waits.
    reading = asyncio.ensure_future(_timed_read(recent_turns(store, request, settings), timings))
    try:
        query = request.query.strip()
        if not query:
            query = _latest_user_turn(await reading)
        with _timed(timings, "memories"):
            # One recall finds both memories and episodes (its episode channel); its
            # time is counted here. Recall ranks the current truth: stale turns are
            # marked and what replaced them is ranked above them.
            hits: list[RecallHit] = []
            if query:
                given = query_vector if query == request.query.strip() else None
                recalled = await recaller.light(settings.recall_candidates).recall(
                    RecallRequest(
                        query=query,
                        limit=settings.memories + settings.episodes,
                        synthesize=False,
                        as_of=request.as_of,
                    ),
                    query_vector=given,
                )
                hits = recalled.memories
        turns = await reading
    finally:
        reading.cancel()  # a no-op once it is done; recall failed otherwise
    candidates["recent_turns"] = [turn_item(message) for message in reversed(turns)]
    candidates["memories"] = memory_items(hits, {t.id for t in turns}, settings.memories)
    with _timed(timings, "episodes"):
        candidates["episodes"] = episode_items(store, hits, settings.episodes)

    with _timed(timings, "assemble"):
        sections = {
            name: Section(name, candidates[name], newest_first=name == "recent_turns")
            for name in SECTION_ORDER
        }
        allocate(sections, budget, settings, request.format)
        shown = [(name, sections[name].items()) for name in SECTION_ORDER]
        text = render.render_context(shown, request.format)
    timings["total"] = (time.perf_counter() - started) * 1000
    return ContextResult(
        sections=[
            ContextSection(
                name=name,
                items=items,
                chars=len(render.render_section(name, items, request.format)),
            )
            for name, items in shown
        ],
        text=text,
        budget_chars=budget,
        dropped={name: refs for name in SECTION_ORDER if (refs := sections[name].dropped())},
        latency_ms={stage: round(ms, 3) for stage, ms in timings.items()},
    )


async def recent_turns(
    store: ProfileStore, request: ContextRequest, settings: ContextSettings
) -> list[StoredMessage]:
    """The session's latest turns, oldest first (none without a session)."""
    if request.session_id is None:
        return []
    rows = await store.reads.session_messages(request.session_id, last=settings.recent_turns)
    return [message for _, message in rows]


async def _timed_read(
    read: Awaitable[list[StoredMessage]], timings: dict[str, float]
) -> list[StoredMessage]:
    with _timed(timings, "recent_turns"):
        return await read


def _latest_user_turn(turns: Sequence[StoredMessage]) -> str:
    latest = next((turn.content for turn in reversed(turns) if turn.role == "user"), "")
    return latest.strip()[:QUERY_CHARS]


@contextlib.contextmanager
def _timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    """Records the milliseconds the block takes as ``timings[stage]``."""
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[stage] = (time.perf_counter() - started) * 1000
