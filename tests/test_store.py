"""ProfileStore on real SQLite files: schema, idempotent turns, indexes, chains, transactions."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from raymem.errors import MemoryNotFound
from raymem.pipelines import ingest
from raymem.store import ProfileStore, erase, message_id, to_db_time, utc_now
from raymem.store.connection import open_sync
from raymem.store.reads import CONTEXT_CHARS
from raymem.store.schema import SCHEMA_VERSION
from raymem.types import MessageIn

DIM = 8


@pytest.fixture
async def store(tmp_path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=DIM)
    yield store
    await store.close()


def turns(*contents: str, role: str = "user") -> list[MessageIn]:
    return [MessageIn(role=role, content=c) for c in contents]


async def test_new_file_has_schema_wal_and_version(store, tmp_path):
    conn = open_sync(store.path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    for table in (
        "messages",
        "messages_fts",
        "memories",
        "memories_fts",
        "memory_vectors",
        "message_vectors",
        "ledger",
        "sessions",
        "memory_sources",
    ):
        assert table in tables


async def test_a_version_1_file_gains_the_sources_of_its_memories(tmp_path):
    store = await ProfileStore.open(tmp_path / "old.db", dim=DIM)
    await ingest.ingest(store, "s1", [MessageIn(role="user", content="I live in Lyon.")])
    [memory] = (await store.reads.list_memories())[0]
    await store.close()
    conn = open_sync(tmp_path / "old.db", read_only=False)  # back to the version 1 layout
    conn.executescript(
        "DROP TRIGGER memory_sources_insert; DROP TRIGGER memory_sources_update;"
        " DROP TRIGGER memory_sources_delete; DROP TABLE memory_sources;"
        " DROP INDEX memories_by_event_time; PRAGMA user_version = 1;"
    )
    conn.close()

    reopened = await ProfileStore.open(tmp_path / "old.db", dim=DIM)
    try:
        states = reopened.search.turn_memories(memory.source_message_ids)
    finally:
        await reopened.close()

    assert [state.id for state in states[memory.source_message_ids[0]]] == [memory.id]


async def test_reopening_with_another_dimension_is_refused(store, tmp_path):
    with pytest.raises(ValueError, match="8-d"):
        await ProfileStore.open(store.path, dim=16)


def test_message_ids_are_content_addressed():
    first = message_id("s1", "user", "hello there")
    assert first == message_id("s1", "user", "hello there")
    assert len(first) == 32 and int(first, 16) >= 0
    assert first != message_id("s2", "user", "hello there")
    assert first != message_id("s1", "assistant", "hello there")
    # length-prefixed: moving text between fields changes the id
    assert message_id("ab", "user", "c") != message_id("a", "user", "bc")


async def test_reingesting_a_conversation_stores_nothing_new(store):
    conversation = turns("I live in Budapest and work at Acme.", "Use pnpm, not npm.")
    first = await ingest.ingest(store, "s1", conversation)
    again = await ingest.ingest(store, "s1", conversation)
    assert (first.messages.stored, first.messages.duplicates) == (2, 0)
    assert first.memories.added == 2
    assert (again.messages.stored, again.messages.duplicates) == (0, 2)
    assert again.memories.added == 0 and again.memory_ids == []
    info = await store.reads.info("p")
    assert (info.messages, info.memories, info.sessions) == (2, 2, 1)


async def test_full_text_search_over_memories_and_messages(store):
    await ingest.ingest(store, "s1", turns("Our staging database is called orchid-42 today."))
    memory_seqs = store.search.memories_text('"orchid"', limit=5)
    message_seqs = store.search.messages_text('"orchid"', limit=5)
    assert len(memory_seqs) == 1 and len(message_seqs) == 1
    memories = store.search.memories_by_seq(memory_seqs)
    assert "orchid-42" in memories[memory_seqs[0]].content
    assert store.search.memories_text('"tulip"', limit=5) == []


async def test_vector_search_orders_by_cosine_distance(store):
    await ingest.ingest(
        store, "s1", turns("The first statement is here.", "The second one is here.")
    )
    pending = await store.reads.pending_vectors("message_vectors")
    assert len(pending) == 2
    basis = np.eye(DIM, dtype=np.float32)
    async with store.write() as writer:
        await writer.set_vectors(
            "message_vectors", [(pending[0][0], basis[0]), (pending[1][0], basis[1])]
        )
    assert await store.reads.pending_vectors("message_vectors") == []
    query = basis[1] * 0.9 + basis[0] * 0.1
    hits = await store.search.vectors("message_vectors", query, limit=2)
    assert [seq for seq, _ in hits] == [pending[1][0], pending[0][0]]
    assert hits[0][1] < hits[1][1]


async def test_same_topic_key_supersedes_and_keeps_the_chain(store):
    old_id, _ = await ingest.remember(store, "I live in Budapest.", memory_id="m-old")
    new_id, reconciled = await ingest.remember(
        store, "I moved to Vienna in May 2026.", memory_id="m-new"
    )
    assert reconciled.superseded == 1
    old = await store.reads.get_memory(old_id)
    assert old.superseded_by == new_id
    chain = await store.reads.history(old_id)
    assert [m.id for m in chain] == [old_id, new_id]
    assert [m.id for m in await store.reads.history(new_id)] == [old_id, new_id]
    current, _ = await store.reads.list_memories()
    assert [m.id for m in current] == [new_id]
    everything, _ = await store.reads.list_memories(include_superseded=True)
    assert {m.id for m in everything} == {old_id, new_id}


async def test_superseded_memory_loses_its_vector(store):
    await ingest.remember(store, "I live in Budapest.", memory_id="m-old")
    [(seq, _)] = await store.reads.pending_vectors("memory_vectors")
    async with store.write() as writer:
        await writer.set_vectors("memory_vectors", [(seq, np.ones(DIM))])
    assert len(await store.search.vectors("memory_vectors", np.ones(DIM), limit=5)) == 1
    await ingest.remember(store, "I moved to Vienna.", memory_id="m-new")
    assert await store.search.vectors("memory_vectors", np.ones(DIM), limit=5) == []


async def test_forget_hides_a_memory_but_keeps_it_readable(store):
    memory_id, _ = await ingest.remember(store, "My locker code is 4411.", memory_id="m1")
    async with store.write() as writer:
        assert await writer.forget(memory_id) is True
        assert await writer.forget("nope") is False
    forgotten = await store.reads.get_memory(memory_id)
    assert forgotten.forgotten_at is not None
    assert (await store.reads.list_memories())[0] == []
    assert store.search.memories_text('"locker"', limit=5) == []
    with pytest.raises(MemoryNotFound):
        await store.reads.get_memory("nope")


async def test_list_pages_with_a_cursor_newest_first(store):
    for index in range(7):
        await ingest.remember(
            store, f"Fact number {index} about the garden.", memory_id=f"m{index}"
        )
    seen, cursor = [], None
    while True:
        page, cursor = await store.reads.list_memories(limit=3, before_seq=cursor)
        seen.extend(m.id for m in page)
        if cursor is None:
            break
    assert seen == [f"m{index}" for index in reversed(range(7))]


async def test_a_failed_transaction_writes_nothing(store):
    rows = ingest.build_messages("s1", turns("This turn must not survive the rollback."))
    with pytest.raises(RuntimeError):
        async with store.write() as writer:
            await writer.insert_messages(rows)
            raise RuntimeError("boom")
    info = await store.reads.info("p")
    assert info.messages == 0 and info.sessions == 0
    assert await store.reads.ledger_seq() == 0


async def test_every_mutation_is_in_the_ledger(store):
    await ingest.ingest(store, "s1", turns("I live in Budapest."))
    await ingest.remember(store, "I moved to Vienna.", memory_id="m2")
    conn = open_sync(store.path)
    try:
        ops = [row[0] for row in conn.execute("SELECT op FROM ledger ORDER BY seq")]
    finally:
        conn.close()
    assert ops == ["messages", "memory", "extracted", "memory", "supersede"]


async def test_session_turns_come_back_oldest_first(store):
    await ingest.ingest(store, "s1", turns("one two three", "four five six", "seven eight nine"))
    last_two = await store.reads.session_messages("s1", last=2)
    assert [m.content for _, m in last_two] == ["four five six", "seven eight nine"]
    [session] = await store.reads.list_sessions()
    assert session.id == "s1" and session.message_count == 3


async def test_retention_purges_only_old_turns_and_keeps_memories(store):
    # a conversation from years ago, imported now, is young: age counts from ingestion
    dated = datetime(2020, 1, 1, tzinfo=UTC)
    await ingest.ingest(
        store,
        "old",
        [MessageIn(role="user", content="I adopted a greyhound named Comet.", created_at=dated)],
    )
    cutoff = to_db_time(utc_now())
    await ingest.ingest(store, "new", turns("I started learning the cello."))
    async with store.write() as writer:
        assert (
            await erase.erase_turns_before(writer, to_db_time(utc_now() - timedelta(days=90))) == 0
        )
        purged = await erase.erase_turns_before(writer, cutoff)
    assert purged == 1
    assert store.search.messages_text('"greyhound"', limit=5) == []
    assert len(store.search.messages_text('"cello"', limit=5)) == 1
    memories, _ = await store.reads.list_memories()
    assert {m.content for m in memories} == {
        "I adopted a greyhound named Comet.",
        "I started learning the cello.",
    }
    conn = open_sync(store.path)
    try:
        last = conn.execute("SELECT op, payload FROM ledger ORDER BY seq DESC LIMIT 1").fetchone()
    finally:
        conn.close()
    assert last[0] == "purge" and '"count":1' in last[1]


async def test_deleting_a_session_removes_turns_and_forgets_its_memories(store):
    await ingest.ingest(store, "a", turns("My cat is named Tofu."))
    await ingest.ingest(store, "b", turns("My dog is named Pixel."))

    async def delete_session(writer, session_id):
        erased = await erase.erase_session(writer, session_id, at=to_db_time(utc_now()))
        return len(erased.erasure.messages), erased.memories_forgotten

    async with store.write() as writer:
        assert await delete_session(writer, "a") == (1, 1)
        assert await delete_session(writer, "nope") == (0, 0)
    assert [s.id for s in await store.reads.list_sessions()] == ["b"]
    memories, _ = await store.reads.list_memories()
    assert [m.content for m in memories] == ["My dog is named Pixel."]
    assert store.search.messages_text('"tofu"', limit=5) == []


async def test_a_turn_is_embedded_with_the_start_of_the_turns_before_it(store):
    await ingest.ingest(
        store, "a", turns("Hi Mel!", "Which animals do you like?", "I'm drawn to turtles.")
    )
    await ingest.ingest(store, "b", turns("A new conversation starts here."))
    texts = [text for _, text in await store.reads.pending_vectors("message_vectors")]
    assert texts == [
        "Hi Mel!",
        "Which animals do you like?\nHi Mel!",
        "I'm drawn to turtles.\nWhich animals do you like?\nHi Mel!",
        "A new conversation starts here.",  # nothing from session a
    ]
    await ingest.ingest(store, "c", turns("x" * 1000, "Short reply."))
    last = (await store.reads.pending_vectors("message_vectors"))[-1][1]
    assert last == "Short reply.\n" + "x" * CONTEXT_CHARS  # only the start of a long turn


async def test_storing_a_vector_twice_replaces_it(store):
    # the background vectoriser and an ingest can both embed one row
    await ingest.ingest(store, "s1", turns("A turn embedded twice."))
    [(seq, _)] = await store.reads.pending_vectors("message_vectors")
    basis = np.eye(DIM, dtype=np.float32)
    for vector in (basis[0], basis[1]):
        async with store.write() as writer:
            await writer.set_vectors("message_vectors", [(seq, vector)])
    [(found, distance)] = await store.search.vectors("message_vectors", basis[1], limit=5)
    assert found == seq and distance == pytest.approx(0.0, abs=1e-6)
    conn = open_sync(store.path)
    try:
        assert conn.execute("SELECT count(*) FROM message_vectors").fetchone()[0] == 1
    finally:
        conn.close()
