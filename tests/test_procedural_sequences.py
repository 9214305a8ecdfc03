"""Pass 1 on real SQLite files: quiet and ended sessions become sequences, with their steps."""

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from openai_server import ChatServer
from procedural_helpers import CREATE, FAIL, QUIET_S, UPDATE, action, at, enabled_store, run_session

from raymem.models.chat import OpenAIChat
from raymem.pipelines.procedural import capture, sequences
from raymem.pipelines.procedural.summary import ChatSummariser
from raymem.store import ProfileStore
from raymem.store.procedural import actions as stored
from raymem.types_procedural import Action

DIM = 8


@pytest.fixture
async def store(tmp_path: Path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=DIM)
    await enabled_store(store)
    yield store
    await store.close()


async def test_a_session_becomes_a_sequence_after_five_quiet_minutes(store: ProfileStore) -> None:
    await capture.capture(
        store,
        [action("s1", "search", at=at(0)), action("s1", "update_node", at=at(1))],
        now=at(1),
    )
    # 4 min 59 s after the last action: still open; 5 minutes: closed.
    assert (
        await sequences.close_quiet(
            store, at(1) + timedelta(seconds=QUIET_S - 1), quiet_after_s=QUIET_S
        )
        == []
    )
    closed = await sequences.close_quiet(store, at(6) + timedelta(seconds=1), quiet_after_s=QUIET_S)
    assert [(s.session_id, s.action_count, s.closed_by) for s in closed] == [("s1", 2, "quiet")]
    assert (await capture.state(store)).counts.open_actions == 0
    # Closing again finds nothing; a later action starts the session's next sequence.
    assert await sequences.close_quiet(store, at(30), quiet_after_s=QUIET_S) == []
    await capture.capture(store, [action("s1", "search", at=at(40))], now=at(40))
    again = await sequences.close_quiet(store, at(50), quiet_after_s=QUIET_S)
    assert len(again) == 1 and again[0].id != closed[0].id


async def test_the_quiet_time_is_configurable(store: ProfileStore) -> None:
    await capture.capture(store, [action("s1", "search", at=at(0))], now=at(0))
    assert await sequences.close_quiet(store, at(1), quiet_after_s=120) == []
    assert (
        len(await sequences.close_quiet(store, at(2) + timedelta(seconds=1), quiet_after_s=120))
        == 1
    )


async def test_ending_a_session_closes_its_sequence_at_once(store: ProfileStore) -> None:
    await capture.capture(
        store, [action("s1", "search", at=at(0)), action("s2", "search", at=at(0))], now=at(0)
    )
    closed = await sequences.close_session(store, "s1", at(0.5))
    assert closed is not None and closed.closed_by == "session_end"
    assert await sequences.close_session(store, "s1", at(1)) is None  # nothing left open
    assert (await capture.state(store)).counts.open_actions == 1  # s2 is still open


async def test_a_sequence_has_an_outcome_counts_and_an_intent(store: ProfileStore) -> None:
    sequence = await run_session(
        store, "s1", [FAIL, CREATE, UPDATE], start=at(0), intent="rename a person"
    )
    assert sequence.outcome == "success"  # where the agent ended up
    assert (sequence.action_count, sequence.failure_count) == (3, 1)
    assert (sequence.intent, sequence.summarised_by) == ("rename a person", "rules")
    assert (sequence.started_at, sequence.ended_at) == (at(0), at(0) + timedelta(seconds=2))
    failed = await run_session(store, "s2", [CREATE, FAIL], start=at(10))
    assert failed.outcome == "failure"
    assert failed.intent == "create_node node; update_node node"  # no stated intent
    listed, _ = await stored.list_sequences(store.reader)
    assert [s.id for s in listed] == [failed.id, sequence.id]
    assert await stored.get_sequence(store.reader, sequence.id) == sequence


