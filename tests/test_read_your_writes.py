"""Read-your-writes: what a call acknowledged is found by the very next recall, vectors included."""

from datetime import UTC, datetime

import pytest

from raymem.config import RecallSettings
from raymem.pipelines import ingest as ingest_pipeline
from raymem.pipelines.recall import Recaller
from raymem.store import ProfileStore
from raymem.types import MessageIn, RecallRequest


@pytest.fixture
async def store(tmp_path):
    store = await ProfileStore.open(tmp_path / "p.db", dim=384)
    yield store
    await store.close()


async def test_a_remembered_memory_is_written_with_its_vector(store, embed):
    await ingest_pipeline.ingest(
        store, "s1", [MessageIn(role="user", content="I live in Budapest.")], embed=embed
    )
    # Its topic key already has a head, so no neighbour check needs its vector: it gets one anyway.
    await ingest_pipeline.remember(store, "I moved to Vienna.", memory_id="vienna", embed=embed)

    assert await store.reads.pending_vectors("memory_vectors") == []


async def test_an_ingested_turn_is_found_by_its_vector_at_once(store, embed):
    turn = "The staging database password rotates every thirty days."
    when = datetime(2026, 3, 1, tzinfo=UTC)
    await ingest_pipeline.ingest(
        store, "s1", [MessageIn(role="user", content=turn, created_at=when)], embed=embed
    )
    assert await store.reads.pending_vectors("message_vectors")  # left to the background

    recaller = Recaller(store, RecallSettings(), embed)
    result = await recaller.recall(RecallRequest(query="How often do staging credentials change?"))

    found = [hit for hit in result.memories if "rotates" in hit.content]
    assert found and {"message_vector", "memory_vector"} & set(found[0].channels)
    assert await store.reads.pending_vectors("message_vectors") == []  # caught up, and kept


async def test_catch_up_can_be_turned_off(store, embed):
    await ingest_pipeline.ingest(
        store, "s1", [MessageIn(role="user", content="Our office plants need water on Mondays.")]
    )
    recaller = Recaller(store, RecallSettings(catch_up_vectors=0), embed)
    await recaller.recall(RecallRequest(query="plants"))

    assert await store.reads.pending_vectors("message_vectors")


async def test_an_appended_turn_is_acknowledged_with_its_vector(store, embed):
    first = MessageIn(role="user", content="Which animals do you like?")
    second = MessageIn(role="user", content="I'm drawn to turtles, honestly.")
    await ingest_pipeline.append_turn(store, "chat", first, embed=embed)
    stored = await ingest_pipeline.append_turn(store, "chat", second, embed=embed)

    assert stored.content == second.content and stored.session_id == "chat"
    assert await store.reads.pending_vectors("message_vectors") == []
    again = await ingest_pipeline.append_turn(store, "chat", second, embed=embed)
    assert again.id == stored.id  # content-addressed: the same turn once
