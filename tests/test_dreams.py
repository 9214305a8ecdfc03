"""Dreaming on real SQLite files with the real embedding model: candidate, diff, adopt, resume."""

import asyncio
import hashlib
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from openai_server import ChatServer

from raymem.config import DreamSettings, RecallSettings
from raymem.errors import DreamAlreadyOpen, DreamNotFound, DreamStateConflict
from raymem.export.archive import export_archive
from raymem.models.chat import OpenAIChat
from raymem.pipelines import ingest
from raymem.pipelines.dream import Dreams
from raymem.pipelines.recall import Recaller
from raymem.store import NewMemory, ProfileStore, to_db_time, utc_now
from raymem.store.replay import replay
from raymem.types import MessageIn, RecallRequest

DIM = 384
T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
EMMA = (
    "My daughter Emma plays the violin.",
    "My daughter Emma plays violin.",
    "My daughter Emma is learning to play the violin.",
)
STANDUP_OLD = "Our team standup is at 9:30 every morning."
STANDUP_NEW = "Our team standup is at 10:15 every morning."
OTHERS = ("The staging database is called orchid-42.", "My favourite hiking trail is Mala Fatra.")
STALE = "I once collected stamps from Iceland as a kid."


@pytest.fixture
async def store(tmp_path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=DIM)
    yield store
    await store.close()


def turns(start: datetime, *contents: str) -> list[MessageIn]:
    return [
        MessageIn(role="user", content=content, created_at=start + timedelta(minutes=index))
        for index, content in enumerate(contents)
    ]


async def seed(store: ProfileStore) -> None:
    """Duplicates, a contradiction and a stale memory that the per-fact path let through.

    Without an embedding function ingest reconciles only exact duplicates and topic
    keys, as a profile with ``reconcile_by_similarity`` off (or an import) does.
    """
    await ingest.ingest(store, "s1", turns(T0, EMMA[0], STANDUP_OLD, *OTHERS))
    await ingest.ingest(store, "s2", turns(T0 + timedelta(days=20), EMMA[1], STANDUP_NEW))
    await ingest.ingest(store, "s3", turns(T0 + timedelta(days=40), EMMA[2]))
    async with store.write() as writer:  # learned two years ago, never recalled since
        await writer.insert_memory(
            NewMemory(
                id="stale-stamps",
                type="fact",
                content=STALE,
                importance=0.3,
                created_at=to_db_time(utc_now() - timedelta(days=730)),
            )
        )


async def current_contents(store: ProfileStore) -> dict[str, str]:
    memories, _ = await store.reads.list_memories(limit=100)
    return {memory.content: memory.id for memory in memories}


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    for suffix in ("", "-wal"):
        part = Path(f"{path}{suffix}")
        if part.exists():
            digest.update(part.read_bytes())
    return digest.hexdigest()


async def dream_to_ready(dreams: Dreams, **options: object) -> str:
    started = await dreams.start(**options)  # type: ignore[arg-type]
    done = await dreams.wait(started.id)
    assert done.state == "ready", done.error
    return started.id


async def test_a_dream_reorganises_a_candidate_and_leaves_the_profile_untouched(store, embed):
    await seed(store)
    before = await current_contents(store)
    dreams = Dreams(store, DreamSettings(), embed=embed)
    started = await dreams.start(instructions="focus on family")
    assert started.state == "running"
    live_hash = file_hash(store.path)  # the job row is written: nothing else until adopt
    done = await dreams.wait(started.id)
    assert done.state == "ready", done.error
    assert file_hash(store.path) == live_hash
    assert await current_contents(store) == before

    candidate = await ProfileStore.open(dreams.candidate(started.id), dim=DIM)
    try:
        after = await current_contents(candidate)
        # The candidate is a whole profile: same schema, ledger and archive format.
        archive = await export_archive(candidate, io.BytesIO(), profile="candidate")
        assert archive.counts.memories == len(before)  # every version, the old ones kept
        assert archive.ledger_seq == await store.reads.ledger_seq()
    finally:
        await candidate.close()
    assert sum(content in after for content in EMMA) == 1  # one statement per fact
    assert STANDUP_NEW in after and STANDUP_OLD not in after  # the newest value holds
    assert STALE not in after  # stale: retired
    assert all(content in after for content in OTHERS)
    assert done.counts["memories"] == len(before)
    assert done.counts["memories_after"] == len(after) == len(before) - 4
    assert (done.counts["merged"], done.counts["replaced"], done.counts["retired"]) == (2, 1, 1)
    assert done.step == "insights" and done.instructions == "focus on family"


