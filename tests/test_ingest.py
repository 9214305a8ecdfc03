"""The ingest pipeline on real ProfileStore files, the real embedder and a real HTTP model server."""

import itertools
import json
import logging
from datetime import UTC, datetime, timedelta

import pytest
from openai_server import ChatServer, transcript_of

from raymem.models.chat import OpenAIChat
from raymem.pipelines import extract, ingest
from raymem.pipelines.generators import LLMGenerator
from raymem.store import ProfileStore
from raymem.store.connection import open_sync
from raymem.types import MessageIn

APRIL_15 = datetime(2026, 4, 15, 9, 30, tzinfo=UTC)


@pytest.fixture
async def store(tmp_path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=384)
    yield store
    await store.close()


def user(content: str, at: datetime = APRIL_15) -> MessageIn:
    return MessageIn(role="user", content=content, created_at=at)


def spans_of(store: ProfileStore) -> dict[str, tuple[list[str], list[list[int]]]]:
    conn = open_sync(store.path)
    try:
        rows = conn.execute("SELECT content, source_message_ids, source_spans FROM memories")
        return {row[0]: (json.loads(row[1]), json.loads(row[2])) for row in rows}
    finally:
        conn.close()


async def test_moving_to_vienna_supersedes_budapest_and_keeps_both(store):
    await ingest.remember(store, "User lives in Budapest", memory_id="m-old")
    new_id, reconciled = await ingest.remember(
        store, "User moved to Vienna in May 2026", memory_id="m-new"
    )
    assert reconciled.superseded == 1 and reconciled.added == [new_id]
    history = await store.reads.history(new_id)
    assert [m.content for m in history] == [
        "User lives in Budapest",
        "User moved to Vienna in May 2026",
    ]
    assert {m.topic_key for m in history} == {"user.location"}
    assert history[0].superseded_by == new_id and history[1].superseded_by is None


async def test_package_manager_instruction_is_keyed_and_superseded(store):
    first = await ingest.ingest(store, "s1", [user("Use pnpm, not npm.")])
    [pnpm] = await store.reads.memories_by_id(first.memory_ids)
    assert (pnpm.type, pnpm.topic_key) == ("instruction", "user.package_manager")
    later = APRIL_15 + timedelta(days=3)
    second = await ingest.ingest(store, "s2", [user("Actually, switch back to npm.", later)])
    assert (second.memories.added, second.memories.superseded) == (1, 1)
    [npm] = await store.reads.memories_by_id(second.memory_ids)
    assert (npm.type, npm.topic_key) == ("instruction", "user.package_manager")
    assert [m.id for m in await store.reads.history(pnpm.id)] == [pnpm.id, npm.id]


async def test_yesterday_becomes_an_absolute_event_date(store):
    result = await ingest.ingest(store, "s1", [user("We deployed v2.3 yesterday.")])
    [event] = await store.reads.memories_by_id(result.memory_ids)
    assert (event.type, event.event_time) == ("event", "2026-04-14")


def conversation(count: int, *, size: int = 0) -> list[MessageIn]:
    """``count`` distinct user turns, an hour apart, padded to about ``size`` characters."""
    turns = []
    for index in range(count):
        text = f"Turn {index}: my project number {index} uses the Falcon{index} build server."
        if size:
            filler = " ".join(
                f"Detail {index}-{j} concerns module M{index}x{j}." for j in range(40)
            )
            text = f"{text} {filler}"[:size]
        turns.append(user(text, APRIL_15 + timedelta(hours=index)))
    return turns


async def test_reingesting_adds_nothing(store):
    turns = conversation(12)  # 9+ messages: full and detail passes both run
    first = await ingest.ingest(store, "s1", turns)
    again = await ingest.ingest(store, "s1", turns)
    assert first.memories.added == 12  # the detail pass merged with the full pass
    assert again.messages.duplicates == 12 and again.memories.added == 0
    assert again.memory_ids == []
    assert (await store.reads.info("p")).memories == 12


