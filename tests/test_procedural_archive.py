"""Procedural memory travels with its profile: every op replays, archives round-trip byte for byte."""

import io
from pathlib import Path

import pytest
from procedural_helpers import CREATE, FAIL, UPDATE, at, enabled_store, run_session

from raymem.export.archive import export_archive, import_archive
from raymem.pipelines.procedural import capture, inject, metrics, patterns, skills
from raymem.store import ProfileStore
from raymem.store.procedural.skills import pending_vectors
from raymem.store.replay import REPLAYERS, replay
from raymem.types_procedural import (
    AnnotateRequest,
    InjectRequest,
    MetricIn,
    SkillIn,
)

DIM = 8


@pytest.fixture
async def stores(tmp_path: Path):
    opened = []

    async def open_store(name: str) -> ProfileStore:
        store = await ProfileStore.open(tmp_path / name / "profile.db", dim=DIM)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        await store.close()


async def fill(store: ProfileStore) -> None:
    """Every procedural write: each table gets rows, each op a ledger entry."""
    await enabled_store(store)
    for index in range(5):
        await run_session(store, f"s{index}", [FAIL], start=at(index), intent="rename a node")
    await patterns.evaluate_patterns(store, at(10))
    [pattern] = (await inject.injection_block(store, "update_node", "node")).patterns
    await patterns.annotate(
        store, pattern.id, AnnotateRequest(annotation="create it first"), now=at(11)
    )
    request = InjectRequest(action_type="update_node", target_type="node", session_id="heeds")
    await inject.inject(store, request, now=at(12))
    await run_session(store, "heeds", [CREATE, UPDATE], start=at(13), intent="rename a node")
    for index in range(3):
        await run_session(
            store, f"t{index}", [UPDATE], start=at(20 + index), intent="rename a node"
        )
    changes = await patterns.evaluate_patterns(store, at(30))
    assert changes.superseded == 1  # 5 of 8 (the heeded one left out): 0.625
    custom = MetricIn(id="short", aggregation="rate", success_condition="action_count < 2")
    await metrics.define(store, custom, at(31))
    await metrics.define(store, MetricIn(id="gone", aggregation="average"), at(31))
    await metrics.set_active(store, "efficiency_delta", False, at(32))
    await metrics.evaluate_metrics(store, at(33))
    await metrics.delete(store, "gone")
    deploy = await skills.add(
        store, SkillIn(name="Deploy", when_to_use="When merged.", steps=["Build", "Ship"]), at(34)
    )
    await skills.update(
        store, deploy.id, SkillIn(name="Deploy", when_to_use="When merged.", steps=["Ship"]), at(35)
    )
    throwaway = await skills.add(
        store, SkillIn(name="Tmp", when_to_use="Never.", steps=["x"]), at(35)
    )
    await skills.remove(store, throwaway.id)
    for index in range(skills.PROPOSE_MIN_SUCCESSES):
        await run_session(store, f"u{index}", [CREATE], start=at(40 + index), intent="add a person")
    [candidate] = await skills.propose(store, at(50))
    await skills.review(store, candidate.id, adopt=True, now=at(51))
    await capture.set_enabled(store, False, now=at(52))


async def export_bytes(store: ProfileStore) -> bytes:
    buffer = io.BytesIO()
    await export_archive(store, buffer, profile="p")
    return buffer.getvalue()


async def test_every_procedural_op_replays_to_the_same_profile(stores) -> None:  # type: ignore[no-untyped-def]
    source = await stores("source")
    await fill(source)
    entries = await source.reads.ledger_entries(0, limit=10_000)
    ops = {entry[2] for entry in entries}
    procedural_ops = {
        op
        for op, replayer in REPLAYERS.items()
        if replayer.__module__.endswith("procedural.replay")
    }
    assert len(procedural_ops) == 11 and procedural_ops <= ops  # the scenario logs each one

    copy = await stores("copy")
    async with copy.write() as writer:
        for seq, when, op, payload in entries:
            assert await replay(writer, seq, when, op, payload)
    assert await export_bytes(copy) == await export_bytes(source)
    # Vectors are derived: the copy embeds its sequences and skills again.
    assert await pending_vectors(copy.reader, "action_sequence_vectors", limit=100)
    assert await pending_vectors(copy.reader, "skill_vectors", limit=100)


async def test_an_archive_of_every_procedural_table_round_trips(stores) -> None:  # type: ignore[no-untyped-def]
    source = await stores("source")
    await fill(source)
    first = await export_bytes(source)
    header_counts = (await export_archive(source, io.BytesIO(), profile="p")).counts.other
    assert all(
        header_counts[table] > 0
        for table in (
            "procedural_state",
            "actions",
            "action_sequences",
            "patterns",
            "pattern_injections",
            "metrics",
            "metric_benchmarks",
            "skills",
        )
    )
    copy = await stores("copy")
    await import_archive(copy, first, profile="p")
    assert await export_bytes(copy) == first
    # The import is replayable too: a third copy rebuilt from the copy's ledger matches.
    third = await stores("third")
    async with third.write() as writer:
        for seq, when, op, payload in await copy.reads.ledger_entries(0, limit=10_000):
            await replay(writer, seq, when, op, payload)
    assert await export_bytes(third) == first
