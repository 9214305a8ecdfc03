"""Pass 3 on real SQLite files: the condition grammar, built-in and custom metrics, baselines."""

from datetime import timedelta
from pathlib import Path

import pytest
from procedural_helpers import CREATE, FAIL, UPDATE, at, enabled_store, run_session

from raymem.errors import Conflict, MetricNotFound
from raymem.pipelines.procedural import condition, metrics
from raymem.store import ProfileStore
from raymem.types_procedural import (
    ActionSequence,
    CompareRequest,
    EventFilter,
    MetricIn,
    MetricWindow,
)

DIM = 8


@pytest.fixture
async def store(tmp_path: Path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=DIM)
    await enabled_store(store)
    yield store
    await store.close()


def sequence(outcome: str, action_count: int) -> ActionSequence:
    return ActionSequence(
        id="x",
        session_id="s",
        agent_id=None,
        started_at=at(0),
        ended_at=at(0),
        closed_at=at(0),
        closed_by="quiet",
        outcome=outcome,  # type: ignore[arg-type]
        action_count=action_count,
        failure_count=0,
        duration_ms=0.0,
        intent="",
        summarised_by="rules",
        steps=[],
        warned=[],
        avoided=None,
    )


# ------------------------------------------------------------------ grammar


@pytest.mark.parametrize(
    ("text", "holds"),
    [
        ("outcome == 'success'", [True, False, False]),
        ('outcome != "success"', [False, True, True]),
        ("outcome == 'failure'", [False, True, False]),
        ("action_count < 3", [True, False, True]),
        ("action_count >= 3", [False, True, False]),
        ("action_count == 2 or outcome == 'failure'", [True, True, False]),
        ("outcome == 'dead_end' and action_count <= 1", [False, False, True]),
        # and binds tighter than or
        (
            "outcome == 'failure' or outcome == 'dead_end' and action_count > 5",
            [False, True, False],
        ),
        ("  ", [True, True, True]),
    ],
)
def test_conditions_hold_as_written(text: str, holds: list[bool]) -> None:
    parsed = condition.parse(text)
    cases = [sequence("success", 2), sequence("failure", 4), sequence("dead_end", 1)]
    assert [parsed.holds(case) for case in cases] == holds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("__import__('os')", "unexpected '(' at character 11"),
        ("outcome = 'success'", "unexpected '=' at character 9"),
        ("outcome == success", "outcome compares with a quoted outcome, found 'success'"),
        (
            "outcome == 'won'",
            "'won' is not an outcome (success, failure or dead_end) at character 12",
        ),
        ("outcome < 'success'", "outcome compares with == or != only, not '<' (character 9)"),
        ("action_count < 2.5", "unexpected '.' at character 17"),
        ("action_count < 'x'", "action_count compares with a whole number, found \"'x'\""),
        ("duration > 3", "expected outcome or action_count, found 'duration' at character 1"),
        ("outcome == 'success' and", "a comparison is missing at the end"),
        (
            "outcome == 'success' xor action_count < 2",
            "expected 'and', 'or' or the end, found 'xor' at character 22",
        ),
        ("(outcome == 'success')", "unexpected '(' at character 1"),
        ("action_count", "expected a comparison after 'action_count', found the end"),
        ("outcome == 'success", "unterminated string at character 12"),
    ],
)
def test_anything_else_is_refused_naming_the_token(text: str, message: str) -> None:
    with pytest.raises(condition.InvalidCondition) as caught:
        condition.parse(text)
    assert str(caught.value) == f"Invalid success_condition: {message}"
    assert caught.value.status == 400 and caught.value.code == "invalid_condition"


# ------------------------------------------------------------------ metrics


async def test_built_ins_exist_once_enabled_and_cannot_be_deleted(store: ProfileStore) -> None:
    listed = await metrics.list_metrics(store, at(0))
    assert [m.id for m in listed] == [
        "task_success_rate",
        "efficiency_delta",
        "pattern_utilisation",
    ]
    assert all(m.builtin and m.active and m.window_days == 7.0 for m in listed)
    with pytest.raises(Conflict, match="built in: deactivate it"):
        await metrics.delete(store, "task_success_rate")
    off = await metrics.set_active(store, "task_success_rate", False, at(1))
    assert off.active is False
    rows = await metrics.evaluate_metrics(store, at(2))
    assert [row.metric_id for row in rows] == ["efficiency_delta", "pattern_utilisation"]
    with pytest.raises(MetricNotFound):
        await metrics.set_active(store, "nope", False, at(3))


