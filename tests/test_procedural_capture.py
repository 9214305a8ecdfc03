"""Procedural memory on real SQLite files: the enabled flag, capture, the timeline, the ledger."""

import io
from pathlib import Path

import pytest
from procedural_helpers import T0, action, at, enabled_store

from raymem.export.archive import export_archive, import_archive
from raymem.pipelines.procedural import capture
from raymem.store import ProfileStore
from raymem.store.procedural import actions as stored
from raymem.store.replay import replay

DIM = 8


@pytest.fixture
async def store(tmp_path: Path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=DIM)
    yield store
    await store.close()


async def test_off_by_default_and_nothing_is_captured_while_off(store: ProfileStore) -> None:
    state = await capture.state(store)
    assert (state.enabled, state.updated_at, state.counts.actions) == (False, None, 0)

    result = await capture.capture(store, [action("s1", "search")], now=T0)
    assert (result.stored, result.duplicates, result.ignored) == (0, 0, 1)
    assert (await capture.state(store)).counts.actions == 0
    assert await store.reads.ledger_seq() == 0  # not even a ledger entry


async def test_enabling_is_stored_logged_and_idempotent(store: ProfileStore) -> None:
    assert await capture.set_enabled(store, True, now=T0) is True
    assert await capture.set_enabled(store, True, now=at(5)) is False
    state = await capture.state(store)
    assert (state.enabled, state.updated_at) == (True, T0)
    ops = [entry[2] for entry in await store.reads.ledger_entries(0)]
    assert ops == ["procedural_enabled", "metrics"]  # the built-in metrics come with it

    await capture.set_enabled(store, False, now=at(10))
    assert (await capture.state(store)).enabled is False


async def test_capture_is_idempotent_by_content_or_client_id(store: ProfileStore) -> None:
    await enabled_store(store)
    batch = [
        action("s1", "create_node", target_ids=["n1"], at=at(1), intent="add a person"),
        action("s1", "update_node", "failure", error_code="NodeNotFoundError", at=at(2)),
        action("s1", "search", id="client-id-1"),
    ]
    first = await capture.capture(store, batch, now=at(3))
    again = await capture.capture(store, batch, now=at(4))
    assert (first.stored, first.duplicates) == (3, 0)
    assert (again.stored, again.duplicates) == (0, 3)
    assert first.ids[:2] == again.ids[:2] and first.ids[2] == "client-id-1"
    assert len(first.ids[0]) == 32  # content-derived

    # The same action twice in one request is stored once; a different time is a new action.
    repeated = [action("s2", "search", at=at(5))] * 2 + [action("s2", "search", at=at(6))]
    result = await capture.capture(store, repeated, now=at(7))
    assert (result.stored, result.duplicates) == (2, 1)


async def test_actions_without_a_time_keep_their_order(store: ProfileStore) -> None:
    await enabled_store(store)
    batch = [action("s1", f"step{i}") for i in range(5)]
    await capture.capture(store, batch, now=T0)
    page, _ = await stored.list_actions(store.reader, session_id="s1")
    assert [a.action_type for a in reversed(page)] == [f"step{i}" for i in range(5)]
    assert all(a.captured_at == T0 for a in page)


async def test_timeline_filters_and_pages(store: ProfileStore) -> None:
    await enabled_store(store)
    batch = [
        action(
            f"s{i % 2}",
            "update_node" if i % 3 else "search",
            "failure" if i % 4 == 0 else "success",
            agent_id=f"agent-{i % 2}",
            at=at(i),
        )
        for i in range(12)
    ]
    await capture.capture(store, batch, now=at(20))

    everything, cursor = await stored.list_actions(store.reader, limit=5)
    assert [a.at for a in everything] == [at(i) for i in (11, 10, 9, 8, 7)]
    seen = list(everything)
    while cursor is not None:
        assert stored.valid_cursor(cursor)
        page, cursor = await stored.list_actions(store.reader, limit=5, cursor=cursor)
        seen.extend(page)
    assert [a.at for a in seen] == [at(i) for i in reversed(range(12))]

    by_agent, _ = await stored.list_actions(store.reader, agent_id="agent-1")
    assert {a.agent_id for a in by_agent} == {"agent-1"} and len(by_agent) == 6
    failures, _ = await stored.list_actions(store.reader, outcome="failure")
    assert [a.at for a in failures] == [at(8), at(4), at(0)]
    searches, _ = await stored.list_actions(
        store.reader, action_type="search", since=at(3), until=at(9)
    )
    assert [a.at for a in searches] == [at(6), at(3)]
    assert not stored.valid_cursor("nonsense") and not stored.valid_cursor("2025-01-01|x")


async def test_the_ledger_replays_capture_onto_another_copy(
    store: ProfileStore, tmp_path: Path
) -> None:
    await enabled_store(store)
    await capture.capture(store, [action("s1", "search", at=at(i)) for i in range(3)], now=at(5))
    copy = await ProfileStore.open(tmp_path / "copy" / "profile.db", dim=DIM)
    try:
        async with copy.write() as writer:
            for seq, when, op, payload in await store.reads.ledger_entries(0):
                assert await replay(writer, seq, when, op, payload)
        original, _ = await stored.list_actions(store.reader)
        replayed, _ = await stored.list_actions(copy.reader)
        assert replayed == original
        assert (await capture.state(copy)).enabled is True
    finally:
        await copy.close()


async def test_an_archive_carries_procedural_tables_byte_for_byte(
    store: ProfileStore, tmp_path: Path
) -> None:
    await enabled_store(store)
    await capture.capture(store, [action("s1", "search", at=at(i)) for i in range(3)], now=at(5))
    first = io.BytesIO()
    header = await export_archive(store, first, profile="p")
    assert header.counts.other["actions"] == 3 and header.counts.other["procedural_state"] == 1
    copy = await ProfileStore.open(tmp_path / "copy" / "profile.db", dim=DIM)
    try:
        await import_archive(copy, first.getvalue(), profile="p")
        second = io.BytesIO()
        await export_archive(copy, second, profile="p")
        assert second.getvalue() == first.getvalue()
        assert (await capture.state(copy)).enabled is True
    finally:
        await copy.close()
