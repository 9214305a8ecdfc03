"""Ingest: content-addressed turns, extraction, dates, verification, classification, reconciliation.

Pure async functions over a ``ProfileStore``; no Ray imports. The stages, in order:

1. ids: every turn gets its content-addressed id; turns already stored are skipped.
2. extraction (``extract``): ~10,000-character chunks with a two-message overlap,
   up to 4 at once; a full pass, plus a detail pass for 9+ messages, merged.
3. dates (``temporal``): relative expressions resolved from each turn's time.
4. verification (``verify``): items checked against their cited lines; corrected or dropped.
5. classification (``classify``): type (by pattern, or by embedding prototype for
   an event or a fact when an embed function is given), scores, topic key, 3–5
   search questions.
6. reconciliation (``reconcile``): topic-key supersession, or a neighbour check by
   embedding when an embed function is given (one vector per text per ingest:
   classification's vectors are reused).
7. one write transaction: turns, memories, supersessions, the ledger.
8. vectors computed for reconciliation are stored; the rest is left to the
   actor's background vectoriser (tasks are never vectorised).

Model calls never happen inside the write transaction, and a failing model
degrades to the rules for that chunk or decision: an ingest does not fail
because a model did.
"""

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta

import numpy as np

from raymem.pipelines import classify, extract, reconcile, temporal, verify
from raymem.pipelines.classify import TypePrototypes
from raymem.pipelines.generators import Generator
from raymem.pipelines.known import KnownFacts
from raymem.pipelines.reconcile import EmbedFn, Reconciled, new_memory_id
from raymem.pipelines.types import Candidate, Chunk, Extracted
from raymem.store import (
    NewMessage,
    ProfileStore,
    content_hash,
    to_db_time,
    utc_now,
)
from raymem.store import message_id as make_message_id
from raymem.types import (
    IngestResult,
    MemoryCounts,
    MemoryType,
    MessageCounts,
    MessageIn,
    StoredMessage,
)

__all__ = [
    "EmbedFn",
    "Reconciled",
    "TypePrototypes",
    "append_turn",
    "build_messages",
    "consolidate_session",
    "extract_candidates",
    "ingest",
    "new_memory_id",
    "remember",
]

Timings = dict[str, float]


