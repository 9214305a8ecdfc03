"""Working memory and episodes on real SQLite files: work items, deltas, snapshots, episodes."""

import json
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from openai_server import ChatServer

from raymem.config import ContextSettings, ModelSettings
from raymem.errors import EntryNotFound, WorkItemClosed, WorkItemNotFound
from raymem.models.chat import make_chat_model
from raymem.pipelines import ingest
from raymem.pipelines.context import episodes
from raymem.pipelines.context.episodes import touched_resources
from raymem.pipelines.context.working import snapshot
from raymem.store import ProfileStore, work
from raymem.store import episodes as episode_store
from raymem.store.replay import replay
from raymem.types import MessageIn
from raymem.types_context import WorkItemOpen, WorkItemUpdate

DIM = 8
SETTINGS = ContextSettings()
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def store(tmp_path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=DIM)
    yield store
    await store.close()


async def open_item(store: ProfileStore, item_id: str = "w1", **fields):
    fields.setdefault("objective", "Ship the login page")
    async with store.write() as writer:
        return await work.open_item(writer, WorkItemOpen(**fields), item_id=item_id, now=NOW)


async def update(store: ProfileStore, item_id: str = "w1", minutes: int = 1, **fields):
    async with store.write() as writer:
        return await work.update_item(
            writer, item_id, WorkItemUpdate(**fields), now=NOW + timedelta(minutes=minutes)
        )


async def ledger_ops(store: ProfileStore) -> list[tuple[str, dict]]:
    return [(op, json.loads(payload)) for _, _, op, payload in await store.reads.ledger_entries(0)]


async def test_a_work_item_opens_updates_and_logs_one_delta_per_change(store):
    item = await open_item(
        store,
        session_id="s1",
        delivery_target="PR against main by Friday",
        constraints=["no new dependencies"],
        scope=["frontend only"],
        todos=["Write the form", "Add tests", "write the FORM"],
        waits=["design review"],
    )
    assert item.source_ref == "wrk_w1" and item.status == "open"
    assert [t.content for t in item.todos] == ["Write the form", "Add tests"]  # one per text
    assert [w.content for w in item.waits] == ["design review"]

    updated = await update(
        store,
        check_todos=["write   the form"],
        add_todos=["Update the docs"],
        add_followups=["Tell Ana it shipped"],
        resolve_waits=["Design Review"],
        delivery_target="PR by Thursday",
    )
    assert [(t.content, t.done) for t in updated.todos] == [
        ("Write the form", True),
        ("Add tests", False),
        ("Update the docs", False),
    ]
    assert updated.todos[0].done_at == NOW + timedelta(minutes=1)
    assert updated.delivery_target == "PR by Thursday" and updated.waits[0].done

    ops = await ledger_ops(store)
    assert [op for op, _ in ops] == ["working_memory", "working_memory"]
    assert ops[0][1]["action"] == "open"
    delta = ops[1][1]
    assert delta["action"] == "update" and delta["set"] == {"delivery_target": "PR by Thursday"}
    assert delta["add"] == [
        {"type": "todo", "content": "Update the docs"},
        {"type": "followup", "content": "Tell Ana it shipped"},
    ]
    assert {(m["type"], m["content"], m["done"]) for m in delta["mark"]} == {
        ("todo", "write the form", True),
        ("wait", "design review", True),
    }

    # A change that changes nothing logs nothing.
    same = await update(store, check_todos=["Write the form"], add_todos=["add TESTS"])
    assert same == updated and len(await ledger_ops(store)) == 2


async def test_bad_updates_are_refused_without_harm(store):
    await open_item(store, todos=["Write the form"])
    with pytest.raises(WorkItemNotFound, match="'nope' does not exist"):
        await update(store, "nope", add_todos=["x"])
    with pytest.raises(EntryNotFound, match="work item 'w1' \\(todos\\)"):
        await update(store, check_todos=["write the"])  # a substring is not the todo
    assert not work.read_item(store.quick, "w1").todos[0].done
    async with store.write() as writer:
        await work.close_item(writer, "w1", outcome="done", now=NOW)
    with pytest.raises(WorkItemClosed, match="is closed"):
        await update(store, add_todos=["more"])
    assert len(await ledger_ops(store)) == 2  # open and close only


