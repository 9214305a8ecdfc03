"""Ingest: content-addressed turns, extraction, reconciliation and one transactional write.

Pure async functions over a ``ProfileStore``; no Ray imports. Vectorisation
happens after the write, in the background, driven by the profile actor.
"""

import uuid
from collections.abc import Sequence
from datetime import timedelta

import msgspec

from raymem.models import rules
from raymem.models.rules import Candidate
from raymem.store import (
    NewMemory,
    NewMessage,
    ProfileStore,
    StoreWriter,
    content_hash,
    to_db_time,
    utc_now,
)
from raymem.store import message_id as make_message_id
from raymem.types import IngestResult, MemoryCounts, MessageCounts, MessageIn


class Reconciled(msgspec.Struct):
    added: list[str]
    superseded: int
    duplicates: int


def build_messages(session_id: str, messages: Sequence[MessageIn]) -> list[NewMessage]:
    """Rows for the turns of a request, with content-addressed ids.

    A turn without a time gets the time of the request, one microsecond apart so
    that the conversation keeps its order.
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


def extract(messages: Sequence[NewMessage]) -> list[Candidate]:
    """Memories proposed from new turns by the embedded rules extractor."""
    candidates: list[Candidate] = []
    for message in messages:
        candidates.extend(
            rules.extract_from_turn(message.content, role=message.role, message_id=message.id)
        )
    return candidates


def new_memory_id() -> str:
    return uuid.uuid4().hex


async def reconcile(
    writer: StoreWriter,
    candidates: Sequence[Candidate],
    *,
    session_id: str | None,
    memory_ids: Sequence[str] | None = None,
) -> Reconciled:
    """Add, skip as duplicate, or supersede each candidate, inside the caller's transaction.

    The same normalised content as a current memory is a duplicate; the same
    topic key as a current memory supersedes it, keeping the version chain.
    """
    by_hash = await writer.current_by_hash(content_hash(c.content) for c in candidates)
    by_topic = await writer.current_by_topic(c.topic_key for c in candidates if c.topic_key)
    result = Reconciled(added=[], superseded=0, duplicates=0)
    created_at = to_db_time(utc_now())
    for index, candidate in enumerate(candidates):
        digest = content_hash(candidate.content)
        if digest in by_hash:
            result.duplicates += 1
            continue
        memory = NewMemory(
            id=memory_ids[index] if memory_ids else new_memory_id(),
            type=candidate.type,
            content=candidate.content,
            topic_key=candidate.topic_key,
            event_time=candidate.event_time,
            importance=candidate.importance,
            confidence=candidate.confidence,
            session_id=session_id,
            source_message_ids=candidate.source_message_ids,
            source_spans=candidate.source_spans,
            search_queries=candidate.search_queries,
            created_at=created_at,
        )
        supersedes = by_topic.get(candidate.topic_key) if candidate.topic_key else None
        await writer.insert_memory(memory, supersedes=supersedes)
        result.superseded += supersedes is not None
        result.added.append(memory.id)
        by_hash[digest] = memory.id
        if candidate.topic_key:
            by_topic[candidate.topic_key] = memory.id
    return result


async def ingest(
    store: ProfileStore, session_id: str, messages: Sequence[MessageIn]
) -> IngestResult:
    """Store a conversation's turns idempotently and the memories extracted from the new ones."""
    rows = build_messages(session_id, messages)
    async with store.write() as writer:
        stored = await writer.insert_messages(rows)
        reconciled = await reconcile(writer, extract(stored), session_id=session_id)
        await writer.mark_extracted([m.id for m in stored])
    return IngestResult(
        session_id=session_id,
        messages=MessageCounts(stored=len(stored), duplicates=len(rows) - len(stored)),
        memories=MemoryCounts(
            added=len(reconciled.added),
            superseded=reconciled.superseded,
            duplicates=reconciled.duplicates,
        ),
        memory_ids=reconciled.added,
    )


async def remember(
    store: ProfileStore,
    content: str,
    *,
    memory_id: str,
    session_id: str | None = None,
    memory_type: str | None = None,
    importance: float | None = None,
) -> tuple[str, Reconciled]:
    """Remember one statement now: classify, key, reconcile and write it.

    Returns the id of the memory that now holds the content (an existing one
    when it was a duplicate) and what reconciliation did.
    """
    classified_type, classified_importance = rules.classify(content)
    final_type = memory_type or classified_type
    key = rules.topic_key_for(content, final_type)
    candidate = Candidate(
        type=final_type,
        content=content.strip(),
        topic_key=key,
        importance=classified_importance if importance is None else importance,
        confidence=1.0,  # stated directly, not inferred
        search_queries=rules.search_questions(content, final_type, key),
    )
    async with store.write() as writer:
        existing = await writer.current_by_hash([content_hash(candidate.content)])
        reconciled = await reconcile(
            writer, [candidate], session_id=session_id, memory_ids=[memory_id]
        )
    held_by = reconciled.added[0] if reconciled.added else next(iter(existing.values()))
    return held_by, reconciled


async def consolidate_session(store: ProfileStore, session_id: str) -> Reconciled:
    """End a session: extract memories from its turns that were appended but not yet extracted."""
    pending = await store.session_messages(session_id, unextracted_only=True)
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
    async with store.write() as writer:
        reconciled = await reconcile(writer, extract(turns), session_id=session_id)
        await writer.mark_extracted([m.id for m in turns])
        await writer.end_session(session_id)
    return reconciled