async def test_steps_record_failures_and_what_preceded_each_attempt(store: ProfileStore) -> None:
    sequence = await run_session(store, "s1", [FAIL, FAIL, CREATE, UPDATE], start=at(0))
    steps = {step.action_type: step for step in sequence.steps}
    update = steps["update_node"]
    assert (update.attempts, update.successes) == (3, 1)
    assert [(f.outcome, f.error_code, f.target_ids) for f in update.failures] == [
        ("failure", "NodeNotFoundError", ["n1"])
    ]
    assert update.failures[0].at == at(0)
    # create_node had succeeded on n1 before one attempt, which succeeded.
    assert update.after == {"create_node": (1, 1)}
    assert steps["create_node"].after == {}


async def test_preceding_actions_count_only_on_the_same_target(store: ProfileStore) -> None:
    batch = [
        action("s1", "create_node", target_ids=["a"], at=at(0)),
        action(
            "s1",
            "update_node",
            "failure",
            error_code="NodeNotFoundError",
            target_ids=["b"],
            at=at(1),
        ),
        action("s1", "update_node", target_ids=["a"], at=at(2)),
    ]
    await capture.capture(store, batch, now=at(2))
    sequence = await sequences.close_session(store, "s1", at(3))
    assert sequence is not None
    update = next(step for step in sequence.steps if step.action_type == "update_node")
    assert update.after == {"create_node": (1, 1)}  # the attempt on b is not counted after it


class FailingSummariser:
    name = "broken-model"

    async def summarise(self, actions: Sequence[Action]) -> str:
        raise RuntimeError("model unavailable")


class EchoSummariser:
    name = "test-model"

    async def summarise(self, actions: Sequence[Action]) -> str:
        return f"  did {len(actions)}\n things "


async def test_a_summariser_writes_the_intent_and_rules_take_over_when_it_fails(
    store: ProfileStore,
) -> None:
    await capture.capture(store, [action("s1", "search", intent="find x", at=at(0))], now=at(0))
    await capture.capture(store, [action("s2", "search", intent="find y", at=at(0))], now=at(0))
    by_model = await sequences.close_session(store, "s1", at(1), summariser=EchoSummariser())
    by_rules = await sequences.close_session(store, "s2", at(1), summariser=FailingSummariser())
    assert by_model is not None and by_rules is not None
    assert (by_model.intent, by_model.summarised_by) == ("did 1 things", "test-model")
    assert (by_rules.intent, by_rules.summarised_by) == ("find y", "rules")


async def test_long_intents_are_cut(store: ProfileStore) -> None:
    intents = [f"intent number {i} " + "x" * 40 for i in range(10)]
    await capture.capture(
        store,
        [action("s1", "search", intent=text, at=at(i)) for i, text in enumerate(intents)],
        now=at(0),
    )
    sequence = await sequences.close_session(store, "s1", at(20))
    assert sequence is not None
    assert len(sequence.intent) == sequences.INTENT_CHARS and sequence.intent.endswith("…")


async def test_a_chat_model_summarises_and_a_bad_answer_falls_back_to_rules(
    store: ProfileStore,
) -> None:
    answers = iter(['{"intent": "Rename a person node"}', "I cannot help with that."])
    server = ChatServer(lambda body: (200, next(answers)))
    with server.running():
        chat = OpenAIChat(server.base_url, "tiny-llm", timeout_s=5)
        summariser = ChatSummariser(chat, name="openai:tiny-llm")
        for session in ("s1", "s2"):
            batch = [
                action(
                    session,
                    "update_node",
                    "failure",
                    error_code="NodeNotFoundError",
                    target_ids=["n1"],
                    intent="rename",
                    at=at(0),
                ),
                action(session, "create_node", target_ids=["n1"], at=at(1)),
            ]
            await capture.capture(store, batch, now=at(1))
        first = await sequences.close_session(store, "s1", at(2), summariser=summariser)
        second = await sequences.close_session(store, "s2", at(2), summariser=summariser)
        await chat.close()
    assert first is not None and second is not None
    assert (first.intent, first.summarised_by) == ("Rename a person node", "openai:tiny-llm")
    assert (second.intent, second.summarised_by) == ("rename", "rules")
    prompt = server.requests[0][2]["messages"][-1]["content"]
    assert prompt == (
        "Actions, in order:\n"
        "1. update_node on node n1: failure (NodeNotFoundError); intent: rename\n"
        "2. create_node on node n1: success"
    )
