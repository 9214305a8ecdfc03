"""Memory use and the review queue on real SQLite files: writes, the ledger, replay, archives."""

from datetime import UTC, datetime, timedelta

import pytest

from raymem.errors import ProposalDecided, ProposalNotFound
from raymem.export.archive import export_archive, import_archive
from raymem.pipelines import ingest
from raymem.store import ProfileStore
from raymem.store import memory_use as use
from raymem.store import review as queue
from raymem.store.dreams import Change, apply_change
from raymem.store.replay import replay
from raymem.store.review import ReviewMode
from raymem.types import MessageIn

DIM = 384
T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


@pytest.fixture
async def store(tmp_path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=DIM)
    yield store
    await store.close()


def said(day: int, content: str) -> list[MessageIn]:
    return [MessageIn(role="user", content=content, created_at=T0 + timedelta(days=day))]


async def current_contents(store: ProfileStore) -> set[str]:
    memories, _ = await store.reads.list_memories(limit=100)
    return {memory.content for memory in memories}


async def test_recall_counts_add_up_and_are_logged(store):
    await ingest.ingest(store, "s1", said(0, "The staging database is called orchid-42."))
    (memory,), _ = await store.reads.list_memories(limit=5)
    async with store.write() as writer:
        await use.record(writer, {memory.id: 2}, "2025-04-01T00:00:00.000000+00:00")
    async with store.write() as writer:
        await use.record(writer, {memory.id: 1}, "2025-05-01T00:00:00.000000+00:00")
        await use.record(writer, {}, "2025-06-01T00:00:00.000000+00:00")  # nothing: no entry
    found = await use.use_of(store.reader, [memory.id, "unknown"])
    assert found == {memory.id: use.Use(3, "2025-05-01T00:00:00.000000+00:00")}
    assert use.use_of_sync(store.quick, [memory.id]) == found
    entries = await store.reads.ledger_entries(0)
    assert [op for _, _, op, _ in entries].count("memory_use") == 2


async def test_review_mode_holds_a_low_confidence_supersession_until_approved(store):
    await ingest.ingest(store, "s1", said(0, "I live in Budapest."))
    async with store.write() as writer:
        await queue.set_review_mode(writer, ReviewMode(mode="review", below=0.9))
    result = await ingest.ingest(store, "s2", said(30, "I moved to Vienna."))
    assert result.memories.superseded == 0  # held: both statements stay current
    assert await current_contents(store) >= {"I live in Budapest.", "I moved to Vienna."}
    (proposal,) = await queue.list_proposals(store.reader, state="pending", limit=10)
    assert proposal.action == "supersede" and proposal.memory_id == result.memory_ids[0]
    assert "below the review threshold 0.90" in proposal.reason

    async with store.write() as writer:
        approved = await queue.decide(writer, proposal.id, "approved", "2025-05-01T00:00:00Z")
    assert approved.state == "approved"
    assert "I live in Budapest." not in await current_contents(store)
    old = await store.reads.get_memory(proposal.target_id)
    assert old.superseded_by == proposal.memory_id
    with pytest.raises(ProposalDecided, match="approved already"):
        async with store.write() as writer:
            await queue.decide(writer, proposal.id, "rejected", "2025-05-02T00:00:00Z")
    with pytest.raises(ProposalNotFound):
        await queue.get_proposal(store.reader, "nope")


async def test_a_rejected_proposal_leaves_both_memories_and_a_confident_one_applies(store):
    await ingest.ingest(store, "s1", said(0, "I live in Budapest."))
    async with store.write() as writer:
        await queue.set_review_mode(writer, ReviewMode(mode="review", below=0.9))
    await ingest.ingest(store, "s2", said(30, "I moved to Vienna."))
    (proposal,) = await queue.list_proposals(store.reader, state="pending", limit=10)
    async with store.write() as writer:
        await queue.decide(writer, proposal.id, "rejected", "2025-05-01T00:00:00Z")
    assert await current_contents(store) >= {"I live in Budapest.", "I moved to Vienna."}
    assert await queue.list_proposals(store.reader, state="pending", limit=10) == []
    # Stated directly (confidence 1.0), an update applies at once even in review mode.
    held_by, reconciled = await ingest.remember(store, "I moved to Graz.", memory_id="graz")
    assert held_by == "graz" and reconciled.superseded == 1
    assert len(await queue.list_proposals(store.reader, state=None, limit=10)) == 1


