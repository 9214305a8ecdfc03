"""Erasure reaches every subsystem's tables: procedural memory, the agent's context, dreams.

As in test_erase.py, unique marker words go into turns, memories and the rows
drawn from them (action captures, sequences, patterns, episodes, work items,
review proposals, an adopted dream's changes, a dream's candidate), and every
byte of the file, its ``-wal`` and ``-shm``, the ledger and a fresh export is
grepped for them after the erasure. What was not erased must stay, row for row,
and a copy replaying the redacted ledger must hold the same rows.
"""

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from procedural_helpers import FAIL, UPDATE, at, enabled_store, run_session
from test_erase import (
    DIM,
    P,
    T,
    bucket_artefacts,
    export_bytes,
    file_artefacts,
    holding,
    ledger,
    marker,
    memory_with,
    replayed_copies,
    rows,
    turns,
)

from raymem.config import ContextSettings, DreamSettings
from raymem.export.archive import export_archive, import_archive
from raymem.export.erasure import replace_older_copies
from raymem.export.ledger import LedgerShipper
from raymem.export.objectstore import ObjectStore
from raymem.export.snapshot import take_snapshot
from raymem.pipelines import ingest
from raymem.pipelines.context import episodes
from raymem.pipelines.context.assemble import block_limits
from raymem.pipelines.dream import Dreams
from raymem.pipelines.procedural import inject, patterns, skills
from raymem.store import (
    ProfileStore,
    blocks,
    erase,
    erase_tables,
    review,
    to_db_time,
    utc_now,
    work,
)
from raymem.store import dreams as dream_store
from raymem.store import episodes as episode_store
from raymem.store.replay import replay
from raymem.types_context import WorkItemOpen, WorkItemUpdate
from raymem.types_procedural import InjectRequest

CONTEXT = ContextSettings()
LIMITS = block_limits(CONTEXT)
NOW = at(days=1)  # after the procedural sessions of the tests' clock
MODEL_DIM = 384  # all-MiniLM-L6-v2
DELETE_LOCKED = ("delete_node", "failure", "NodeLockedError")


@pytest.fixture
async def store(tmp_path: Path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=DIM)
    yield store
    await store.close()


def everything(data: dict[str, bytes], export: bytes, entries: list[Any]) -> dict[str, bytes]:
    """The file's artefacts, an export and the ledger's payloads, by name."""
    return {**data, "export": export, "ledger": "\n".join(e[3] for e in entries).encode()}


async def artefacts(store: ProfileStore) -> dict[str, bytes]:
    assert await store.truncate_wal()
    return everything(file_artefacts(store.path), await export_bytes(store), await ledger(store))


async def session_with_context(store: ProfileStore, session: str, word: str) -> None:
    """A session whose turns, work item, episodes and actions all hold ``word``."""
    await ingest.ingest(
        store,
        session,
        turns(
            f"We rotate the {word} deploy key today.", f"Decided: the {word} key lives in vault."
        ),
    )
    async with store.write() as writer:
        await work.open_item(
            writer,
            WorkItemOpen(
                objective=f"Rotate the {word} key",
                session_id=session,
                constraints=[f"never print {word}"],
                todos=[f"revoke old {word}"],
                followups=[f"tell ops about {word}"],
            ),
            item_id=f"w-{session}",
            now=NOW,
        )
        await work.update_item(
            writer,
            f"w-{session}",
            WorkItemUpdate(check_todos=[f"revoke old {word}"], add_waits=[f"ack from {word}"]),
            now=NOW,
        )
        await work.open_item(
            writer,
            WorkItemOpen(objective=f"Audit {word}", session_id=session),
            item_id=f"w2-{session}",
            now=NOW,
        )
    await episodes.close_work_item(
        store, f"w-{session}", f"{word} rotated", settings=CONTEXT, now=NOW
    )
    await episodes.finalise_session(store, session, settings=CONTEXT, now=NOW)