async def test_tasks_are_found_by_full_text_and_never_vectorised(store, embed):
    result = await ingest.ingest(
        store,
        "s1",
        [
            user("Remind me to renew the Kestrel certificate by Friday."),
            user("I keep bees on the library roof."),
        ],
        embed=embed,
    )
    memories = await store.reads.memories_by_id(result.memory_ids)
    task = next(m for m in memories if m.type == "task")
    [seq] = store.search.memories_text('"kestrel"', limit=5)
    assert (store.search.memories_by_seq([seq]))[seq].id == task.id
    assert await store.reads.pending_vectors("memory_vectors") == []  # the fact's vector is stored
    conn = open_sync(store.path)
    try:
        vectorised = conn.execute(
            "SELECT m.type FROM memory_vectors v JOIN memories m ON m.seq = v.rowid"
        ).fetchall()
    finally:
        conn.close()
    assert vectorised == [("fact",)]


async def test_every_memory_carries_source_ids_and_line_spans(store):
    turns = [
        user("Hello! I adopted a greyhound named Pixel. She is three years old."),
        user("Our team moved the standup to 9:15 on Mondays."),
    ]
    result = await ingest.ingest(store, "s1", turns)
    ids = [row.id for row in ingest.build_messages("s1", turns)]
    spans = spans_of(store)
    assert len(spans) == result.memories.added == 3
    assert spans["I adopted a greyhound named Pixel."] == ([ids[0]], [[1, 1]])
    assert spans["She is three years old."] == ([ids[0]], [[2, 2]])
    assert spans["Our team moved the standup to 9:15 on Mondays."] == ([ids[1]], [[0, 0]])


def test_sixty_messages_are_chunked_with_a_two_message_overlap():
    rows = ingest.build_messages("s1", conversation(60, size=900))
    chunks = extract.build_chunks(rows)
    assert len(chunks) >= 6
    for before, after in itertools.pairwise(chunks):
        assert before.message_ids[-2:] == after.message_ids[:2]
        assert len(set(before.message_ids) & set(after.message_ids)) == 2
    covered = [i for chunk in chunks for i in chunk.message_ids]
    assert set(covered) == {row.id for row in rows}
    assert all(sum(len(line.text) for line in c.lines) <= extract.CHUNK_CHARS for c in chunks)
    assert chunks[0].lines[0].index == 0 and chunks[1].lines[0].index == 0


async def test_sixty_messages_ingest_once_despite_the_overlap(store):
    result = await ingest.ingest(store, "s1", conversation(60, size=900))
    contents = [m.content for m in (await store.reads.list_memories(limit=10_000))[0]]
    assert result.memories.added == len(contents) == len(set(contents))
    assert result.memories.duplicates == 0


def scripted_model(memories_for):
    """A chat server whose extraction answers are built from the transcript it is sent."""

    def reply(body):
        if "decision" in body["messages"][0]["content"]:
            return 200, '{"decision": "add", "target": null}'
        return 200, json.dumps({"memories": memories_for(transcript_of(body))})

    return ChatServer(reply)


async def test_verification_drops_unsupported_items_and_corrects_citations(store):
    def memories_for(transcript):
        return [
            {"content": "User owns a red Ferrari", "type": "fact", "lines": [0]},  # invented
            {
                "content": "User paid 40 euros for the locksmith",
                "type": "event",
                "lines": [0],  # wrong line: the payment is on line 1
                "event_time": "1999-01-01",  # and an invented date
            },
        ]

    server = scripted_model(memories_for)
    turns = [user("The cellar door was stuck."), user("Yesterday the locksmith charged 40 euros.")]
    with server.running():
        generator = LLMGenerator(OpenAIChat(server.base_url, "m"), name="openai")
        result = await ingest.ingest(store, "s1", turns, generator=generator)
    [memory] = await store.reads.memories_by_id(result.memory_ids)
    assert memory.content == "User paid 40 euros for the locksmith"
    assert memory.event_time == "2026-04-14"  # from "Yesterday" in the supporting line
    ids = [row.id for row in ingest.build_messages("s1", turns)]
    assert spans_of(store)[memory.content] == ([ids[1]], [[0, 0]])


