"""Procedural memory from Python: the HTTP clients (sync and async) and in-cluster get_profile.

The blocking HTTP client and the in-cluster profile have the same surface, so one
scenario runs against both; the async client repeats its core, awaited.
"""

import asyncio
import inspect
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from test_client import public_methods

import raymem
from raymem.actors.local_procedural import LocalProcedural
from raymem.client import AsyncClient, Client, RaymemHTTPError
from raymem.client_procedural import AsyncProceduralClient, ProceduralClient
from raymem.pipelines.procedural.condition import InvalidCondition
from raymem.types_procedural import ActionIn, MetricWindow

NOW = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)  # ahead of the actor's timer


def steps(session: str, start: int, *failing_first: bool) -> list[ActionIn]:
    """A session renaming node ``n-<session>``: update_node fails until create_node ran."""
    plan = [("update_node", "failure", "NodeNotFoundError")] if failing_first else []
    plan += [("create_node", "success", None), ("update_node", "success", None)]
    return [
        ActionIn(
            session_id=session,
            action_type=action_type,
            target_type="node",
            target_ids=[f"n-{session}"],
            outcome=outcome,  # type: ignore[arg-type]
            error_code=error_code,
            intent="rename a node",
            at=NOW + timedelta(minutes=start, seconds=index),
        )
        for index, (action_type, outcome, error_code) in enumerate(plan)
    ]


def exercise(procedural: Any) -> None:
    """The whole surface, blocking: ``ProceduralClient`` or ``LocalProcedural``."""
    assert procedural.enable().enabled is True
    one = procedural.record(
        session_id="s0",
        action_type="update_node",
        target_type="node",
        target_ids=["n-s0"],
        outcome="failure",
        error_code="NodeNotFoundError",
        intent="rename a node",
        at=NOW,
        agent_id="agent-7",
    )
    assert (one.stored, one.duplicates) == (1, 0)
    rest = steps("s0", 0, True)[1:]  # its first action was the one recorded
    for number in range(1, 6):
        rest += steps(f"s{number}", number, True)
    # Dicts work as well as ActionIn.
    captured = procedural.capture([msgspec.to_builtins(a) for a in rest])
    assert (captured.stored, captured.duplicates) == (17, 0)
    assert procedural.state().counts.open_actions == 18

    result = procedural.evaluate(now=NOW + timedelta(hours=1))
    assert (result.sequences_closed, result.patterns.promoted) == (6, 1)
    [pattern] = procedural.patterns(action_type="update_node").patterns
    assert pattern.error_code == "NodeNotFoundError" and pattern.precondition == "create_node"
    assert procedural.pattern(pattern.id).history[-1].id == pattern.id
    block = procedural.inject(action_type="update_node", target_type="node", target_ids=["n-x"])
    assert "run create_node first" in block.text

    assert procedural.annotate(pattern.id, "Ask the importer.").annotation == "Ask the importer."
    assert procedural.suppress(pattern.id).suppressed is True
    assert procedural.inject(action_type="update_node", target_type="node").text == ""
    assert procedural.suppress(pattern.id, False).suppressed is False
    assert procedural.annotate(pattern.id, None).annotation is None

    timeline = procedural.actions(agent_id="agent-7")
    assert [a.id for a in timeline.actions] == one.ids
    page = procedural.actions(limit=10)
    assert len(page.actions) == 10 and page.next_cursor is not None
    assert len(procedural.actions(limit=10, cursor=page.next_cursor).actions) == 8
    listed = procedural.sequences(outcome="success", since=NOW - timedelta(hours=1))
    assert len(listed.sequences) == 6
    found = procedural.sequences(query="rename a node", limit=3).sequences
    assert len(found) == 3 and procedural.sequence(found[0].id) == found[0]

    preview = procedural.preview_metric(
        id="short",
        aggregation="rate",
        success_condition="action_count <= 3",
        action_types=["update_node"],
        now=NOW + timedelta(hours=1),
    )
    assert (preview.value, preview.samples) == (1.0, 6)
    metric = procedural.define_metric(
        id="short", aggregation="average", success_condition="outcome == 'success'"
    )
    assert metric.aggregation == "average" and not metric.builtin
    assert {m.id for m in procedural.metrics().metrics} >= {"short", "task_success_rate"}
    procedural.evaluate(now=NOW + timedelta(hours=2))
    rows = procedural.benchmark("short").rows
    assert rows[-1].value == 3.0 and rows[-1].samples == 6
    window = {"start": NOW - timedelta(days=1), "end": NOW + timedelta(hours=2)}
    compared = procedural.compare(
        MetricWindow(metric_id="task_success_rate", **window),
        MetricWindow(metric_id="short", **window),
    )
    assert (compared.a.value, compared.b.value, compared.difference) == (1.0, 3.0, 2.0)
    assert procedural.set_metric_active("short", False).active is False
    procedural.delete_metric("short")

    skill = procedural.add_skill(
        name="rename-node",
        when_to_use="When a node must be renamed.",
        steps=["create_node", "update_node"],
        inputs=[{"name": "node", "description": "the node"}],
    )
    assert [s.id for s in procedural.skills(query="rename the node").skills] == [skill.id]
    changed = procedural.update_skill(
        skill.id, name="rename-node", when_to_use="Renaming.", steps=["update_node"]
    )
    assert procedural.skill(skill.id).steps == changed.steps == ["update_node"]
    [candidate] = procedural.skills(status="candidate").skills  # proposed from "rename a node"
    assert procedural.discard_skill(candidate.id).status == "discarded"
    assert len(procedural.skills(status="all").skills) == 2
    procedural.delete_skill(skill.id)
    assert procedural.disable().enabled is False


