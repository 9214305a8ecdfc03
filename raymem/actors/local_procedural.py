"""Procedural memory for in-cluster code: ``LocalProfile.procedural``, calling the actor directly.

The blocking counterpart of ``raymem.client_procedural.ProceduralClient``, with the
same methods and parameters.
"""

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar

import msgspec

from raymem.actors.calls import ProfileCalls, run_blocking
from raymem.types_procedural import (
    ActionIn,
    ActionPage,
    ActionSequence,
    Aggregation,
    AnnotateRequest,
    CaptureRequest,
    CaptureResult,
    CompareRequest,
    EvaluateResult,
    EventFilter,
    Injection,
    InjectRequest,
    Metric,
    MetricBenchmark,
    MetricComparison,
    MetricIn,
    MetricList,
    MetricValue,
    MetricValueAt,
    MetricWindow,
    Outcome,
    Pattern,
    PatternList,
    PatternWithHistory,
    ProceduralState,
    SequencePage,
    Skill,
    SkillIn,
    SkillInput,
    SkillList,
    SkillStatus,
)

T = TypeVar("T")
ActionLike = Mapping[str, Any] | ActionIn
InputLike = Mapping[str, Any] | SkillInput


def _validated(kind: type[T], value: Mapping[str, Any]) -> T:
    """``value`` as ``kind``, checked as the HTTP API checks a body.

    Raises:
        msgspec.ValidationError: a field is missing, of the wrong type or out of range.
    """
    return msgspec.convert(value, kind)


def _metric(
    id: str,
    aggregation: Aggregation,
    success_condition: str,
    action_types: Sequence[str],
    target_types: Sequence[str],
    value: MetricValue,
    window_days: float,
    description: str,
    active: bool,
) -> MetricIn:
    return _validated(
        MetricIn,
        {
            "id": id,
            "aggregation": aggregation,
            "success_condition": success_condition,
            "event_filter": msgspec.to_builtins(
                EventFilter(action_types=list(action_types), target_types=list(target_types))
            ),
            "value": value,
            "window_days": window_days,
            "description": description,
            "active": active,
        },
    )


def _skill(
    name: str, when_to_use: str, steps: Sequence[str], inputs: Iterable[InputLike]
) -> SkillIn:
    items = [msgspec.to_builtins(i) if isinstance(i, SkillInput) else dict(i) for i in inputs]
    body = {"name": name, "when_to_use": when_to_use, "steps": list(steps), "inputs": items}
    return _validated(SkillIn, body)