async def test_a_malformed_answer_degrades_to_rules_for_that_chunk(store, caplog):
    server = ChatServer(lambda body: (200, "I'm sorry, I can't produce JSON today."))
    with server.running(), caplog.at_level(logging.WARNING):
        generator = LLMGenerator(OpenAIChat(server.base_url, "m"), name="openai")
        result = await ingest.ingest(store, "s1", [user("Use pnpm, not npm.")], generator=generator)
    assert result.memories.added == 1
    [memory] = await store.reads.memories_by_id(result.memory_ids)
    assert memory.topic_key == "user.package_manager"
    assert "using rules" in caplog.text and len(server.requests) == 1


async def test_a_dead_endpoint_never_fails_an_ingest(store):
    generator = LLMGenerator(OpenAIChat("http://127.0.0.1:9/v1", "m", attempts=1), name="openai")
    result = await ingest.ingest(
        store, "s1", [user("I keep bees on the roof.")], generator=generator
    )
    assert result.memories.added == 1


async def test_neighbour_gate_adds_unrelated_and_skips_near_duplicates(store, embed):
    await ingest.remember(
        store, "The office wifi network is called Bluebird.", memory_id="a", embed=embed
    )
    held_by, again = await ingest.remember(
        store, "The office WiFi network is called Bluebird!", memory_id="b", embed=embed
    )
    assert held_by == "a" and again.duplicates == 1 and again.added == []
    _, other = await ingest.remember(
        store, "My grandmother grows tomatoes in Lisbon.", memory_id="c", embed=embed
    )
    assert other.added == ["c"]
    assert await store.reads.pending_vectors("memory_vectors") == []  # stored during reconciliation


async def test_ingest_reports_the_time_of_each_stage(store, embed):
    timings: dict[str, float] = {}
    result = await ingest.ingest(store, "s1", conversation(12), embed=embed, timings=timings)
    stages = result.latency_ms
    assert {"ids", "extract", "classify", "reconcile", "embed", "write", "total"} <= set(stages)
    # The model's share of typing and reconciling (one call embeds the request's memories).
    assert stages["classify"] + stages["reconcile"] >= stages["embed"] > 0
    parts = sum(ms for stage, ms in stages.items() if stage not in ("embed", "total"))
    assert parts <= stages["total"]
    # The caller's accumulator gets the same split, in seconds, without the total.
    assert timings["extract"] * 1000 == pytest.approx(stages["extract"], abs=0.01)
    assert "total" not in timings


async def test_consolidating_a_session_extracts_appended_turns(store):
    rows = ingest.build_messages("s1", [user("I switched my editor to Helix last week.")])
    async with store.write() as writer:
        await writer.insert_messages(rows)
    reconciled = await ingest.consolidate_session(store, "s1")
    assert len(reconciled.added) == 1
    assert (await store.reads.get_session("s1")).consolidated_at is not None
    assert (await ingest.consolidate_session(store, "s1")).added == []


async def test_a_memory_is_embedded_by_its_content_alone(store, embed):
    """The vector a memory gets is its content's, whether reconciliation or the vectoriser made it."""
    first = await ingest.ingest(store, "s1", [user("I keep bees on the library roof.")])
    [bees] = await store.reads.memories_by_id(first.memory_ids)
    conn = open_sync(store.path)
    try:
        [(questions,)] = conn.execute("SELECT search_queries FROM memories").fetchall()
    finally:
        conn.close()
    assert "?" in questions  # it has questions; full-text search uses them, vectors do not
    [(seq, text)] = await store.reads.pending_vectors("memory_vectors")
    assert text == bees.content
    second = await ingest.ingest(
        store, "s2", [user("My sister restores old sailing boats in Gdansk.")], embed=embed
    )
    [boats] = await store.reads.memories_by_id(second.memory_ids)
    assert await store.reads.pending_vectors("memory_vectors") == [(seq, bees.content)]
    [query] = await embed([boats.content])
    [(hit, distance)] = await store.search.vectors("memory_vectors", query, limit=1)
    assert (store.search.memories_by_seq([hit]))[hit].id == boats.id and distance < 0.01
