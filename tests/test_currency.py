"""Currency: recall ranks the current truth first, marks what it replaced, keeps forgotten things out.

Real SQLite files, the real ingest and recall pipelines and the real embedding model.
"""

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


async def say(store: ProfileStore, embed, session: str, text: str, day: str) -> None:
    turn = MessageIn(role="user", content=text, created_at=datetime.fromisoformat(day))
    await ingest_pipeline.ingest(store, session, [turn], embed=embed)


async def vectorise(store: ProfileStore, embed) -> None:
    for table in ("memory_vectors", "message_vectors"):
        pending = await store.reads.pending_vectors(table, limit=10_000)
        if pending:
            vectors = await embed([text for _, text in pending])
            async with store.write() as writer:
                await writer.set_vectors(
                    table, [(seq, vectors[i]) for i, (seq, _) in enumerate(pending)]
                )


async def ask(store: ProfileStore, embed, query: str):
    recaller = Recaller(store, RecallSettings(), embed)
    return await recaller.recall(RecallRequest(query=query))


async def test_a_replaced_fact_ranks_below_its_replacement_and_is_marked_stale(store, embed):
    await say(store, embed, "s1", "I live in Budapest.", "2026-01-10T09:00:00+00:00")
    await say(
        store,
        embed,
        "s1",
        "Use pnpm, not npm. And dark mode by default.",
        "2026-01-10T09:01:00+00:00",
    )
    moved, _ = await ingest_pipeline.remember(
        store, "I moved to Vienna in May 2026.", memory_id="vienna", embed=embed
    )
    await vectorise(store, embed)

    result = await ask(store, embed, "Where does the user live?")

    assert result.memories[0].id == moved
    budapest = [hit for hit in result.memories if "Budapest" in hit.content]
    assert budapest, "the replaced statement stays visible, below the current one"
    assert all(hit.stale and hit.superseded_by == moved for hit in budapest)
    assert "Vienna" in result.answer and "Budapest" not in result.answer


async def test_the_current_version_is_added_when_no_channel_found_it(store, embed):
    await say(
        store, embed, "s1", "I work at Acme Corp as a data engineer.", "2025-06-01T12:00:00+00:00"
    )
    await say(
        store,
        embed,
        "s2",
        "I work for Globex now, on their platform team.",
        "2026-02-01T12:00:00+00:00",
    )
    await vectorise(store, embed)

    # "Acme" finds only the old turn; its replacement comes with it, ranked above.
    result = await ask(store, embed, "Acme Corp")

    assert "Globex" in result.memories[0].content
    assert "update" in result.memories[0].channels
    acme = next(hit for hit in result.memories if "Acme" in hit.content)
    assert acme.stale


async def test_a_forgotten_memory_takes_its_turn_out_of_recall(store, embed):
    await say(store, embed, "s1", "I'm allergic to peanuts.", "2026-01-15T09:00:00+00:00")
    await say(store, embed, "s1", "I love hiking in the Alps.", "2026-01-15T09:01:00+00:00")
    await vectorise(store, embed)
    peanuts = [m for m in (await store.reads.list_memories())[0] if "peanuts" in m.content]
    async with store.write() as writer:
        for memory in peanuts:
            await writer.forget(memory.id)

    result = await ask(store, embed, "What is the user allergic to? peanuts")

    assert not any("peanuts" in hit.content for hit in result.memories)
    assert "peanuts" not in result.answer
    history = await store.reads.session_messages("s1")
    assert any("peanuts" in message.content for _, message in history)  # history keeps the turn


async def test_a_turn_with_a_current_memory_is_not_stale(store, embed):
    await say(
        store, embed, "s1", "I live in Lyon and I play the cello.", "2026-01-01T09:00:00+00:00"
    )
    await vectorise(store, embed)

    result = await ask(store, embed, "cello")

    assert result.memories and not any(hit.stale for hit in result.memories)


def test_now_is_the_clock_by_default() -> None:
    assert RecallRequest(query="x").as_of is None  # recall anchors on the server's clock
    assert datetime.now(UTC).year >= 2026