async def procedural_sessions(store: ProfileStore, gone: str, kept: str) -> None:
    """Sessions ``gone`` and ``kept`` fail on their own targets (a shared pattern);
    ``gone`` alone fails to delete five times (a pattern only its actions show)."""
    await enabled_store(store)
    for index in range(5):
        await run_session(
            store, f"k{index}", [FAIL, UPDATE], start=at(index * 10), target=f"n-{kept}"
        )
    for index in range(5):
        await run_session(
            store,
            "s-gone",
            [FAIL, DELETE_LOCKED, UPDATE],
            start=at(60 + index * 10),
            target=f"n-{gone}",
            intent=f"clean up {gone} nodes",
        )
    await patterns.evaluate_patterns(store, at(200))
    for session in ("s-gone", "k0"):
        shown = await inject.inject(
            store,
            InjectRequest(action_type="update_node", target_type="node", session_id=session),
            now=at(210),
        )
        assert shown.patterns


async def assert_replays_match(
    store: ProfileStore, unredacted: list[tuple[int, str, str, str]], tmp_path: Path, word: str
) -> None:
    """A copy replaying the redacted ledger, or the old one and then the erase entry,
    holds the same rows and ledger as ``store`` and not one byte of ``word``."""
    redacted = await ledger(store)
    async for name, copy in replayed_copies(store, unredacted, tmp_path):
        assert await rows(copy) == await rows(store), name
        assert await ledger(copy) == redacted, name
        assert holding(await artefacts(copy), word) == [], name


async def pattern_keys(store: ProfileStore) -> dict[tuple[str, str | None], list[str]]:
    rows = await store.reader.execute_fetchall(
        "SELECT action_type, error_code, target_ids FROM patterns"
    )
    return {(row[0], row[1]): row[2] for row in rows}


# ------------------------------------------------------------- a session erased


async def test_erasing_a_session_reaches_actions_patterns_episodes_and_work_items(
    store: ProfileStore, tmp_path: Path
):
    gone, kept = marker(), marker()
    await session_with_context(store, "s-gone", gone)
    await session_with_context(store, "s-kept", kept)
    await procedural_sessions(store, gone, kept)
    before = await artefacts(store)
    assert "file" in holding(before, gone) and "ledger" in holding(before, gone)
    keys = await pattern_keys(store)
    assert ("delete_node", "NodeLockedError") in keys and f"n-{gone}" in str(keys)
    unredacted = await ledger(store)

    async with store.write() as writer:
        erased = await erase.erase_session(writer, "s-gone", at=to_db_time(utc_now()))
    assert erased.erasure.sessions == ["s-gone"]

    after = await artefacts(store)
    assert holding(after, gone) == []
    assert sorted(holding(after, kept)) == ["export", "file", "ledger"]
    # What was not erased stays: the other session's context and actions, and the
    # pattern the kept sessions show too, without the erased session's target.
    items, _ = work.list_items(store.quick)
    assert sorted(item.id for item in items) == ["w-s-kept", "w2-s-kept"]
    kept_episodes, _ = episode_store.list_episodes(store.quick)
    assert {e.session_id for e in kept_episodes} == {"s-kept"} and len(kept_episodes) == 2
    keys = await pattern_keys(store)
    assert list(keys) == [("update_node", "NodeNotFoundError")]
    assert f"n-{kept}" in keys[("update_node", "NodeNotFoundError")]
    counts = await store.reader.execute_fetchall(
        "SELECT (SELECT count(DISTINCT session_id) FROM actions),"
        " (SELECT count(*) FROM action_sequences), (SELECT count(*) FROM pattern_injections),"
        " (SELECT count(*) FROM action_sequence_vectors), (SELECT count(*) FROM episodes_fts)"
    )
    assert tuple(counts[0][:3]) == (5, 5, 1)

    await assert_replays_match(store, unredacted, tmp_path, gone)