class LocalProcedural:
    """A profile's procedural memory, reached through its actor (``LocalProfile.procedural``)."""

    def __init__(self, calls: ProfileCalls) -> None:
        self._calls = calls

    def state(self) -> ProceduralState:
        return run_blocking(self._calls.procedural_state())

    def enable(self) -> ProceduralState:
        return run_blocking(self._calls.set_procedural(True))

    def disable(self) -> ProceduralState:
        return run_blocking(self._calls.set_procedural(False))

    def capture(self, actions: Iterable[ActionLike]) -> CaptureResult:
        items = [msgspec.to_builtins(a) if isinstance(a, ActionIn) else dict(a) for a in actions]
        request = _validated(CaptureRequest, {"actions": items})
        return run_blocking(self._calls.capture_actions(request))

    def record(
        self,
        *,
        session_id: str,
        action_type: str,
        target_type: str,
        outcome: Outcome,
        target_ids: Sequence[str] = (),
        error_code: str | None = None,
        duration_ms: float | None = None,
        intent: str = "",
        at: datetime | None = None,
        id: str | None = None,
        agent_id: str | None = None,
    ) -> CaptureResult:
        action = {
            "session_id": session_id,
            "action_type": action_type,
            "target_type": target_type,
            "outcome": outcome,
            "target_ids": list(target_ids),
            "error_code": error_code,
            "duration_ms": duration_ms,
            "intent": intent,
            "at": at,
            "id": id,
            "agent_id": agent_id,
        }
        return self.capture([action])

    def actions(
        self,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        action_type: str | None = None,
        outcome: Outcome | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> ActionPage:
        return run_blocking(
            self._calls.list_actions(
                session_id=session_id,
                agent_id=agent_id,
                action_type=action_type,
                outcome=outcome,
                since=since,
                until=until,
                limit=limit,
                cursor=cursor,
            )
        )

    def sequences(
        self,
        *,
        query: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        outcome: Outcome | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> SequencePage:
        if query is not None:
            return run_blocking(self._calls.search_sequences(query, limit=limit))
        return run_blocking(
            self._calls.list_sequences(
                session_id=session_id,
                agent_id=agent_id,
                outcome=outcome,
                since=since,
                until=until,
                limit=limit,
                cursor=cursor,
            )
        )

    def sequence(self, sequence_id: str) -> ActionSequence:
        return run_blocking(self._calls.get_sequence(sequence_id))

    def evaluate(self, *, now: datetime | None = None) -> EvaluateResult:
        return run_blocking(self._calls.evaluate_procedural(now))

    def patterns(
        self,
        *,
        action_type: str | None = None,
        target_type: str | None = None,
        outcome: Outcome | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        include_inactive: bool = False,
        limit: int = 100,
    ) -> PatternList:
        return run_blocking(
            self._calls.list_patterns(
                action_type=action_type,
                target_type=target_type,
                outcome=outcome,
                since=since,
                until=until,
                include_inactive=include_inactive,
                limit=limit,
            )
        )

    def pattern(self, pattern_id: str) -> PatternWithHistory:
        return run_blocking(self._calls.get_pattern(pattern_id))

    def annotate(self, pattern_id: str, annotation: str | None) -> Pattern:
        request = AnnotateRequest(annotation=annotation)
        return run_blocking(self._calls.annotate_pattern(pattern_id, request))

    def suppress(self, pattern_id: str, suppressed: bool = True) -> Pattern:
        request = AnnotateRequest(suppressed=suppressed)
        return run_blocking(self._calls.annotate_pattern(pattern_id, request))

    def inject(
        self,
        *,
        action_type: str,
        target_type: str,
        target_ids: Sequence[str] = (),
        session_id: str | None = None,
        agent_id: str | None = None,
    ) -> Injection:
        request = _validated(
            InjectRequest,
            {
                "action_type": action_type,
                "target_type": target_type,
                "target_ids": list(target_ids),
                "session_id": session_id,
                "agent_id": agent_id,
            },
        )
        return run_blocking(self._calls.inject(request))

    def metrics(self) -> MetricList:
        return run_blocking(self._calls.list_metrics())

    def define_metric(
        self,
        *,
        id: str,
        aggregation: Aggregation,
        success_condition: str = "",
        action_types: Sequence[str] = (),
        target_types: Sequence[str] = (),
        value: MetricValue = "action_count",
        window_days: float = 7.0,
        description: str = "",
        active: bool = True,
    ) -> Metric:
        request = _metric(
            id,
            aggregation,
            success_condition,
            action_types,
            target_types,
            value,
            window_days,
            description,
            active,
        )
        return run_blocking(self._calls.define_metric(request))

    def preview_metric(
        self,
        *,
        id: str,
        aggregation: Aggregation,
        success_condition: str = "",
        action_types: Sequence[str] = (),
        target_types: Sequence[str] = (),
        value: MetricValue = "action_count",
        window_days: float = 7.0,
        now: datetime | None = None,
    ) -> MetricValueAt:
        request = _metric(
            id,
            aggregation,
            success_condition,
            action_types,
            target_types,
            value,
            window_days,
            "",
            True,
        )
        return run_blocking(self._calls.preview_metric(request, now=now))

    def set_metric_active(self, metric_id: str, active: bool) -> Metric:
        return run_blocking(self._calls.set_metric_active(metric_id, active))

    def delete_metric(self, metric_id: str) -> None:
        run_blocking(self._calls.delete_metric(metric_id))

    def benchmark(self, metric_id: str, *, limit: int = 1000) -> MetricBenchmark:
        return run_blocking(self._calls.metric_benchmark(metric_id, limit=limit))

    def compare(self, a: MetricWindow, b: MetricWindow) -> MetricComparison:
        return run_blocking(self._calls.compare_metrics(CompareRequest(a=a, b=b)))

    def skills(
        self,
        *,
        query: str | None = None,
        status: SkillStatus | Literal["all"] = "active",
        limit: int = 50,
    ) -> SkillList:
        chosen = None if status == "all" else status
        return run_blocking(self._calls.list_skills(query=query, status=chosen, limit=limit))

    def add_skill(
        self,
        *,
        name: str,
        when_to_use: str,
        steps: Sequence[str],
        inputs: Iterable[InputLike] = (),
    ) -> Skill:
        return run_blocking(self._calls.add_skill(_skill(name, when_to_use, steps, inputs)))

    def skill(self, skill_id: str) -> Skill:
        return run_blocking(self._calls.get_skill(skill_id))

    def update_skill(
        self,
        skill_id: str,
        *,
        name: str,
        when_to_use: str,
        steps: Sequence[str],
        inputs: Iterable[InputLike] = (),
    ) -> Skill:
        request = _skill(name, when_to_use, steps, inputs)
        return run_blocking(self._calls.update_skill(skill_id, request))

    def adopt_skill(self, skill_id: str) -> Skill:
        return run_blocking(self._calls.review_skill(skill_id, adopt=True))

    def discard_skill(self, skill_id: str) -> Skill:
        return run_blocking(self._calls.review_skill(skill_id, adopt=False))

    def delete_skill(self, skill_id: str) -> None:
        run_blocking(self._calls.delete_skill(skill_id))