async def test_review_mode_holds_a_merge_into_a_near_duplicate(store, embed):
    await ingest.ingest(store, "s1", said(0, "My daughter Emma plays the violin."), embed=embed)
    async with store.write() as writer:
        await queue.set_review_mode(writer, ReviewMode(mode="review", below=0.9))
    result = await ingest.ingest(
        store, "s2", said(5, "My daughter Emma plays violin."), embed=embed
    )
    assert result.memories.duplicates == 0 and len(result.memory_ids) == 1
    (proposal,) = await queue.list_proposals(store.reader, state="pending", limit=10)
    assert proposal.action == "merge" and proposal.memory_id == result.memory_ids[0]
    async with store.write() as writer:
        await queue.decide(writer, proposal.id, "approved", "2025-05-01T00:00:00Z")
    new = await store.reads.get_memory(proposal.memory_id)
    assert new.superseded_by == proposal.target_id  # folded into the stored statement
    assert await current_contents(store) == {"My daughter Emma plays the violin."}


async def test_approving_a_proposal_whose_memory_changed_is_refused(store):
    await ingest.ingest(store, "s1", said(0, "I live in Budapest."))
    async with store.write() as writer:
        await queue.set_review_mode(writer, ReviewMode(mode="review", below=0.9))
    await ingest.ingest(store, "s2", said(30, "I moved to Vienna."))
    (proposal,) = await queue.list_proposals(store.reader, state="pending", limit=10)
    async with store.write() as writer:
        await writer.forget(proposal.target_id)
    with pytest.raises(ProposalDecided, match="superseded or forgotten"):
        async with store.write() as writer:
            await queue.decide(writer, proposal.id, "approved", "2025-05-01T00:00:00Z")
    (still,) = await queue.list_proposals(store.reader, state="pending", limit=10)
    assert still.id == proposal.id


async def filled(store: ProfileStore) -> None:
    await ingest.ingest(store, "s1", said(0, "I live in Budapest."))
    async with store.write() as writer:
        await queue.set_review_mode(writer, ReviewMode(mode="review", below=0.95))
    await ingest.ingest(store, "s2", said(30, "I moved to Vienna."))
    await ingest.ingest(store, "s3", said(40, "I moved to Graz."))
    first, _ = await queue.list_proposals(store.reader, state=None, limit=10)
    memories, _ = await store.reads.list_memories(limit=10)
    async with store.write() as writer:
        await queue.decide(writer, first.id, "approved", "2025-05-01T00:00:00.000000+00:00")
        await use.record(writer, {m.id: 1 for m in memories}, "2025-05-02T00:00:00.000000+00:00")


async def test_the_ledger_replays_use_and_the_review_queue_onto_another_copy(store, tmp_path):
    await filled(store)
    copy = await ProfileStore.open(tmp_path / "copy" / "profile.db", dim=DIM)
    try:
        async with copy.write() as writer:
            for entry in await store.reads.ledger_entries(0):
                assert await replay(writer, *entry)
        for table in ("memory_use", "review_mode", "proposals"):
            sql = f"SELECT * FROM {table} ORDER BY 1"
            assert copy.quick.execute(sql).fetchall() == store.quick.execute(sql).fetchall()
        assert await current_contents(copy) == await current_contents(store)
    finally:
        await copy.close()


async def test_archives_carry_use_retirements_and_the_review_queue_byte_for_byte(store, tmp_path):
    await filled(store)
    memories, _ = await store.reads.list_memories(limit=1)
    retire = Change(action="retire", memory_ids=[memories[0].id], content="", reason="stale")
    async with store.write() as writer:
        await apply_change(writer, retire, "2025-05-03T00:00:00.000000+00:00")
    first = await export_archive(store, tmp_path / "a.jsonl", profile="p")
    assert first.counts.other == {
        "memory_use": 3,
        "review_mode": 1,
        "proposals": 2,
        "retired_memories": 1,
    }
    target = await ProfileStore.open(tmp_path / "dst" / "profile.db", dim=DIM)
    try:
        await import_archive(target, tmp_path / "a.jsonl", profile="p")
        await export_archive(target, tmp_path / "b.jsonl", profile="p")
        assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
        assert await queue.review_mode(target.reader) == ReviewMode(mode="review", below=0.95)
    finally:
        await target.close()


async def test_an_archive_counts_only_the_other_tables_that_hold_rows(store, tmp_path):
    await ingest.ingest(store, "s1", said(0, "I live in Budapest."))
    header = await export_archive(store, tmp_path / "a.jsonl", profile="p")
    assert header.counts.other == {}  # no use, retirements or proposals yet
    target = await ProfileStore.open(tmp_path / "dst" / "profile.db", dim=DIM)
    try:
        imported = await import_archive(target, tmp_path / "a.jsonl", profile="p")
        assert imported.counts == header.counts
    finally:
        await target.close()