async def test_a_skill_proposed_from_an_erased_sessions_intent_goes_and_others_stay(
    store: ProfileStore, tmp_path: Path
):
    gone, kept = marker(), marker()
    await enabled_store(store)
    for index in range(5):
        await run_session(
            store, "s-gone", [FAIL, UPDATE], start=at(index * 10), intent=f"clean up {gone} nodes"
        )
        await run_session(
            store, f"k{index}", [FAIL, UPDATE], start=at(100 + index * 10), intent=f"tidy {kept}"
        )
    proposed = await skills.propose(store, NOW)
    assert sorted(skill.name for skill in proposed) == sorted(
        [f"clean up {gone} nodes", f"tidy {kept}"]
    )
    assert "file" in holding(await artefacts(store), gone)
    unredacted = await ledger(store)

    async with store.write() as writer:
        await erase.erase_session(writer, "s-gone", at=to_db_time(utc_now()))

    assert holding(await artefacts(store), gone) == []
    left = await store.reader.execute_fetchall("SELECT name, status, source FROM skills")
    assert [tuple(row) for row in left] == [(f"tidy {kept}", "candidate", "proposed")]
    await assert_replays_match(store, unredacted, tmp_path, gone)


async def test_an_imported_session_is_erased_from_the_import_entry(
    store: ProfileStore, tmp_path: Path
):
    gone, kept = marker(), marker()
    source = await ProfileStore.open(tmp_path / "source" / "profile.db", dim=DIM)
    try:
        await session_with_context(source, "s-gone", gone)
        await session_with_context(source, "s-kept", kept)
        await procedural_sessions(source, gone, kept)
        await export_archive(source, tmp_path / "a.jsonl", profile="source")
    finally:
        await source.close()
    await import_archive(store, tmp_path / "a.jsonl", profile="p")

    async with store.write() as writer:
        await erase.erase_session(writer, "s-gone", at=to_db_time(utc_now()))

    after = await artefacts(store)
    assert holding(after, gone) == []
    assert sorted(holding(after, kept)) == ["export", "file", "ledger"]
    entries = await ledger(store)
    assert [e[2] for e in entries] == ["import", "erase"]
    copy = await ProfileStore.open(tmp_path / "copy" / "profile.db", dim=DIM)
    try:
        async with copy.write() as writer:
            for entry in entries:
                assert await replay(writer, *entry)
        assert await rows(copy) == await rows(store)
    finally:
        await copy.close()


# -------------------------------------------------------------- a memory erased


async def seed_memory_and_reviews(store: ProfileStore, secret: str, kept: str) -> tuple[str, str]:
    """A memory holding ``secret`` in an episode, a proposal and an adopted dream's changes;
    the same around ``kept``. Returns both memories' ids."""
    await ingest.ingest(store, "s1", turns(f"My locker code is {secret}."))
    await ingest.ingest(store, "s2", turns(f"My sister moved to {kept}."))
    for session in ("s1", "s2"):
        await episodes.finalise_session(store, session, settings=CONTEXT, now=NOW)
    secret_id, kept_id = await memory_with(store, secret), await memory_with(store, kept)
    await ingest.remember(store, "I like green tea.", memory_id="m-tea")
    await ingest.remember(store, "I like black coffee.", memory_id="m-coffee")
    created = to_db_time(NOW)
    async with store.write() as writer:
        for proposal_id, memory_id, word in (("p-1", secret_id, secret), ("p-2", kept_id, kept)):
            await review.propose(
                writer,
                review.Proposal(
                    id=proposal_id,
                    action="supersede",
                    memory_id="m-tea",
                    target_id=memory_id,
                    confidence=0.4,
                    reason=f"both speak of {word}",
                    state="pending",
                    created_at=created,
                ),
            )
        dream = dream_store.DreamRow(
            id="d-1",
            state="ready",
            step="done",
            instructions="",
            max_sessions=10,
            base_seq=0,
            counts={},
            started_at=created,
        )
        await dream_store.adopt(
            writer,
            dream,
            [
                dream_store.Change(
                    action="retire",
                    memory_ids=[secret_id, "m-coffee"],
                    content=f"locker code {secret}",
                    reason=f"{secret} is stale",
                ),
                dream_store.Change(
                    action="retire", memory_ids=["m-tea"], content="tea", reason=f"{kept} wins"
                ),
            ],
            created,
        )
    return secret_id, kept_id


