"""A simulated agent learns from procedural memory (the pipelines over a real SQLite file).

Its tool, ``update_node``, fails with NodeNotFoundError unless ``create_node`` ran on the
same node first, which the agent does not know. After five sequences a pattern appears,
the injected block names the precondition, and once the agent heeds it the success
rate and its delta against the baseline rise. ``benchmarks/procedural.py`` runs the same
agent against the service.
"""

import random
from datetime import timedelta
from pathlib import Path

import pytest
from procedural_helpers import T0

from raymem.config import ProceduralSettings
from raymem.pipelines import procedural
from raymem.pipelines.procedural import capture, inject, metrics, sequences
from raymem.store import ProfileStore
from raymem.types_procedural import ActionIn, InjectRequest

SETTINGS = ProceduralSettings()
CREATES_FIRST = 0.2  # how often the agent happens to create the node first
RECOVERS = 0.5  # how often, after NodeNotFoundError, it creates the node and retries
TASK_HOURS = 4  # between tasks: 7 days after the baseline, the window holds no naive task
HEEDING_TASKS = 50


def tool(action_type: str, node: str, created: set[str]) -> tuple[str, str | None]:
    """The flaky tool: (outcome, error code); the hidden precondition is ``create_node``."""
    if action_type == "create_node":
        created.add(node)
        return "success", None
    if node not in created:
        return "failure", "NodeNotFoundError"
    return "success", None


def act(plan: list[str], node: str, rng: random.Random) -> list[tuple[str, str, str | None]]:
    """Run the plan against the tool: (action type, outcome, error code) of each call."""
    created: set[str] = set()
    done = []
    for action_type in plan:
        outcome, error = tool(action_type, node, created)
        done.append((action_type, outcome, error))
        if outcome != "success":
            if rng.random() >= RECOVERS:
                break  # it gives up
            for retry in ("create_node", "update_node"):
                done.append((retry, *tool(retry, node, created)))
            break
    return done


async def run_task(store: ProfileStore, number: int, rng: random.Random, *, asks: bool) -> bool:
    """One task (a session, four hours after the one before) renaming a node.

    An agent that ``asks`` for past experience first follows a precondition it is
    given; returns whether it did.
    """
    session, node = f"task-{number}", f"n{number}"
    start = T0 + timedelta(hours=TASK_HOURS * number)
    heeded = False
    if asks:
        request = InjectRequest(
            action_type="update_node", target_type="node", target_ids=[node], session_id=session
        )
        block = await inject.inject(store, request, now=start)
        heeded = any(p.precondition == "create_node" for p in block.patterns)
    creates_first = heeded or rng.random() < CREATES_FIRST
    plan = ["create_node", "update_node"] if creates_first else ["update_node"]
    actions = [
        ActionIn(
            session_id=session,
            action_type=action_type,
            target_type="node",
            target_ids=[node],
            outcome=outcome,  # type: ignore[arg-type]
            error_code=error,
            intent="rename a node",
            at=start + timedelta(seconds=index),
        )
        for index, (action_type, outcome, error) in enumerate(act(plan, node, rng))
    ]
    await capture.capture(store, actions, now=start)
    await sequences.close_session(store, session, start + timedelta(minutes=1))
    await procedural.evaluate(store, start + timedelta(minutes=2), SETTINGS, with_metrics=False)
    return heeded


@pytest.fixture
async def store(tmp_path: Path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=8)
    await capture.set_enabled(store, True, now=T0)
    yield store
    await store.close()


async def test_the_agent_learns_the_hidden_precondition(store: ProfileStore) -> None:
    rng = random.Random(19)
    # The baseline: an agent that never asks, for the first 50 sequences.
    named_at = None
    for number in range(metrics.BASELINE_SEQUENCES):
        await run_task(store, number, rng, asks=False)
        found = (await capture.state(store)).counts.patterns
        assert found == (0 if number < 4 else 1)  # a pattern after five sequences
        block = await inject.injection_block(store, "update_node", "node", ["n-new"])
        if named_at is None and "run create_node first" in block.text:
            named_at = number + 1
    assert named_at is not None and named_at <= 10  # the block names the precondition early
    ended = T0 + timedelta(hours=TASK_HOURS * metrics.BASELINE_SEQUENCES)
    before = {r.metric_id: r for r in await metrics.evaluate_metrics(store, ended)}

    # Then the agent asks before acting, and heeds what it is told.
    heeding = range(metrics.BASELINE_SEQUENCES, metrics.BASELINE_SEQUENCES + HEEDING_TASKS)
    assert all([await run_task(store, number, rng, asks=True) for number in heeding])
    ended = T0 + timedelta(hours=TASK_HOURS * heeding.stop)
    after = {r.metric_id: r for r in await metrics.evaluate_metrics(store, ended)}

    rate_before, rate_after = before["task_success_rate"], after["task_success_rate"]
    assert rate_before.value is not None and rate_before.value < 0.8
    assert rate_after.value == 1.0  # heeding the warning, the agent never hits the failure
    assert rate_after.delta_vs_baseline is not None
    assert rate_after.delta_vs_baseline > (rate_before.delta_vs_baseline or 0.0) + 0.2
    assert after["pattern_utilisation"].value == 1.0  # every warned sequence avoided it
    efficiency = after["efficiency_delta"]
    assert efficiency.value == 2.0 and efficiency.delta_vs_baseline is not None

    # The nightly pass proposes the routine that keeps succeeding as a skill to review.
    result = await procedural.evaluate(store, ended + timedelta(hours=1), SETTINGS)
    assert (result.skills_proposed, result.benchmarks) == (1, 3)
    assert set(result.latency_ms) == {"sequences", "patterns", "metrics", "skills", "total"}
