"""Classification by embedding prototypes, with the real embedder, in the pipeline and alone."""

import asyncio
from datetime import UTC, datetime

import pytest

from raymem.pipelines import ingest, rules
from raymem.pipelines.classify import TYPE_EXAMPLES, TypePrototypes
from raymem.store import ProfileStore
from raymem.types import MessageIn

# Sentences no pattern types, none of them among TYPE_EXAMPLES: what happened
# (events) and what holds (facts).
HELD_OUT_EVENTS = [
    "I caught a huge trout at the lake.",
    "Our daughter took her first steps in the kitchen.",
    "The car broke down on the motorway.",
    "I hosted a dinner party for my colleagues.",
    "We won the regional chess tournament.",
    "My parents flew over from Manila for the wedding.",
    "I dropped my phone in the river during the kayak trip.",
    "The landlord finally fixed the heating in our flat.",
    "I lost my wallet at the concert.",
    "Grandpa taught me to bake bread over the holidays.",
]
HELD_OUT_FACTS = [
    "My brother is a firefighter.",
    "I collect vintage vinyl records.",
    "Our API is written in Go.",
    "Her favourite flower is the tulip.",
    "The cafe opens at eight.",
    "My dog is scared of thunder.",
    "I am left-handed.",
    "Our flat has a small balcony facing the park.",
    "Swimming relaxes me more than running.",
    "Tom is my oldest friend from school.",
]


@pytest.fixture
def embedded(embedder):
    """The real embedder, recording every text sent to it."""
    sent: list[str] = []

    async def run(texts: list[str]):
        sent.extend(texts)
        return await asyncio.to_thread(embedder.embed, texts)

    run.sent = sent  # type: ignore[attr-defined]
    return run


@pytest.fixture
async def store(tmp_path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=384)
    yield store
    await store.close()


def test_held_out_sentences_have_no_pattern_type():
    # Otherwise the patterns, not the prototypes, would be what the next test measures.
    for sentence in HELD_OUT_EVENTS + HELD_OUT_FACTS:
        assert rules.classify_by_pattern(sentence) is None, sentence
        assert sentence not in {s for examples in TYPE_EXAMPLES.values() for s in examples}


async def test_prototypes_tell_events_from_facts(embedded):
    settled = await TypePrototypes().settle(HELD_OUT_EVENTS + HELD_OUT_FACTS, embedded)
    events, facts = settled[: len(HELD_OUT_EVENTS)], settled[len(HELD_OUT_EVENTS) :]
    right = events.count("event") + facts.count("fact")
    # The fact default alone gets the 10 facts; the prototypes must do much better.
    assert right >= 16, list(zip(HELD_OUT_EVENTS + HELD_OUT_FACTS, settled, strict=True))
    assert set(settled) <= {"event", "fact"}


async def test_imperatives_are_never_made_instructions_or_tasks(embedded):
    cheers = ["Chase those dreams, buddy!", "Push through and it will be worth it."]
    assert await TypePrototypes().settle(cheers, embedded) == ["fact", "fact"]


async def test_prototypes_are_embedded_once(embedded):
    prototypes = TypePrototypes()
    await prototypes.settle(["I caught a huge trout at the lake."], embedded)
    examples = sum(len(v) for v in TYPE_EXAMPLES.values())
    assert len(embedded.sent) == examples + 1
    await prototypes.settle(["The car broke down on the motorway."], embedded)
    assert len(embedded.sent) == examples + 2


async def test_ingest_dates_an_event_no_pattern_finds(store, embedded):
    said = datetime(2026, 4, 15, 18, 0, tzinfo=UTC)
    turns = [
        MessageIn(role="user", content="I caught a huge trout at the lake.", created_at=said),
        MessageIn(role="user", content="My brother is a firefighter.", created_at=said),
    ]
    result = await ingest.ingest(store, "s1", turns, embed=embedded, prototypes=TypePrototypes())
    memories = {m.content: m for m in await store.reads.memories_by_id(result.memory_ids)}
    trout = memories["I caught a huge trout at the lake."]
    assert (trout.type, trout.event_time) == ("event", "2026-04-15")
    brother = memories["My brother is a firefighter."]
    assert (brother.type, brother.event_time) == ("fact", None)
    # Classification's vectors were reused by reconciliation and stored.
    texts = [t for t in embedded.sent if t in memories]
    assert sorted(texts) == sorted(memories)
    assert await store.reads.pending_vectors("memory_vectors") == []


async def test_without_an_embedder_no_pattern_means_fact(store):
    turns = [MessageIn(role="user", content="I caught a huge trout at the lake.")]
    result = await ingest.ingest(store, "s1", turns, prototypes=TypePrototypes())
    [memory] = await store.reads.memories_by_id(result.memory_ids)
    assert memory.type == "fact"


async def test_remember_settles_the_type_and_a_forced_type_wins(store, embedded):
    prototypes = TypePrototypes()
    held_by, _ = await ingest.remember(
        store,
        "We won the regional chess tournament.",
        memory_id="m1",
        embed=embedded,
        prototypes=prototypes,
    )
    [memory] = await store.reads.memories_by_id([held_by])
    assert memory.type == "event" and memory.event_time is not None
    held_by, _ = await ingest.remember(
        store,
        "I lost my wallet at the concert.",
        memory_id="m2",
        memory_type="fact",
        embed=embedded,
        prototypes=prototypes,
    )
    [memory] = await store.reads.memories_by_id([held_by])
    assert memory.type == "fact"
