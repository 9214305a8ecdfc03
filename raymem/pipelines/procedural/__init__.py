"""Procedural memory: agents learn from what they did. Pure async functions over a store.

- ``capture``: action capture (one write, no model call) and the enabled flag;
- ``sequences`` (pass 1): a session's actions become a sequence once quiet or ended;
- ``patterns`` (pass 2): what tends to go wrong, its lifecycle, operator control;
- ``inject``: the "past experience" block for a pending action;
- ``condition`` and ``metrics`` (pass 3): built-in and custom metrics, baselines, benchmarks;
- ``skills``: named procedures, their search, and proposals from repeated success;
- ``search``: sequences and skills by text and vector.

Every pass takes ``now`` (the clock is injected), so tests and replays control time.
"""

import time
from collections.abc import Awaitable, Callable
from datetime import datetime

import numpy as np

from raymem.config import ProceduralSettings
from raymem.pipelines.procedural import metrics, patterns, sequences, skills
from raymem.pipelines.procedural.sequences import IntentSummariser
from raymem.store import ProfileStore
from raymem.store.procedural.skills import EMBEDDED, pending_vectors, set_vectors
from raymem.types_procedural import EvaluateResult

EmbedFn = Callable[[list[str]], Awaitable[np.ndarray]]

__all__ = ["IntentSummariser", "evaluate", "metrics_due", "vectorise"]


async def evaluate(
    store: ProfileStore,
    now: datetime,
    settings: ProceduralSettings,
    *,
    with_metrics: bool = True,
    summariser: IntentSummariser | None = None,
) -> EvaluateResult:
    """Run the passes at ``now``: sequences, patterns, and (``with_metrics``) metrics and skills."""
    latency: dict[str, float] = {}
    start = time.perf_counter()
    closed = await sequences.close_quiet(
        store, now, quiet_after_s=settings.quiet_after_s, summariser=summariser
    )
    latency["sequences"] = 1000 * (time.perf_counter() - start)
    mark = time.perf_counter()
    changes = await patterns.evaluate_patterns(store, now, window_days=settings.pattern_window_days)
    latency["patterns"] = 1000 * (time.perf_counter() - mark)
    rows, proposed = [], []
    if with_metrics:
        mark = time.perf_counter()
        rows = await metrics.evaluate_metrics(store, now)
        latency["metrics"] = 1000 * (time.perf_counter() - mark)
        mark = time.perf_counter()
        proposed = await skills.propose(store, now)
        latency["skills"] = 1000 * (time.perf_counter() - mark)
    latency["total"] = 1000 * (time.perf_counter() - start)
    return EvaluateResult(
        now=now,
        sequences_closed=len(closed),
        patterns=changes,
        benchmarks=len(rows),
        skills_proposed=len(proposed),
        latency_ms=latency,
    )


async def metrics_due(store: ProfileStore, now: datetime, interval_s: float) -> bool:
    """Whether the metric pass last ran ``interval_s`` or longer before ``now`` (or never)."""
    last = await metrics.last_evaluated(store)
    return last is None or (now - last).total_seconds() >= interval_s


async def vectorise(store: ProfileStore, embed: EmbedFn, *, batch: int) -> int:
    """Embed sequences' summaries and skills still without a vector; returns how many."""
    done = 0
    for table in EMBEDDED:
        while pending := await pending_vectors(store.reader, table, limit=batch):
            vectors = await embed([text for _, text in pending])
            async with store.write() as writer:
                await set_vectors(
                    writer,
                    table,
                    [(seq, text, vectors[i]) for i, (seq, text) in enumerate(pending)],
                )
            done += len(pending)
    return done
