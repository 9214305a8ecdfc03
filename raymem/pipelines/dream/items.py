"""What a dream reads of a store: its current memories with their evidence, use and vectors."""

import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from raymem.pipelines import rules
from raymem.pipelines.language import split_speaker
from raymem.store import NewMemory, ProfileStore
from raymem.store.memory_use import Use
from raymem.store.rows import from_db_time
from raymem.store.search import current
from raymem.store.writer import fetch

#: Statements whose values are kept once read: they take half of loading a dream's memories.
VALUES_CACHED = 100_000

EmbedFn = Callable[[list[str]], Awaitable[np.ndarray]]  # texts -> unit vectors

_SOURCES = "(SELECT value FROM json_each(m.source_message_ids))"
_ITEMS_SQL = (
    "SELECT m.seq, m.id, m.type, m.content, m.topic_key, m.event_time, m.importance,"
    " m.confidence, m.session_id, m.source_message_ids, m.source_spans, m.search_queries,"
    f" m.created_at, (SELECT max(t.created_at) FROM messages t WHERE t.id IN {_SOURCES}),"
    f" (SELECT count(*) FROM messages t WHERE t.id IN {_SOURCES}),"
    " m.session_id IS NULL OR EXISTS (SELECT 1 FROM sessions s WHERE s.id = m.session_id),"
    " u.recalled_count, u.last_recalled_at"
    " FROM memories m LEFT JOIN memory_use u ON u.memory_id = m.id"
    f" WHERE {current('m')} ORDER BY m.seq"
)


@dataclass
class Item:
    """A current memory as a dream sees it.

    ``said_at``: when its newest source turn was said (when it was learned, for a
    memory without stored sources); ``sources_found``: how many of its source
    turns are still stored; ``subject``: whom it is about, as a topic-key segment.
    """

    record: NewMemory
    seq: int
    said_at: datetime
    learned_at: datetime
    sources_found: int
    session_exists: bool
    use: Use | None
    subject: str
    values: frozenset[str]
    vector: np.ndarray | None = None

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def support(self) -> tuple[int, float, datetime]:
        """Best-supported first: most source turns, then confidence, then the newest."""
        return (len(self.record.source_message_ids), self.record.confidence, self.said_at)


def subject_of(record: NewMemory) -> str:
    """Whom a memory is about: its topic key's subject, the speaker it names, or the user."""
    if record.topic_key and "." in record.topic_key:
        return record.topic_key.split(".", 1)[0]
    speaker, _ = split_speaker(record.content)
    return rules.subject_key(speaker)


def _item(row: Sequence[Any]) -> Item:
    record = NewMemory(
        id=row[1],
        type=row[2],
        content=row[3],
        topic_key=row[4],
        event_time=row[5],
        importance=row[6],
        confidence=row[7],
        session_id=row[8],
        source_message_ids=json.loads(row[9]),
        source_spans=[tuple(span) for span in json.loads(row[10])],
        search_queries=row[11].split("\n") if row[11] else [],
        created_at=row[12],
    )
    learned_at = datetime.fromisoformat(row[12])
    return Item(
        record=record,
        seq=row[0],
        said_at=from_db_time(row[13]) or learned_at,
        learned_at=learned_at,
        sources_found=row[14],
        session_exists=bool(row[15]),
        use=None if row[16] is None else Use(row[16], row[17]),
        subject=subject_of(record),
        values=concrete_values(record.content),
    )


@functools.lru_cache(maxsize=VALUES_CACHED)
def concrete_values(content: str) -> frozenset[str]:
    """The names, numbers and dates a statement names, lower case; its speaker's name aside.

    "Melanie: Family's important to me" names no value: only a capital that starts
    the sentence proper is left out, and the speaker prefix would hide that start.
    Cached: a dream reads every memory once per step, and content never changes.
    """
    _, said = split_speaker(content)
    return frozenset(value.lower() for value in rules.concrete_values(said))


async def load_items(store: ProfileStore) -> list[Item]:
    """Every current memory of ``store``, with its vector where it has one.

    A dream embeds the memories still waiting for the background vectoriser
    first (its ``vectors`` step); tasks are never vectorised.
    """
    items = [_item(row) for row in await fetch(store.reader, _ITEMS_SQL)]
    by_seq = {item.seq: item for item in items}
    for seq, blob in await fetch(store.reader, "SELECT rowid, embedding FROM memory_vectors"):
        if seq in by_seq:
            by_seq[seq].vector = np.frombuffer(blob, dtype=np.float32)
    return items