async def test_the_diff_lists_every_change_with_its_reason(store, embed):
    await seed(store)
    before = await current_contents(store)
    dreams = Dreams(store, DreamSettings(), embed=embed)
    dream_id = await dream_to_ready(dreams)
    dream, changes = await dreams.diff(dream_id)
    by_action = {change.action: change for change in changes}
    assert sorted(change.action for change in changes) == ["merge", "replace", "retire"]
    merge = by_action["merge"]
    assert sorted(merge.memory_ids) == sorted(before[c] for c in EMMA)
    assert merge.kept in merge.memory_ids and merge.content in EMMA
    assert "3 statements say the same" in merge.reason
    assert len(merge.evidence) == 3  # the kept statement gains every member's source turn
    replace = by_action["replace"]
    assert replace.content == STANDUP_NEW and replace.kept == before[STANDUP_NEW]
    assert before[STANDUP_OLD] in replace.memory_ids and "other values" in replace.reason
    retire = by_action["retire"]
    assert retire.memory_ids == ["stale-stamps"] and retire.content == STALE
    assert retire.reason.startswith("stale:")
    assert dream.counts["changes"] == 3


async def test_adopt_keeps_chains_and_the_writes_that_arrived_during_the_dream(store, embed):
    await seed(store)
    before = await current_contents(store)
    dreams = Dreams(store, DreamSettings(), embed=embed)
    dream_id = await dream_to_ready(dreams)
    # Writes after the dream's copy: a new memory, and a memory the dream merged is forgotten.
    await ingest.ingest(store, "s4", turns(T0 + timedelta(days=60), "My son Leo plays chess."))
    async with store.write() as writer:
        await writer.forget(before[OTHERS[0]])
    seq_before = await store.reads.ledger_seq()

    adopted_row, adopted = await dreams.adopt(dream_id)
    assert adopted_row.state == "adopted"
    assert not dreams.candidate(dream_id).exists()
    assert len(adopted.applied) == 3 and adopted.skipped == []
    after = await current_contents(store)
    assert "My son Leo plays chess." in after  # the write during the dream stays
    assert OTHERS[0] not in after  # and so does the forgetting
    assert sum(content in after for content in EMMA) == 1
    assert STANDUP_NEW in after and STANDUP_OLD not in after and STALE not in after
    # One ledger entry, and the old statements point at what replaced them.
    entries = await store.reads.ledger_entries(seq_before)
    assert [op for _, _, op, _ in entries] == ["dream_adopt"]
    kept = after[next(content for content in EMMA if content in after)]
    for content in EMMA:
        history = await store.reads.history(before[content])
        assert history[-1].id == kept
    merged = [memory.id for memory in await store.reads.history(kept)]
    assert sorted(merged) == sorted(before[c] for c in EMMA) and merged[-1] == kept
    old = await store.reads.get_memory(before[STANDUP_OLD])
    assert old.superseded_by == before[STANDUP_NEW]
    stale = await store.reads.get_memory("stale-stamps")
    assert stale.forgotten_at is not None and stale.content == STALE  # retired, not deleted
    # The adopted dream keeps its diff; a second adopt is refused.
    _, changes = await dreams.diff(dream_id)
    assert len(changes) == 3
    with pytest.raises(DreamStateConflict, match="adopted"):
        await dreams.adopt(dream_id)


async def test_a_change_whose_memories_changed_during_the_dream_is_skipped(store, embed):
    await seed(store)
    before = await current_contents(store)
    dreams = Dreams(store, DreamSettings(), embed=embed)
    dream_id = await dream_to_ready(dreams)
    async with store.write() as writer:  # the user forgets one of the merged statements
        await writer.forget(before[EMMA[1]])
    _, adopted = await dreams.adopt(dream_id)
    assert [change.action for change, _ in adopted.skipped] == ["merge"]
    assert "superseded or forgotten since the dream began" in adopted.skipped[0][1]
    after = await current_contents(store)
    assert EMMA[0] in after and EMMA[2] in after  # the merge did not happen
    assert STANDUP_OLD not in after  # the other changes did
    assert (await dreams.status(dream_id)).counts["skipped"] == 1