async def test_erasing_a_memory_reaches_episodes_proposals_and_dream_changes(
    store: ProfileStore, tmp_path: Path
):
    secret, kept = marker(), marker()
    secret_id, _ = await seed_memory_and_reviews(store, secret, kept)
    before = await artefacts(store)
    assert sorted(holding(before, secret)) == ["export", "file", "ledger"]
    unredacted = await ledger(store)

    async with store.write() as writer:
        erased = await erase.erase_memories(writer, [secret_id], at=to_db_time(utc_now()))
    assert secret_id in erased.memories

    after = await artefacts(store)
    assert holding(after, secret) == []
    assert sorted(holding(after, kept)) == ["export", "file", "ledger"]
    [episode] = episode_store.list_episodes(store.quick)[0]
    assert episode.session_id == "s2" and kept in episode.summary
    assert [p.id for p in await review.list_proposals(store.reader, state=None, limit=10)] == [
        "p-2"
    ]
    changes = await dream_store.read_changes(store.reader, "d-1")
    assert [(c.content, c.reason) for c in changes] == [("", ""), ("tea", f"{kept} wins")]
    retired = await store.reader.execute_fetchall(
        "SELECT memory_id, reason FROM retired_memories ORDER BY memory_id"
    )
    assert [tuple(r) for r in retired] == [("m-coffee", ""), ("m-tea", f"{kept} wins")]

    async for name, copy in replayed_copies(store, unredacted, tmp_path):
        assert await rows(copy) == await rows(store), name
        assert await dream_store.read_changes(copy.reader, "d-1") == changes, name
        assert holding(await artefacts(copy), secret) == [], name


async def test_erasing_a_memory_keeps_the_blocks_work_items_and_actions(store: ProfileStore):
    secret = marker()
    await session_with_context(store, "s1", secret)
    await procedural_sessions(store, secret, marker())
    async with store.write() as writer:
        await blocks.add_entry(writer, "user", f"Locker: {secret}", defaults=LIMITS, now=NOW)
    memory_id = await memory_with(store, f"rotate the {secret}")
    counts_sql = (
        "SELECT (SELECT count(*) FROM work_items), (SELECT count(*) FROM work_entries),"
        " (SELECT count(*) FROM actions), (SELECT count(*) FROM action_sequences),"
        " (SELECT count(*) FROM patterns), (SELECT count(*) FROM block_entries)"
    )
    counts = tuple((await store.reader.execute_fetchall(counts_sql))[0])

    async with store.write() as writer:
        erased = await erase.erase_memories(writer, [memory_id], at=to_db_time(utc_now()))

    # The episodes drawn from the memory or its turn go; the session's explicit work,
    # its actions and the person's block (which repeats the text) stay as written.
    assert tuple((await store.reader.execute_fetchall(counts_sql))[0]) == counts
    for episode in episode_store.list_episodes(store.quick)[0]:
        assert not set(erased.memories) & set(episode.source_memory_ids)
        assert not set(erased.messages) & set(episode.source_message_ids)
    [user] = [b for b in blocks.read_blocks(store.quick, LIMITS) if b.name == "user"]
    assert f"Locker: {secret}" in user.entries


# ---------------------------------------------------------------------- retention


async def test_retention_keeps_episodes_actions_and_work_items(store: ProfileStore):
    old = marker()
    await session_with_context(store, "s1", old)
    await procedural_sessions(store, old, marker())
    summary = [e.summary for e in episode_store.list_episodes(store.quick)[0]]
    cutoff = to_db_time(utc_now() + timedelta(seconds=1))

    async with store.write() as writer:
        assert await erase.erase_turns_before(writer, cutoff) == 2

    assert [e.summary for e in episode_store.list_episodes(store.quick)[0]] == summary
    assert len(work.list_items(store.quick)[0]) == 2
    assert (await store.reader.execute_fetchall("SELECT count(*) FROM actions"))[0][0] > 0