async def test_success_rate_and_efficiency_over_seven_days_with_a_baseline(
    store: ProfileStore,
) -> None:
    # Day 0: 4 sequences, 1 succeeds, 3 actions each; day 10: 4 sequences, 3 succeed, 2 actions.
    for index in range(4):
        steps = [FAIL, FAIL, UPDATE] if index == 0 else [FAIL, FAIL, FAIL]
        await run_session(store, f"early{index}", steps, start=at(index))
    first = {row.metric_id: row for row in await metrics.evaluate_metrics(store, at(30))}
    assert (first["task_success_rate"].value, first["task_success_rate"].samples) == (0.25, 4)
    assert first["task_success_rate"].baseline == 0.25
    assert first["task_success_rate"].delta_vs_baseline == 0.0
    assert first["efficiency_delta"].value == 3.0

    for index in range(4):
        steps = [CREATE, UPDATE] if index < 3 else [FAIL, FAIL]
        await run_session(store, f"late{index}", steps, start=at(index, days=10))
    later = {row.metric_id: row for row in await metrics.evaluate_metrics(store, at(30, days=10))}
    rate = later["task_success_rate"]
    assert (rate.value, rate.samples) == (0.75, 4)  # day 0 is out of the 7-day window
    assert rate.baseline == pytest.approx(0.5)  # the first (up to 50) sequences: 4 of 8
    assert rate.delta_vs_baseline == pytest.approx(0.25)
    efficiency = later["efficiency_delta"]
    assert efficiency.value == 2.0 and efficiency.baseline == 2.5
    assert efficiency.delta_vs_baseline == pytest.approx(-0.5)  # fewer actions per sequence
    assert later["pattern_utilisation"].value is None  # nobody was warned

    history = await metrics.benchmark(store, "task_success_rate")
    assert [(row.at, row.value) for row in history.rows] == [
        (at(30), 0.25),
        (at(30, days=10), 0.75),
    ]
    assert await metrics.last_evaluated(store) == at(30, days=10)


async def test_the_baseline_is_kept_once_fifty_sequences_were_measured(store: ProfileStore) -> None:
    for index in range(metrics.BASELINE_SEQUENCES):
        await run_session(store, f"s{index}", [FAIL], start=at(index))
    await metrics.evaluate_metrics(store, at(0, days=1))
    for index in range(10):
        await run_session(store, f"t{index}", [UPDATE], start=at(index, days=2))
    rows = {row.metric_id: row for row in await metrics.evaluate_metrics(store, at(0, days=3))}
    assert rows["task_success_rate"].baseline == 0.0  # the first 50 all failed
    assert rows["task_success_rate"].value == pytest.approx(10 / 60)


async def test_custom_metrics_filter_aggregate_preview_and_compare(store: ProfileStore) -> None:
    await run_session(store, "a", [FAIL, CREATE, UPDATE], start=at(0))  # 3 actions, success
    await run_session(store, "b", [CREATE, UPDATE], start=at(1))  # 2, success
    await run_session(store, "c", [FAIL], start=at(2))  # 1, failure
    await run_session(store, "d", [("search", "success", None)], start=at(3))
    short = MetricIn(
        id="short-successes",
        aggregation="rate",
        success_condition="outcome == 'success' and action_count < 3",
        event_filter=EventFilter(action_types=["update_node"]),
    )
    preview = await metrics.preview(store, short, at(10))
    assert (preview.value, preview.samples) == (pytest.approx(1 / 3), 3)  # search is filtered out
    assert await metrics.benchmark(store, "task_success_rate")  # nothing saved by a preview
    with pytest.raises(MetricNotFound):
        await metrics.benchmark(store, "short-successes")

    saved = await metrics.define(store, short, at(10))
    assert (saved.builtin, saved.success_condition) == (
        False,
        "outcome == 'success' and action_count < 3",
    )
    with pytest.raises(Conflict, match="exists already"):
        await metrics.define(store, short, at(11))
    with pytest.raises(Conflict):
        await metrics.define(store, MetricIn(id="task_success_rate", aggregation="rate"), at(11))
    with pytest.raises(condition.InvalidCondition):
        await metrics.define(
            store, MetricIn(id="bad", aggregation="rate", success_condition="1 == 1"), at(11)
        )

    p95 = MetricIn(id="p95-actions", aggregation="p95", success_condition="outcome == 'success'")
    average = MetricIn(id="avg-actions", aggregation="average")
    assert (await metrics.preview(store, p95, at(10))).value == 3.0
    assert (await metrics.preview(store, average, at(10))).value == pytest.approx(7 / 4)

    await metrics.define(store, average, at(10))
    both = CompareRequest(
        a=MetricWindow(metric_id="avg-actions", start=at(-1), end=at(0) + timedelta(seconds=30)),
        b=MetricWindow(metric_id="avg-actions", start=at(0) + timedelta(seconds=30), end=at(10)),
    )
    compared = await metrics.compare(store, both)
    assert (compared.a.value, compared.a.samples) == (3.0, 1)
    assert (compared.b.value, compared.b.samples) == (pytest.approx(4 / 3), 3)
    assert compared.difference == pytest.approx(4 / 3 - 3.0)
    two_metrics = CompareRequest(
        a=MetricWindow(metric_id="task_success_rate", start=at(-1), end=at(10)),
        b=MetricWindow(metric_id="short-successes", start=at(-1), end=at(10)),
    )
    compared = await metrics.compare(store, two_metrics)
    assert (compared.a.value, compared.b.value) == (0.75, pytest.approx(1 / 3))

    await metrics.delete(store, "short-successes")
    with pytest.raises(MetricNotFound):
        await metrics.delete(store, "short-successes")


async def test_metrics_due_after_the_interval(store: ProfileStore) -> None:
    from raymem.pipelines.procedural import metrics_due

    assert await metrics_due(store, at(0), 3600) is True
    await metrics.evaluate_metrics(store, at(0))
    assert await metrics_due(store, at(59), 3600) is False
    assert await metrics_due(store, at(60), 3600) is True
