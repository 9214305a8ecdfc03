"""Ranking's prior (importance, confidence, recency, use) and recording memory use."""

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from raymem.config import RecallSettings
from raymem.pipelines import ingest
from raymem.pipelines.prior import PRIOR_PART, apply_prior, factor, signals, weights
from raymem.pipelines.recall import Recaller, Scored, order
from raymem.pipelines.use import UseRecorder
from raymem.store import ProfileStore
from raymem.store.memory_use import Use, use_of
from raymem.types import Memory, MessageIn, RecallRequest

NOW = datetime(2025, 6, 1, tzinfo=UTC)


@pytest.fixture
async def store(tmp_path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=384)
    yield store
    await store.close()


def memory(memory_id: str, *, importance: float = 0.5, confidence: float = 0.8) -> Memory:
    return Memory(
        id=memory_id,
        type="fact",
        content=f"statement {memory_id}",
        importance=importance,
        confidence=confidence,
        created_at=NOW - timedelta(days=400),
    )


def scored(item: Memory, said: datetime, score: float = 1.0) -> Scored:
    return Scored({"memory_fts": score}, memory=item, turn_at=said)


def test_signals_are_fractions_and_recency_halves_every_half_life():
    settings = RecallSettings(prior_half_life_days=30.0, prior_use_saturation=20)
    fresh = signals(memory("a"), NOW, None, NOW, settings)
    assert fresh == {"importance": 0.5, "confidence": 0.8, "recency": 1.0, "use": 0.0}
    month_old = signals(memory("a"), NOW - timedelta(days=30), None, NOW, settings)
    assert month_old["recency"] == pytest.approx(0.5)
    used = Use(20, (NOW - timedelta(days=60)).isoformat())
    recalled = signals(memory("a"), NOW - timedelta(days=90), used, NOW, settings)
    assert recalled["use"] == pytest.approx(1.0) and recalled["recency"] == pytest.approx(0.25)
    assert factor({"importance": 1.0}, {"importance": 2.0}) == pytest.approx(2.0)
    assert factor({"importance": 0.0}, {"importance": 4.0}) == 0.0  # never negative


async def test_without_weights_nothing_changes(store):
    items = [scored(memory("a"), NOW), Scored({"message_fts": 0.5})]
    apply_prior(items, RecallSettings(), NOW, store.quick)
    assert all(PRIOR_PART not in item.parts for item in items)
    assert not any(weights(RecallSettings()).values())


async def test_importance_confidence_and_recency_reorder_equal_matches(store):
    settings = RecallSettings(
        prior_importance_weight=1.0, prior_confidence_weight=1.0, prior_recency_weight=1.0
    )
    plain = scored(memory("plain", importance=0.3, confidence=0.6), NOW - timedelta(days=500))
    strong = scored(memory("strong", importance=0.9, confidence=1.0), NOW - timedelta(days=1))
    turn = Scored({"message_fts": 1.0})
    apply_prior([plain, strong, turn], settings, NOW, store.quick)
    assert [item.memory.id for item in order([plain, strong]) if item.memory] == [
        "strong",
        "plain",
    ]
    assert strong.score > turn.score > plain.score  # raw turns keep their fused score
    assert PRIOR_PART not in turn.parts


async def test_use_lifts_a_memory_recall_returned_often(store):
    await ingest.ingest(
        store,
        "s1",
        [
            MessageIn(role="user", content="The staging database is called orchid-42."),
            MessageIn(role="user", content="The production database is called lotus-7."),
        ],
    )
    recaller = Recaller(store, RecallSettings(), None)
    result = await recaller.recall(
        RecallRequest(query="staging database", limit=1, include_messages=False, synthesize=False)
    )
    recorder = UseRecorder()
    for _ in range(5):
        recorder.note(result, NOW)
    assert await recorder.flush(store) == len(result.memories) >= 1
    assert await recorder.flush(store) == 0  # nothing new
    used = result.memories[0].id
    assert (await use_of(store.reader, [used]))[used] == Use(
        5, NOW.isoformat(timespec="microseconds")
    )

    settings = msgspec.structs.replace(RecallSettings(), prior_use_weight=2.0)
    lifted = await Recaller(store, settings, None).recall(
        RecallRequest(query="database called", include_messages=False, synthesize=False)
    )
    assert lifted.memories[0].id == used
    assert "prior" in lifted.memories[0].channels