async def test_the_snapshot_is_derived_from_records_and_deterministic(store):
    await ingest.ingest(
        store,
        "s1",
        [
            MessageIn(role="user", content="Always run the linter before committing."),
            MessageIn(role="user", content="I need to renew my passport by June."),
        ],
    )
    await open_item(store, "w1", session_id="s1", todos=["Write the form"])
    await open_item(store, "w2", objective="Profile-wide chores")
    await open_item(store, "w3", session_id="s2", objective="Another session's work")
    await update(store, "w1", check_todos=["Write the form"])

    first = snapshot(store, SETTINGS, "s1")
    assert [item.id for item in first.work_items] == ["w1", "w2"]  # the session's and shared
    assert [line.content for line in first.instructions] == [
        "Always run the linter before committing."
    ]
    assert [line.type for line in first.tasks] == ["task"]
    assert all(line.source_ref.startswith("mem_") for line in first.tasks + first.instructions)
    assert [item.id for item in snapshot(store, SETTINGS, None).work_items] == ["w1", "w2", "w3"]
    # The same records give the same bytes, whenever they are read.
    assert msgspec.json.encode(snapshot(store, SETTINGS, "s1")) == msgspec.json.encode(first)


async def test_closing_a_work_item_finalises_an_episode_by_rules(store):
    await ingest.ingest(
        store,
        "s1",
        [
            MessageIn(
                role="user",
                content="The login form lives in web/src/LoginForm.tsx, see ACME-42 and #17.",
                created_at=NOW + timedelta(minutes=1),
            ),
            MessageIn(
                role="assistant",
                content="We decided to use the existing session cookie. All tests passed in CI.",
                created_at=NOW + timedelta(minutes=2),
            ),
            MessageIn(
                role="user",
                content="Docs are at https://docs.example.com/login. Commit 3f9a2c1 has it.",
                created_at=NOW + timedelta(minutes=3),
            ),
        ],
    )
    await open_item(
        store,
        session_id="s1",
        todos=["Write the form", "Update the docs"],
        followups=["Tell Ana"],
        waits=["security review"],
        scope=["frontend only"],
    )
    await update(store, check_todos=["write the form"])
    closed = await episodes.close_work_item(
        store, "w1", "Merged", settings=SETTINGS, now=NOW + timedelta(hours=1)
    )
    item, episode = closed.work_item, closed.episode
    assert item.status == "closed" and item.outcome == "Merged"
    assert episode.trigger == "work_item" and episode.work_item_id == "w1"
    assert episode.title == "Ship the login page" and episode.builder == "rules"
    assert episode.summary.startswith("Outcome: Merged. Done: Write the form.")
    assert episode.resources == [
        "web/src/LoginForm.tsx",
        "ACME-42",
        "#17",
        "https://docs.example.com/login",
        "3f9a2c1",
    ]
    assert episode.decisions == ["We decided to use the existing session cookie."]
    assert episode.verification == ["All tests passed in CI."]
    assert episode.followups == ["Update the docs", "Tell Ana", "waiting on: security review"]
    assert episode.scope == ["frontend only"] and len(episode.source_message_ids) == 3
    assert episode_store.read_episode(store.quick, episode.id) == episode
    with pytest.raises(WorkItemClosed):
        await episodes.close_work_item(store, "w1", None, settings=SETTINGS, now=NOW)

    # Close and episode are one transaction, and replay on another copy gives the same rows.
    ops = await ledger_ops(store)
    assert [op for op, _ in ops][-2:] == ["working_memory", "episode"]
    assert ops[-2][1]["action"] == "close"


