"""Pass 3: metrics over sequences, their baselines and benchmark rows; custom metric control.

A metric measures the sequences that ended in its window (the last ``window_days``
up to the evaluation time) and pass its event filter (an action of one of the
action types and one of the target types; an empty list allows any):

- ``rate``: the share of them that meet the success condition;
- ``average`` / ``p95``: the mean or 95th percentile (nearest rank) of ``value``
  (action count or total duration) over those that meet it.

Its baseline is the same measure over the first 50 sequences it ever measured
(kept once there are 50), and every row carries ``delta_vs_baseline`` = value -
baseline. Built-ins, which can be deactivated but not deleted:

- ``task_success_rate``: the share of sequences of the last 7 days that succeeded;
- ``efficiency_delta``: actions per sequence over the last 7 days (its delta is the
  change from the first 50 sequences: negative is fewer actions);
- ``pattern_utilisation``: of the sequences of the last 7 days in which the agent
  was shown a pattern, the share that avoided every warned failure.
"""

import asyncio
import math
from collections.abc import Sequence
from datetime import datetime, timedelta

import msgspec

from raymem.errors import Conflict, MetricNotFound
from raymem.pipelines.procedural.condition import parse
from raymem.store import ProfileStore, StoreWriter
from raymem.store.procedural import metrics as stored
from raymem.store.procedural.actions import first_sequences, sequences_ended_between
from raymem.types_procedural import (
    ActionSequence,
    CompareRequest,
    Measured,
    Metric,
    MetricBenchmark,
    MetricComparison,
    MetricIn,
    MetricValueAt,
    MetricWindow,
)

BASELINE_SEQUENCES = 50
P95 = 0.95
UTILISATION = "pattern_utilisation"


BUILTIN_WINDOW_DAYS = 7.0
BUILTINS = (
    MetricIn(
        id="task_success_rate",
        description="Share of sequences that succeeded (7-day rolling)",
        aggregation="rate",
        success_condition="outcome == 'success'",
        window_days=BUILTIN_WINDOW_DAYS,
    ),
    MetricIn(
        id="efficiency_delta",
        description="Actions per sequence (7-day rolling); its delta compares with the first 50",
        aggregation="average",
        window_days=BUILTIN_WINDOW_DAYS,
    ),
    MetricIn(
        id=UTILISATION,
        description="Share of sequences shown a pattern that avoided every warned failure"
        " (7-day rolling)",
        aggregation="rate",
        window_days=BUILTIN_WINDOW_DAYS,
    ),
)
BUILTIN_IDS = frozenset(metric.id for metric in BUILTINS)


def _metric(request: MetricIn, *, builtin: bool, now: datetime) -> Metric:
    return Metric(
        id=request.id,
        builtin=builtin,
        active=request.active,
        description=request.description,
        action_types=list(request.event_filter.action_types),
        target_types=list(request.event_filter.target_types),
        success_condition=request.success_condition.strip(),
        aggregation=request.aggregation,
        value=request.value,
        window_days=request.window_days,
        baseline=None,
        baseline_samples=0,
        created_at=now,
        updated_at=now,
    )


async def ensure_builtins(writer: StoreWriter, now: datetime) -> None:
    """Define the built-in metrics a profile does not hold yet."""
    missing = [
        _metric(request, builtin=True, now=now)
        for request in BUILTINS
        if await stored.get_metric(writer.conn, request.id) is None
    ]
    await stored.write_metrics(writer, missing)


# ----------------------------------------------------------------- measuring


def _measured_sequences(
    metric: Metric, sequences: Sequence[ActionSequence]
) -> list[ActionSequence]:
    """The sequences a metric measures: its event filter, and for utilisation, the warned."""
    chosen = []
    for sequence in sequences:
        if metric.builtin and metric.id == UTILISATION and not sequence.warned:
            continue
        steps = sequence.steps
        if metric.action_types and not any(s.action_type in metric.action_types for s in steps):
            continue
        if metric.target_types and not any(s.target_type in metric.target_types for s in steps):
            continue
        chosen.append(sequence)
    return chosen