# ------------------------------------------------------------------------ dreams


@pytest.fixture
async def model_store(tmp_path: Path):
    """A store of the embedding model's dimension: a dream embeds its memories."""
    store = await ProfileStore.open(tmp_path / "m" / "profile.db", dim=MODEL_DIM)
    yield store
    await store.close()


async def test_an_erasure_ends_an_open_dream_and_its_candidate_goes(
    model_store: ProfileStore, embed
):
    store = model_store
    secret = marker()
    await ingest.ingest(store, "s1", turns(f"My locker code is {secret}.", "I play the cello."))
    await ingest.ingest(store, "s2", turns("I play the cello.", "My sister lives in Porto."))
    dreams = Dreams(store, DreamSettings(), embed=embed)
    started = await dreams.start()
    assert (await dreams.wait(started.id)).state == "ready"
    candidates = dream_store.candidate_dir(store.path)
    stray = candidates / "stray.db"  # a candidate a crash left behind
    stray.write_bytes(f"copy of {secret}".encode())
    assert holding({p.name: p.read_bytes() for p in candidates.iterdir()}, secret), (
        "the control: the candidate holds the text"
    )

    async with store.write() as writer:
        await erase.erase_memories(
            writer, [await memory_with(store, secret)], at=to_db_time(utc_now())
        )
    ended = await dreams.end_open("erased")

    assert ended is not None and ended.state == "discarded" and ended.error == "erased"
    assert list(candidates.iterdir()) == []
    assert holding(await artefacts(store), secret) == []
    assert await dreams.end_open("erased") is None  # none open: nothing to end


# ---------------------------------------------------------------- object storage


async def test_object_storage_keeps_no_copy_of_an_erased_sessions_subsystem_rows(
    store: ProfileStore, object_store: ObjectStore, s3_client: Any
):
    gone, kept = marker(), marker()
    await session_with_context(store, "s-gone", gone)
    shipper = LedgerShipper(store, object_store, T, P)
    await shipper.start(background=False)
    await take_snapshot(store, object_store, T, P)
    await session_with_context(store, "s-kept", kept)
    await procedural_sessions(store, gone, kept)
    await shipper.flush()
    assert len(holding(bucket_artefacts(object_store, s3_client), gone)) == 2  # the control

    async with store.write() as writer:
        await erase.erase_session(writer, "s-gone", at=to_db_time(utc_now()))

    async def replace() -> int:
        return (await replace_older_copies(store, object_store, T, P)).ledger_seq

    seq = await shipper.restart_from(replace)
    objects = bucket_artefacts(object_store, s3_client)
    assert holding(objects, gone) == []
    assert holding(objects, kept) == [f"raymem/{T}/{P}/snapshots/{seq:020d}"]


async def test_a_session_known_only_to_procedural_memory_is_erased(store: ProfileStore):
    gone, kept = marker(), marker()
    await procedural_sessions(store, gone, kept)  # actions, no turn of any session
    assert await store.reads.list_sessions() == []

    async with store.write() as writer:
        erased = await erase.erase_session(writer, "s-gone", at=to_db_time(utc_now()))
        unknown = await erase.erase_session(writer, "s-none", at=to_db_time(utc_now()))

    assert erased.erasure.sessions == ["s-gone"] and unknown.erasure.is_empty()
    assert holding(await artefacts(store), gone) == []
    assert sorted(holding(await artefacts(store), kept)) == ["export", "file", "ledger"]


def test_every_subsystem_op_says_which_entries_it_reads() -> None:
    assert set(erase_tables.NEEDLES) == set(erase_tables.REDACTORS)
    assert set(erase_tables.REDACTORS) <= set(erase.REDACTORS)
    assert set(erase_tables.ROW_REDACTORS) <= set(erase.ROW_REDACTORS)