async def test_replay_rebuilds_work_items_and_episodes(store, tmp_path):
    await open_item(store, session_id="s1", todos=["a", "b"])
    await update(store, check_todos=["a"], constraints=["no new deps"])
    await episodes.close_work_item(store, "w1", "done", settings=SETTINGS, now=NOW)
    copy = await ProfileStore.open(tmp_path / "copy" / "profile.db", dim=DIM)
    try:
        async with copy.write() as writer:
            for seq, at, op, payload in await store.reads.ledger_entries(0):
                assert await replay(writer, seq, at, op, payload)
        assert work.list_items(copy.quick) == work.list_items(store.quick)
        assert episode_store.list_episodes(copy.quick) == episode_store.list_episodes(store.quick)
    finally:
        await copy.close()


async def test_a_session_episode_covers_the_turns_since_the_last_one(store):
    base = NOW
    turns = [
        MessageIn(
            role="user",
            content="Let's migrate the billing service to Postgres 16.",
            created_at=base,
        ),
        MessageIn(
            role="assistant",
            content="Agreed, we'll start with the schema.",
            created_at=base + timedelta(minutes=1),
        ),
    ]
    await ingest.ingest(store, "s1", turns)
    first = await episodes.finalise_session(store, "s1", settings=SETTINGS, now=NOW)
    assert first is not None and first.trigger == "session" and first.session_id == "s1"
    assert first.title == "Let's migrate the billing service to Postgres 16."
    assert first.decisions == ["Agreed, we'll start with the schema."]
    assert (first.started_at, first.ended_at) == (base, base + timedelta(minutes=1))
    assert await episodes.finalise_session(store, "s1", settings=SETTINGS, now=NOW) is None

    later = [
        MessageIn(
            role="user",
            content="The schema migration passed its tests.",
            created_at=base + timedelta(hours=2),
        )
    ]
    await ingest.ingest(store, "s1", later)
    second = await episodes.finalise_session(store, "s1", settings=SETTINGS, now=NOW)
    assert second is not None and len(second.source_message_ids) == 1
    assert second.verification == ["The schema migration passed its tests."]
    page, _ = episode_store.list_episodes(store.quick, session_id="s1")
    assert [e.id for e in page] == [second.id, first.id]  # newest first


async def test_a_configured_model_writes_the_episode_and_rules_stand_in_when_it_fails(store):
    answers = iter(
        [
            (
                200,
                json.dumps(
                    {
                        "title": "Login page",
                        "summary": "Built and merged the login page.",
                        "decisions": ["Reuse the session cookie"],
                        "verification": ["CI green"],
                        "followups": [],
                    }
                ),
            ),
            (200, "not json at all"),
        ]
    )
    server = ChatServer(lambda body: next(answers))
    with server.running():
        chat = make_chat_model(
            ModelSettings(generator="openai", openai_base_url=server.base_url, openai_model="m")
        )
        await open_item(store, "w1", todos=["Write the form"])
        by_model = await episodes.close_work_item(
            store, "w1", "Merged", settings=SETTINGS, chat=chat, builder="openai", now=NOW
        )
        await open_item(store, "w2", objective="Fix the flaky test")
        by_rules = await episodes.close_work_item(
            store, "w2", None, settings=SETTINGS, chat=chat, builder="openai", now=NOW
        )
    assert by_model.episode.builder == "openai"
    assert (by_model.episode.title, by_model.episode.summary) == (
        "Login page",
        "Built and merged the login page.",
    )
    assert by_model.episode.decisions == ["Reuse the session cookie"]
    assert "Write the form" in server.requests[0][2]["messages"][-1]["content"]
    assert by_rules.episode.builder == "rules" and by_rules.episode.title == "Fix the flaky test"


def test_touched_resources_are_found_by_pattern():
    found = touched_resources(
        [
            "Edit ./raymem/store/blocks.py and config.toml; see https://x.org/a?b=1.",
            "JIRA-7 and #12 were fixed in a1b2c3d, not in deadbeef-cafe or 1234567.",
        ]
    )
    assert found == [
        "./raymem/store/blocks.py",
        "config.toml",
        "https://x.org/a?b=1",
        "JIRA-7",
        "#12",
        "a1b2c3d",
    ]