def measure(metric: Metric, sequences: Sequence[ActionSequence]) -> tuple[float | None, int]:
    """The metric over these sequences (already in its window): (value, samples)."""
    measured = _measured_sequences(metric, sequences)
    if metric.builtin and metric.id == UTILISATION:
        meets = [bool(sequence.avoided) for sequence in measured]
    else:
        condition = parse(metric.success_condition)
        meets = [condition.holds(sequence) for sequence in measured]
    if metric.aggregation == "rate":
        return (sum(meets) / len(measured) if measured else None), len(measured)
    values = sorted(
        float(getattr(sequence, metric.value))
        for sequence, met in zip(measured, meets, strict=True)
        if met
    )
    if not values:
        return None, 0
    if metric.aggregation == "average":
        return sum(values) / len(values), len(values)
    return values[math.ceil(P95 * len(values)) - 1], len(values)


async def _baseline(store: ProfileStore, metric: Metric) -> Metric:
    """The metric with its baseline measured again, unless it was kept already."""
    if metric.baseline_samples >= BASELINE_SEQUENCES:
        return metric
    first = await _first_measured(store, metric)
    value, _ = measure(metric, first)
    return msgspec.structs.replace(metric, baseline=value, baseline_samples=len(first))


async def _first_measured(store: ProfileStore, metric: Metric) -> list[ActionSequence]:
    """The first sequences (up to the baseline's 50) the metric measures."""
    batch = BASELINE_SEQUENCES
    while True:
        sequences = await first_sequences(store.reader, batch)
        chosen = _measured_sequences(metric, sequences)
        if len(chosen) >= BASELINE_SEQUENCES or len(sequences) < batch:
            return chosen[:BASELINE_SEQUENCES]
        batch *= 4


def _row(metric: Metric, now: datetime, value: float | None, samples: int) -> MetricValueAt:
    delta = None if value is None or metric.baseline is None else value - metric.baseline
    return MetricValueAt(
        metric_id=metric.id,
        at=now,
        value=value,
        samples=samples,
        baseline=metric.baseline,
        delta_vs_baseline=delta,
    )


async def _value_now(
    store: ProfileStore, metric: Metric, now: datetime, sequences: Sequence[ActionSequence]
) -> tuple[Metric, MetricValueAt]:
    """A metric (baseline brought up to date) and its value at ``now`` over ``sequences``."""
    metric = await _baseline(store, metric)
    start = now - timedelta(days=metric.window_days)
    in_window = [s for s in sequences if s.ended_at > start]
    value, samples = await asyncio.to_thread(measure, metric, in_window)
    return metric, _row(metric, now, value, samples)


async def evaluate_metrics(store: ProfileStore, now: datetime) -> list[MetricValueAt]:
    """Write a benchmark row at ``now`` for every active metric."""
    async with store.write() as writer:
        await ensure_builtins(writer, now)
    metrics = [m for m in await stored.list_metrics(store.reader) if m.active]
    if not metrics:
        return []
    longest = max(metric.window_days for metric in metrics)
    sequences = await sequences_ended_between(store.reader, now - timedelta(days=longest), now)
    updated, rows = [], []
    for metric in metrics:
        measured, row = await _value_now(store, metric, now, sequences)
        rows.append(row)
        if measured != metric:
            updated.append(msgspec.structs.replace(measured, updated_at=now))
    async with store.write() as writer:
        await stored.write_metrics(writer, updated)
        await stored.insert_benchmarks(writer, rows)
    return rows


async def last_evaluated(store: ProfileStore) -> datetime | None:
    """When the metric pass last wrote benchmark rows."""
    return await stored.latest_benchmark_time(store.reader)


# ----------------------------------------------------------------- control