async def test_the_adopt_entry_replays_onto_another_copy(store, embed, tmp_path):
    await seed(store)
    dreams = Dreams(store, DreamSettings(), embed=embed)
    await dreams.adopt(await dream_to_ready(dreams))
    copy = await ProfileStore.open(tmp_path / "copy" / "profile.db", dim=DIM)
    try:
        entries = await store.reads.ledger_entries(0)
        async with copy.write() as writer:
            for entry in entries:
                assert await replay(writer, *entry)
        assert await current_contents(copy) == await current_contents(store)
        assert await copy.reads.ledger_seq() == await store.reads.ledger_seq()
        live, _ = await store.reads.list_memories(include_superseded=True, limit=100)
        copied, _ = await copy.reads.list_memories(include_superseded=True, limit=100)
        assert [(m.id, m.superseded_by, m.source_message_ids) for m in copied] == [
            (m.id, m.superseded_by, m.source_message_ids) for m in live
        ]
    finally:
        await copy.close()


async def test_discard_and_cancel_leave_no_candidate(store, embed):
    await seed(store)
    before = await current_contents(store)
    dreams = Dreams(store, DreamSettings(), embed=embed)
    dream_id = await dream_to_ready(dreams)
    assert dreams.candidate(dream_id).exists()
    assert (await dreams.discard(dream_id)).state == "discarded"
    assert not dreams.candidate(dream_id).exists()
    assert list(dreams.candidate(dream_id).parent.iterdir()) == []
    assert await current_contents(store) == before
    with pytest.raises(DreamStateConflict, match="discarded"):
        await dreams.diff(dream_id)

    gate = asyncio.Event()

    async def slow_embed(texts: list[str]):  # holds the dream inside its vectors step
        await gate.wait()
        return await embed(texts)

    held = Dreams(store, DreamSettings(), embed=slow_embed)
    async with store.write() as writer:  # a memory still to vectorise
        await writer.insert_memory(
            NewMemory(
                id="pending", type="fact", content="I am new here.", created_at=to_db_time(T0)
            )
        )
    running = await held.start()
    await wait_for_step(held, running.id, "copy")
    cancelled = await held.cancel(running.id)
    assert cancelled.state == "cancelled"
    assert not held.candidate(running.id).exists()
    with pytest.raises(DreamStateConflict, match="cancelled"):
        await held.cancel(running.id)
    with pytest.raises(DreamNotFound):
        await held.status("no-such-dream")


async def wait_for_step(dreams: Dreams, dream_id: str, step: str) -> None:
    for _ in range(2000):
        if (await dreams.status(dream_id)).step == step:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"dream {dream_id} never reached step {step!r}")


async def test_one_dream_at_a_time(store, embed):
    await seed(store)
    dreams = Dreams(store, DreamSettings(), embed=embed)
    dream_id = await dream_to_ready(dreams)
    with pytest.raises(DreamAlreadyOpen, match="ready for review"):
        await dreams.start()
    await dreams.discard(dream_id)
    second = await dreams.start()
    assert second.id != dream_id
    assert (await dreams.wait(second.id)).state == "ready"


async def test_a_dream_resumes_after_its_profile_stopped(store, embed, tmp_path):
    await seed(store)
    gate = asyncio.Event()

    async def stuck_embed(texts: list[str]):
        await gate.wait()
        return await embed(texts)

    first = Dreams(store, DreamSettings(), embed=stuck_embed)
    started = await first.start()
    await wait_for_step(first, started.id, "copy")
    await first.close()  # the profile hibernates (or its process dies) mid-dream
    path = store.path
    await store.close()

    reopened = await ProfileStore.open(path, dim=DIM)
    try:
        dreams = Dreams(reopened, DreamSettings(), embed=embed)
        stored = await dreams.status(started.id)
        assert (stored.state, stored.step) == ("running", "copy")  # as its candidate left it
        resumed = await dreams.recover()
        assert resumed is not None and resumed.id == started.id
        done = await dreams.wait(started.id)
        assert done.state == "ready", done.error
        assert done.counts["merged"] == 2
        assert await dreams.recover() is not None  # ready: nothing to resume, still open
    finally:
        await reopened.close()


async def test_a_dream_whose_candidate_is_lost_starts_again_from_a_copy(store, embed):
    await seed(store)
    first = Dreams(store, DreamSettings(), embed=embed)
    dream_id = await dream_to_ready(first)
    for file in first.candidate(dream_id).parent.iterdir():  # the profile moved nodes
        file.unlink()
    dreams = Dreams(store, DreamSettings(), embed=embed)
    assert (await dreams.status(dream_id)).state == "running"
    await dreams.recover()
    done = await dreams.wait(dream_id)
    assert done.state == "ready" and done.counts["changes"] == 3