def test_the_blocking_client(serve_app):
    with Client(serve_app) as client:
        procedural = client.get_profile(f"t-procedural-sync-{uuid.uuid4().hex[:8]}").procedural
        exercise(procedural)
        with pytest.raises(RaymemHTTPError) as refused:
            procedural.define_metric(id="m", aggregation="rate", success_condition="outcome ==")
        assert (refused.value.status, refused.value.code) == (400, "invalid_condition")
        with pytest.raises(RaymemHTTPError) as missing:
            procedural.pattern("no-such-pattern")
        assert missing.value.status == 404


def test_in_cluster_get_profile(serve_app, server_settings):
    profile = raymem.get_profile(f"t-procedural-local-{uuid.uuid4().hex[:8]}")
    exercise(profile.procedural)
    with pytest.raises(InvalidCondition, match="the end"):
        profile.procedural.define_metric(id="m", aggregation="rate", success_condition="outcome ==")
    with pytest.raises(msgspec.ValidationError, match="outcome"):
        profile.procedural.record(
            session_id="s",
            action_type="a",
            target_type="t",
            outcome="meh",  # type: ignore[arg-type]
        )


def test_the_async_client(serve_app):
    async def run() -> None:
        async with AsyncClient(serve_app) as client:
            profile = client.get_profile(f"t-procedural-async-{uuid.uuid4().hex[:8]}")
            procedural = profile.procedural
            assert (await procedural.enable()).enabled is True
            actions = [a for n in range(5) for a in steps(f"s{n}", n, True)]
            assert (await procedural.capture(actions)).stored == 15
            result = await procedural.evaluate(now=NOW + timedelta(hours=1))
            assert (result.sequences_closed, result.patterns.promoted) == (5, 1)
            block = await procedural.inject(action_type="update_node", target_type="node")
            assert "run create_node first" in block.text
            assert len((await procedural.actions(limit=5)).actions) == 5
            assert len((await procedural.patterns()).patterns) == 1
            assert (await procedural.benchmark("task_success_rate")).rows[-1].value == 1.0
            skill = await procedural.add_skill(name="s", when_to_use="w", steps=["x"])
            assert (await procedural.skill(skill.id)).name == "s"
            with pytest.raises(RaymemHTTPError) as refused:
                await procedural.sequence("no-such")
            assert refused.value.code == "sequence_not_found"

    asyncio.run(run())


def test_the_surfaces_are_the_same():
    sync, aio, local = (
        public_methods(ProceduralClient),
        public_methods(AsyncProceduralClient),
        public_methods(LocalProcedural),
    )
    assert sync.keys() == aio.keys() == local.keys()
    for name, method in sync.items():
        expected = list(inspect.signature(method).parameters.values())
        assert list(inspect.signature(aio[name]).parameters.values()) == expected, name
        assert list(inspect.signature(local[name]).parameters.values()) == expected, name
        assert inspect.iscoroutinefunction(aio[name]), name