@contextmanager
def _timed(timings: Timings | None, stage: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        if timings is not None:
            timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - start


def build_messages(session_id: str, messages: Sequence[MessageIn]) -> list[NewMessage]:
    """Rows for the turns of a request, with content-addressed ids.

    A turn without a time gets the time of the request, one microsecond apart so
    that the conversation keeps its order.

    Args:
        session_id: the session the turns belong to.
        messages: the turns, in conversation order.
    """
    now = utc_now()
    rows = []
    for index, message in enumerate(messages):
        created = message.created_at or now + timedelta(microseconds=index)
        rows.append(
            NewMessage(
                id=make_message_id(session_id, message.role, message.content),
                session_id=session_id,
                role=message.role,
                content=message.content,
                created_at=to_db_time(created),
            )
        )
    return rows


def _chunk_stage(items: list[Extracted], chunk: Chunk) -> list[Extracted]:
    """Per chunk, in the order of the design: resolve dates, then verify against the lines."""
    return verify.verify_items(temporal.resolve_item_dates(items, chunk), chunk)


def _provenance(item: Extracted, chunk: Chunk) -> tuple[list[str], list[tuple[int, int]], str]:
    """Source message ids, (first, last) sentence span in each, and the first one's date."""
    by_index = {line.index: line for line in chunk.lines}
    spans: dict[str, tuple[int, int]] = {}
    first_date = ""
    for number in sorted(set(item.lines)):
        line = by_index[number]
        first_date = first_date or line.date
        low, high = spans.get(line.message_id, (line.line, line.line))
        spans[line.message_id] = (min(low, line.line), max(high, line.line))
    return list(spans), list(spans.values()), first_date


def _merge(candidates: list[Candidate]) -> list[Candidate]:
    """One candidate per normalised content: overlap and detail-pass repeats fold together."""
    merged: dict[str, Candidate] = {}
    for candidate in candidates:
        digest = content_hash(candidate.content)
        kept = merged.get(digest)
        if kept is None:
            merged[digest] = candidate
            continue
        kept.importance = max(kept.importance, candidate.importance)
        kept.confidence = max(kept.confidence, candidate.confidence)
        for message_id, span in zip(
            candidate.source_message_ids, candidate.source_spans, strict=True
        ):
            if message_id not in kept.source_message_ids:
                kept.source_message_ids.append(message_id)
                kept.source_spans.append(span)
    return list(merged.values())


async def extract_candidates(
    messages: Sequence[NewMessage],
    *,
    generator: Generator | None = None,
    timings: Timings | None = None,
    chunk_chars: int = extract.CHUNK_CHARS,
    embed: EmbedFn | None = None,
    prototypes: TypePrototypes | None = None,
    known: Sequence[str] = (),
) -> list[Candidate]:
    """Extraction through classification: the classified, verified candidates of new turns.

    Args:
        messages: the turns, in conversation order.
        generator: the model backend; None for the embedded rules.
        timings: stage name -> seconds, accumulated when given.
        chunk_chars: target characters per chunk.
        embed: texts -> unit vectors, for the type prototypes; None leaves a
            type no pattern gave as a fact. Every item is embedded in one call, so
            pass a caching one (as ``ingest`` does) for reconciliation to reuse.
        prototypes: the memory types' prototype vectors.
        known: what the agent already holds, shown to a model generator.
    """
    if not messages:
        return []
    with _timed(timings, "extract"):
        chunks = extract.build_chunks(messages, max_chars=chunk_chars)
        items = await extract.extract_chunks(
            chunks,
            generator,
            detail=len(messages) >= extract.DETAIL_MIN_MESSAGES,
            stage=_chunk_stage,
            known=known,
        )
    with _timed(timings, "classify"):
        if embed is not None and items:
            # One model call for the whole request: typing needs some of these vectors
            # and reconciliation most of the rest, and each call to a shared model pool
            # may queue behind other work. ``embed`` remembers them (``_embed_once``).
            await embed(list(dict.fromkeys(item.content.strip() for item, _ in items)))
        await classify.settle_types([item for item, _ in items], prototypes, embed)
        candidates = []
        for item, chunk in items:
            ids, spans, first_date = _provenance(item, chunk)
            candidates.append(
                classify.classify_item(
                    item, source_message_ids=ids, source_spans=spans, message_date=first_date
                )
            )
        return _merge(candidates)


async def ingest(
    store: ProfileStore,
    session_id: str,
    messages: Sequence[MessageIn],
    *,
    generator: Generator | None = None,
    embed: EmbedFn | None = None,
    prototypes: TypePrototypes | None = None,
    timings: Timings | None = None,
    known: KnownFacts | None = None,
) -> IngestResult:
    """Store a conversation's turns idempotently and the memories extracted from the new ones.

    Args:
        store: the profile's store.
        session_id: the session the turns belong to.
        messages: the turns, in conversation order.
        generator: the model backend; None runs the embedded rules in-process.
        embed: texts -> unit vectors, for the type prototypes and the neighbour
            check of reconciliation; None skips both (patterns still type, topic
            keys and exact duplicates still reconcile).
        prototypes: the memory types' prototype vectors (kept by the caller, so
            they are embedded once).
        timings: stage name -> seconds, accumulated when given (benchmarks).
        known: what the agent already holds (a flush passes the core blocks'
            entries): shown to a model generator, and the memories that repeat
            it are left out (``KnownFacts.leave_out``, counted there).

    Returns:
        The counts, the new memory ids, and ``latency_ms``: milliseconds per stage
        (ids, extract, classify, known, reconcile, write, vectors; embed is the
        model's share of classify, known and reconcile) and total.
    """
    started = time.perf_counter()
    spent: Timings = {}
    embed = _timed_embed(_embed_once(embed), spent)
    rows = build_messages(session_id, messages)
    with _timed(spent, "ids"):
        existing = await store.reads.existing_message_ids([row.id for row in rows])
        fresh = list({row.id: row for row in rows if row.id not in existing}.values())
    candidates = await extract_candidates(
        fresh,
        generator=generator,
        timings=spent,
        embed=embed,
        prototypes=prototypes,
        known=known.entries if known is not None else (),
    )
    if known is not None:
        with _timed(spent, "known"):
            candidates = await known.leave_out(candidates, embed)
    reconciled, stored = await _reconcile_and_write(
        store, rows, candidates, session_id, generator=generator, embed=embed, timings=spent
    )
    if timings is not None:
        for stage, seconds in spent.items():
            timings[stage] = timings.get(stage, 0.0) + seconds
    spent["total"] = time.perf_counter() - started
    return IngestResult(
        session_id=session_id,
        messages=MessageCounts(stored=len(stored), duplicates=len(rows) - len(stored)),
        memories=MemoryCounts(
            added=len(reconciled.added),
            superseded=reconciled.superseded,
            duplicates=reconciled.duplicates,
        ),
        memory_ids=reconciled.added,
        latency_ms={stage: round(seconds * 1000, 3) for stage, seconds in spent.items()},
    )


def _embed_once(embed: EmbedFn | None) -> EmbedFn | None:
    """``embed`` with a memory: a text embedded once is not sent to the model again.

    Classification embeds the memories it types by prototype; reconciliation
    embeds every memory it checks. One request's texts are few, so the memory
    lives as long as the request.
    """
    if embed is None:
        return None
    known: dict[str, np.ndarray] = {}

    async def once(texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(text for text in texts if text not in known))
        if missing:
            known.update(zip(missing, np.asarray(await embed(missing)), strict=True))
        return np.stack([known[text] for text in texts]) if texts else np.zeros((0, 0))

    return once


def _timed_embed(embed: EmbedFn | None, timings: Timings) -> EmbedFn | None:
    """``embed``, with the time spent in it added to ``timings["embed"]``.

    Classification and reconciliation embed the new memories (to type them and
    to find their neighbours), so their stages include this time; the split
    shows how much of it the model took.
    """
    if embed is None:
        return None

    async def timed(texts: list[str]) -> np.ndarray:
        with _timed(timings, "embed"):
            return await embed(texts)

    return timed


async def _reconcile_and_write(
    store: ProfileStore,
    rows: Sequence[NewMessage],
    candidates: list[Candidate],
    session_id: str,
    *,
    generator: Generator | None,
    embed: EmbedFn | None,
    timings: Timings | None,
    consolidated: Sequence[NewMessage] | None = None,
) -> tuple[Reconciled, list[NewMessage]]:
    """Plan outside the transaction, then write turns and memories in one transaction.

    ``consolidated``: when ending a session, its already-stored turns to mark
    extracted (and the session is ended in the same transaction).
    """
    with _timed(timings, "reconcile"):
        planned = await reconcile.plan(store, candidates, embed=embed, generator=generator)
    with _timed(timings, "write"):
        async with store.write() as writer:
            stored = await writer.insert_messages(rows) if rows else []
            if rows:
                # A concurrent ingest of the same turns stored (and extracted) them first.
                new_ids = {m.id for m in stored}
                keep = [i for i, c in enumerate(candidates) if set(c.source_message_ids) <= new_ids]
                candidates = [candidates[i] for i in keep]
                decisions = [planned.decisions[i] for i in keep]
            else:
                decisions = planned.decisions
            reconciled = await reconcile.apply(
                writer,
                candidates,
                session_id=session_id,
                decisions=decisions,
                vectors=planned.vectors,
            )
            extracted = stored if consolidated is None else consolidated
            await writer.mark_extracted([m.id for m in extracted])
            if consolidated is not None:
                await writer.end_session(session_id)
    return reconciled, stored


#: Turns embedded with an appended one: it, and whatever else of the newest is still waiting.
APPEND_VECTORS = 8


async def append_turn(
    store: ProfileStore, session_id: str, turn: MessageIn, *, embed: EmbedFn | None
) -> StoredMessage:
    """Append one turn to a session, with its vector before it is acknowledged.

    A turn is content-addressed: appending the same one again changes nothing.
    It is embedded with the start of the turns before it, as the background
    vectoriser would, so the next recall finds it through every channel.
    """
    rows = build_messages(session_id, [turn])
    async with store.write() as writer:
        await writer.insert_messages(rows)
    if embed is not None:
        pending = await store.reads.pending_vectors(
            "message_vectors", limit=APPEND_VECTORS, newest_first=True
        )
        if pending:
            vectors = await embed([text for _, text in pending])
            async with store.write() as writer:
                await writer.set_vectors(
                    "message_vectors", [(seq, vectors[i]) for i, (seq, _) in enumerate(pending)]
                )
    return await store.reads.message_by_id(rows[0].id)


async def remember(
    store: ProfileStore,
    content: str,
    *,
    memory_id: str,
    session_id: str | None = None,
    memory_type: MemoryType | None = None,
    importance: float | None = None,
    generator: Generator | None = None,
    embed: EmbedFn | None = None,
    prototypes: TypePrototypes | None = None,
) -> tuple[str, Reconciled]:
    """Remember one statement now: classify, key, reconcile and write it.

    Args:
        store: the profile's store.
        content: the statement.
        memory_id: the id it gets when added (a retried call reuses it).
        session_id: the session it belongs to, if any.
        memory_type: force a type; None classifies it.
        importance: force an importance; None scores it.
        generator: decides add / duplicate / supersede above the similarity gate.
        embed: texts -> unit vectors for the type prototypes and the neighbour
            check; None skips both.
        prototypes: the memory types' prototype vectors.

    Returns:
        The id of the memory that now holds the content (an existing one when it
        was a duplicate) and what reconciliation did.
    """
    text = content.strip()
    embed = _embed_once(embed)
    item = Extracted(
        content=text,
        type=memory_type,
        importance=importance,
        confidence=1.0,  # stated directly, not inferred
    )
    today = utc_now().date()
    if memory_type in (None, "event", "task"):  # "next Friday": the day it means, from today
        future = memory_type == "task" or bool(temporal.FUTURE_HINT.search(text))
        resolved = temporal.resolve_event_date(text, today, future=future)
        item.event_time = resolved.isoformat() if resolved else None
    await classify.settle_types([item], prototypes, embed)
    candidate = classify.classify_item(
        item, source_message_ids=[], source_spans=[], message_date=today.isoformat()
    )
    planned = await reconcile.plan(store, [candidate], embed=embed, generator=generator)
    async with store.write() as writer:
        reconciled = await reconcile.apply(
            writer,
            [candidate],
            session_id=session_id,
            decisions=planned.decisions,
            memory_ids=[memory_id],
            vectors=planned.vectors,
        )
    held_by = reconciled.added[0] if reconciled.added else reconciled.duplicate_of[0]
    return held_by, reconciled


async def consolidate_session(
    store: ProfileStore,
    session_id: str,
    *,
    generator: Generator | None = None,
    embed: EmbedFn | None = None,
    prototypes: TypePrototypes | None = None,
) -> Reconciled:
    """End a session: extract memories from its turns that were appended but not yet extracted.

    Args:
        store: the profile's store.
        session_id: the session to end.
        generator: the model backend; None runs the embedded rules.
        embed: texts -> unit vectors for the type prototypes and the neighbour
            check; None skips both.
        prototypes: the memory types' prototype vectors.
    """
    embed = _embed_once(embed)
    pending = await store.reads.session_messages(session_id, unextracted_only=True)
    turns = [
        NewMessage(
            id=m.id,
            session_id=m.session_id,
            role=m.role,
            content=m.content,
            created_at=to_db_time(m.created_at),
        )
        for _, m in pending
    ]
    candidates = await extract_candidates(
        turns, generator=generator, embed=embed, prototypes=prototypes
    )
    reconciled, _ = await _reconcile_and_write(
        store,
        [],
        candidates,
        session_id,
        generator=generator,
        embed=embed,
        timings=None,
        consolidated=turns,
    )
    return reconciled