# ------------------------------------------------------------------- model


def scripted_model(statement: str, insight_ids: list[str]):
    def reply(body: dict[str, object]) -> tuple[int, str]:
        system = body["messages"][0]["content"]  # type: ignore[index]
        if "say the same thing" in system:
            return 200, json.dumps({"statement": statement})
        insights = [{"statement": "The user is an engineer who hikes.", "evidence": insight_ids}]
        return 200, json.dumps({"insights": insights})

    return reply


async def test_a_model_rewrites_merged_statements_and_proposes_insights(store, embed):
    await seed(store)
    before = await current_contents(store)
    evidence = [before[OTHERS[0]], before[OTHERS[1]]]
    statement = "The user's daughter Emma plays the violin."
    with ChatServer(scripted_model(statement, evidence)).running() as server:
        model = OpenAIChat(server.base_url, "m", timeout_s=10, attempts=1)
        dreams = Dreams(store, DreamSettings(), embed=embed, model=model)
        dream_id = await dream_to_ready(dreams, instructions="focus on family")
        await model.close()
        prompts = [body for _, _, body in server.requests]
    assert any("focus on family" in p["messages"][0]["content"] for p in prompts)
    _, changes = await dreams.diff(dream_id)
    merge = next(change for change in changes if change.action == "merge")
    assert merge.content == statement and merge.kept not in before.values()
    assert sorted(merge.memory_ids) == sorted(before[c] for c in EMMA)
    insight = next(change for change in changes if change.action == "insight")
    assert insight.memory_ids == evidence and insight.memory is not None
    assert set(insight.evidence) == {
        *(await store.reads.get_memory(evidence[0])).source_message_ids,
        *(await store.reads.get_memory(evidence[1])).source_message_ids,
    }
    await dreams.adopt(dream_id)
    after = await current_contents(store)
    assert statement in after and not any(content in after for content in EMMA)
    assert "The user is an engineer who hikes." in after
    assert (await store.reads.get_memory(before[EMMA[0]])).superseded_by == after[statement]


async def test_a_model_rewrite_that_loses_a_value_keeps_the_rules_statement(store, embed):
    await seed(store)
    with ChatServer(scripted_model("The user's daughter plays an instrument.", [])).running() as s:
        model = OpenAIChat(s.base_url, "m", timeout_s=10, attempts=1)
        dreams = Dreams(store, DreamSettings(), embed=embed, model=model)
        dream_id = await dream_to_ready(dreams)
        await model.close()
    _, changes = await dreams.diff(dream_id)
    merge = next(change for change in changes if change.action == "merge")
    assert merge.content in EMMA  # "Emma" was lost: the best-supported statement stays
    assert [change.action for change in changes].count("insight") == 0  # no evidence cited


async def test_a_retired_memory_leaves_recall_but_its_turn_still_speaks(store, embed):
    said = "I once collected stamps from Iceland as a kid."
    await ingest.ingest(store, "s1", turns(T0, said, "I want to forget my old pin code 4431."))
    memories = await current_contents(store)
    stale_id, pin_id = memories[said], memories["I want to forget my old pin code 4431."]
    async with store.write() as writer:  # learned two years ago, never recalled since
        await writer.conn.execute(
            "UPDATE memories SET created_at = ?, importance = 0.3 WHERE id = ?",
            (to_db_time(utc_now() - timedelta(days=730)), stale_id),
        )
        await writer.forget(pin_id)  # asked for: its turn leaves recall too
    dreams = Dreams(store, DreamSettings(), embed=embed)
    dream_id = await dream_to_ready(dreams)
    _, adopted = await dreams.adopt(dream_id)
    assert [(c.action, c.memory_ids) for c in adopted.applied] == [("retire", [stale_id])]
    assert (await store.reads.get_memory(stale_id)).forgotten_at is not None

    recaller = Recaller(store, RecallSettings(), embed)
    stamps = await recaller.recall(RecallRequest(query="Which stamps did I collect?"))
    assert stale_id not in {hit.id for hit in stamps.memories}
    assert any(hit.type == "message" and "Iceland" in hit.content for hit in stamps.memories)
    pin = await recaller.recall(RecallRequest(query="What was my old pin code?"))
    assert not any("4431" in hit.content for hit in pin.memories)
