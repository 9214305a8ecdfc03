"""A prior from what a memory is, applied after fusion: importance, confidence, recency and use.

Fusion ranks by how well candidates match the query; the prior then scales a
memory's score by ``1 + sum(weight * (signal - 0.5))`` over four signals in [0, 1]:

- importance and confidence, as extraction or the caller gave them;
- recency: 1 when it was said (or last recalled) at recall's "now", halving
  every ``prior_half_life_days`` before that;
- use: how often recall returned it, on a log scale that reaches 1 at
  ``prior_use_saturation`` recalls (``raymem.store.memory_use``).

Raw turns are left as fused. Each weight is a setting of ``RecallSettings``; with
all four at 0 (the default, see ``benchmarks/dream.py``) nothing is read or changed.
"""

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from raymem.config import RecallSettings
from raymem.store.memory_use import Use, use_of_sync
from raymem.types import Memory

PRIOR_PART = "prior"  # the name of the prior's share in a candidate's score parts
_SECONDS_PER_DAY = 86_400


class Ranked(Protocol):
    """A fused candidate: a memory (or a raw turn), its score parts, and when it was said."""

    memory: Memory | None
    parts: dict[str, float]

    @property
    def score(self) -> float: ...

    @property
    def when(self) -> datetime: ...


def weights(settings: RecallSettings) -> dict[str, float]:
    return {
        "importance": settings.prior_importance_weight,
        "confidence": settings.prior_confidence_weight,
        "recency": settings.prior_recency_weight,
        "use": settings.prior_use_weight,
    }


def signals(
    memory: Memory, said_at: datetime, use: Use | None, now: datetime, settings: RecallSettings
) -> dict[str, float]:
    """A memory's four signals, each in [0, 1]."""
    last = said_at
    recalls = 0
    if use is not None:
        last = max(last, datetime.fromisoformat(use.last_recalled_at))
        recalls = use.recalled_count
    age_days = max(0.0, (now - last).total_seconds() / _SECONDS_PER_DAY)
    saturation = math.log1p(max(1, settings.prior_use_saturation))
    return {
        "importance": memory.importance,
        "confidence": memory.confidence,
        "recency": 0.5 ** (age_days / settings.prior_half_life_days),
        "use": min(1.0, math.log1p(recalls) / saturation),
    }


def factor(signal: dict[str, float], weight: dict[str, float]) -> float:
    """What the prior multiplies a score by (never below 0)."""
    return max(0.0, 1.0 + sum(weight[name] * (signal[name] - 0.5) for name in weight))


def apply_prior(
    items: Sequence[Ranked], settings: RecallSettings, now: datetime, quick: Any
) -> None:
    """Scale each memory's score by its prior, as a ``prior`` part of its score.

    Args:
        items: fused candidates.
        settings: recall settings, with the prior's weights.
        now: recall's "now", for recency.
        quick: the profile's blocking read connection, for memory use.
    """
    weight = weights(settings)
    memories = [(item, item.memory) for item in items if item.memory is not None]
    if not memories or not any(weight.values()):
        return
    use = use_of_sync(quick, [memory.id for _, memory in memories]) if weight["use"] else {}
    for item, memory in memories:
        signal = signals(memory, item.when, use.get(memory.id), now, settings)
        item.parts[PRIOR_PART] = item.score * (factor(signal, weight) - 1.0)