async def preview(store: ProfileStore, request: MetricIn, now: datetime) -> MetricValueAt:
    """What a metric would measure at ``now`` over the stored sequences, without saving it.

    Raises:
        InvalidCondition: the success condition is not in the grammar.
    """
    parse(request.success_condition)
    metric = _metric(request, builtin=False, now=now)
    sequences = await sequences_ended_between(
        store.reader, now - timedelta(days=metric.window_days), now
    )
    _, row = await _value_now(store, metric, now, sequences)
    return row


async def define(store: ProfileStore, request: MetricIn, now: datetime) -> Metric:
    """Save a custom metric.

    Raises:
        InvalidCondition: the success condition is not in the grammar.
        Conflict: a metric with this id exists (built-in ids included).
    """
    parse(request.success_condition)
    metric = _metric(request, builtin=False, now=now)
    async with store.write() as writer:
        if request.id in BUILTIN_IDS or await stored.get_metric(writer.conn, request.id):
            raise Conflict(f"Metric {request.id!r} exists already")
        await stored.write_metrics(writer, [metric])
    return metric


async def set_active(store: ProfileStore, metric_id: str, active: bool, now: datetime) -> Metric:
    """Activate or deactivate a metric (the only change a built-in allows).

    Raises:
        MetricNotFound: no metric has this id.
    """
    async with store.write() as writer:
        if metric_id in BUILTIN_IDS:
            await ensure_builtins(writer, now)
        metric = await stored.get_metric(writer.conn, metric_id)
        if metric is None:
            raise MetricNotFound(metric_id)
        if metric.active != active:
            metric = msgspec.structs.replace(metric, active=active, updated_at=now)
            await stored.write_metrics(writer, [metric])
    return metric


async def delete(store: ProfileStore, metric_id: str) -> None:
    """Delete a custom metric and its benchmark rows.

    Raises:
        Conflict: it is a built-in (deactivate it instead).
        MetricNotFound: no metric has this id.
    """
    if metric_id in BUILTIN_IDS:
        raise Conflict(f"Metric {metric_id!r} is built in: deactivate it instead of deleting it")
    async with store.write() as writer:
        if not await stored.delete_metric(writer, metric_id):
            raise MetricNotFound(metric_id)


async def list_metrics(store: ProfileStore, now: datetime) -> list[Metric]:
    """Every metric, the built-ins first (defined on first use)."""
    metrics = await stored.list_metrics(store.reader)
    if BUILTIN_IDS - {metric.id for metric in metrics}:
        async with store.write() as writer:
            await ensure_builtins(writer, now)
        metrics = await stored.list_metrics(store.reader)
    return metrics


async def benchmark(store: ProfileStore, metric_id: str, *, limit: int = 1000) -> MetricBenchmark:
    """A metric and its benchmark rows over time, oldest first.

    Raises:
        MetricNotFound: no metric has this id.
    """
    metric = await stored.get_metric(store.reader, metric_id)
    if metric is None:
        raise MetricNotFound(metric_id)
    return MetricBenchmark(
        metric=metric, rows=await stored.benchmarks(store.reader, metric_id, limit=limit)
    )


async def _measure_window(store: ProfileStore, window: MetricWindow) -> Measured:
    metric = await stored.get_metric(store.reader, window.metric_id)
    if metric is None:
        raise MetricNotFound(window.metric_id)
    sequences = await sequences_ended_between(store.reader, window.start, window.end)
    value, samples = measure(metric, sequences)
    return Measured(
        metric_id=metric.id, start=window.start, end=window.end, value=value, samples=samples
    )


async def compare(store: ProfileStore, request: CompareRequest) -> MetricComparison:
    """Two metrics over one window, or one metric over two windows; ``difference`` is b - a.

    Raises:
        MetricNotFound: a metric does not exist.
    """
    a = await _measure_window(store, request.a)
    b = await _measure_window(store, request.b)
    difference = None if a.value is None or b.value is None else b.value - a.value
    return MetricComparison(a=a, b=b, difference=difference)
