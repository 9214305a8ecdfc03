"""Procedural memory in the HTTP clients: ``profile.procedural`` of ``Client`` and ``AsyncClient``.

    procedural = client.get_profile("my-agent").procedural
    procedural.enable()
    procedural.record(session_id="s1", action_type="update_node", target_type="node",
                      target_ids=["n1"], outcome="failure", error_code="NodeNotFoundError")
    print(procedural.inject(action_type="update_node", target_type="node").text)

Each operation is described once as a ``_Call`` by ``_ProceduralCalls``; the
blocking and async classes send them and have the same methods and parameters.
"""

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from types import NoneType
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from raymem.client import _as_dict, _Call, _segment, _without_none
from raymem.types_procedural import (
    ActionIn,
    ActionPage,
    ActionSequence,
    Aggregation,
    CaptureResult,
    EvaluateResult,
    Injection,
    Metric,
    MetricBenchmark,
    MetricComparison,
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
    SkillInput,
    SkillList,
    SkillStatus,
)

if TYPE_CHECKING:
    from raymem.client import AsyncClient, Client

ActionLike = Mapping[str, Any] | ActionIn
InputLike = Mapping[str, Any] | SkillInput


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _metric_body(
    id: str,
    aggregation: Aggregation,
    success_condition: str,
    action_types: Sequence[str],
    target_types: Sequence[str],
    value: MetricValue,
    window_days: float,
    description: str,
    active: bool,
) -> dict[str, Any]:
    return {
        "id": id,
        "aggregation": aggregation,
        "success_condition": success_condition,
        "event_filter": {"action_types": list(action_types), "target_types": list(target_types)},
        "value": value,
        "window_days": window_days,
        "description": description,
        "active": active,
    }


def _skill_body(
    name: str, when_to_use: str, steps: Sequence[str], inputs: Iterable[InputLike]
) -> dict[str, Any]:
    return {
        "name": name,
        "when_to_use": when_to_use,
        "steps": list(steps),
        "inputs": [_as_dict(item) for item in inputs],
    }


class _ProceduralCalls:
    """The procedural memory calls of one profile; subclasses send them."""

    def __init__(self, profile: str) -> None:
        self.profile = profile
        self._base = f"/v1/profiles/{profile}"

    def _state(self) -> _Call[ProceduralState]:
        return _Call("GET", f"{self._base}/procedural", ProceduralState)

    def _set(self, enabled: bool) -> _Call[ProceduralState]:
        body = {"enabled": enabled}
        return _Call("PUT", f"{self._base}/procedural", ProceduralState, body=body)

    def _capture(self, actions: Iterable[ActionLike]) -> _Call[CaptureResult]:
        body = {"actions": [_without_none(_as_dict(action)) for action in actions]}
        return _Call("POST", f"{self._base}/actions", CaptureResult, body=body)

    def _actions(self, filters: Mapping[str, Any]) -> _Call[ActionPage]:
        return _Call("GET", f"{self._base}/actions", ActionPage, params=_without_none(filters))

    def _sequences(self, filters: Mapping[str, Any]) -> _Call[SequencePage]:
        params = _without_none(filters)
        return _Call("GET", f"{self._base}/sequences", SequencePage, params=params)

    def _sequence(self, sequence_id: str) -> _Call[ActionSequence]:
        return _Call("GET", f"{self._base}/sequences/{_segment(sequence_id)}", ActionSequence)

    def _evaluate(self, now: datetime | None) -> _Call[EvaluateResult]:
        body = _without_none({"now": _time(now)})
        return _Call("POST", f"{self._base}/procedural/evaluate", EvaluateResult, body=body)

    def _patterns(self, filters: Mapping[str, Any]) -> _Call[PatternList]:
        params = _without_none(filters)
        return _Call("GET", f"{self._base}/patterns", PatternList, params=params)

    def _pattern(self, pattern_id: str) -> _Call[PatternWithHistory]:
        return _Call("GET", f"{self._base}/patterns/{_segment(pattern_id)}", PatternWithHistory)

    def _annotate(self, pattern_id: str, body: Mapping[str, Any]) -> _Call[Pattern]:
        path = f"{self._base}/patterns/{_segment(pattern_id)}/annotate"
        return _Call("POST", path, Pattern, body=dict(body))

    def _inject(
        self,
        action_type: str,
        target_type: str,
        target_ids: Sequence[str],
        session_id: str | None,
        agent_id: str | None,
    ) -> _Call[Injection]:
        body = _without_none(
            {
                "action_type": action_type,
                "target_type": target_type,
                "target_ids": list(target_ids),
                "session_id": session_id,
                "agent_id": agent_id,
            }
        )
        return _Call("POST", f"{self._base}/patterns/inject", Injection, body=body)

    def _metrics(self) -> _Call[MetricList]:
        return _Call("GET", f"{self._base}/metrics", MetricList)

    def _define(self, body: dict[str, Any]) -> _Call[Metric]:
        return _Call("POST", f"{self._base}/metrics", Metric, body=body)

    def _preview(self, body: dict[str, Any], now: datetime | None) -> _Call[MetricValueAt]:
        params = _without_none({"now": _time(now)})
        path = f"{self._base}/metrics/preview"
        return _Call("POST", path, MetricValueAt, body=body, params=params)

    def _set_metric(self, metric_id: str, active: bool) -> _Call[Metric]:
        body = {"active": active}
        return _Call("PATCH", f"{self._base}/metrics/{_segment(metric_id)}", Metric, body=body)

    def _delete_metric(self, metric_id: str) -> _Call[None]:
        return _Call("DELETE", f"{self._base}/metrics/{_segment(metric_id)}", NoneType)

    def _benchmark(self, metric_id: str, limit: int) -> _Call[MetricBenchmark]:
        path = f"{self._base}/metrics/{_segment(metric_id)}/benchmark"
        return _Call("GET", path, MetricBenchmark, params={"limit": limit})

    def _compare(self, a: MetricWindow, b: MetricWindow) -> _Call[MetricComparison]:
        body = {"a": msgspec.to_builtins(a), "b": msgspec.to_builtins(b)}
        return _Call("POST", f"{self._base}/metrics/compare", MetricComparison, body=body)

    def _skills(
        self, query: str | None, status: SkillStatus | Literal["all"], limit: int
    ) -> _Call[SkillList]:
        params = _without_none({"query": query, "status": status, "limit": limit})
        return _Call("GET", f"{self._base}/skills", SkillList, params=params)

    def _add_skill(self, body: dict[str, Any]) -> _Call[Skill]:
        return _Call("POST", f"{self._base}/skills", Skill, body=body)

    def _skill(self, skill_id: str) -> _Call[Skill]:
        return _Call("GET", f"{self._base}/skills/{_segment(skill_id)}", Skill)

    def _update_skill(self, skill_id: str, body: dict[str, Any]) -> _Call[Skill]:
        return _Call("PUT", f"{self._base}/skills/{_segment(skill_id)}", Skill, body=body)

    def _review(self, skill_id: str, decision: Literal["adopt", "discard"]) -> _Call[Skill]:
        return _Call("POST", f"{self._base}/skills/{_segment(skill_id)}/{decision}", Skill)

    def _delete_skill(self, skill_id: str) -> _Call[None]:
        return _Call("DELETE", f"{self._base}/skills/{_segment(skill_id)}", NoneType)


def _action(
    session_id: str,
    action_type: str,
    target_type: str,
    outcome: Outcome,
    target_ids: Sequence[str],
    error_code: str | None,
    duration_ms: float | None,
    intent: str,
    at: datetime | None,
    id: str | None,
    agent_id: str | None,
) -> ActionIn:
    return ActionIn(
        session_id=session_id,
        action_type=action_type,
        target_type=target_type,
        outcome=outcome,
        target_ids=list(target_ids),
        error_code=error_code,
        duration_ms=duration_ms,
        intent=intent,
        at=at,
        id=id,
        agent_id=agent_id,
    )


# ------------------------------------------------------------------ blocking


class ProceduralClient(_ProceduralCalls):
    """A profile's procedural memory over HTTP (``Profile.procedural``)."""

    def __init__(self, client: "Client", profile: str) -> None:
        super().__init__(profile)
        self._client = client

    def state(self) -> ProceduralState:
        """Whether procedural memory is on, and its counts."""
        return self._client._send(self._state())

    def enable(self) -> ProceduralState:
        return self._client._send(self._set(True))

    def disable(self) -> ProceduralState:
        """Stop capture and injection; everything stored stays readable."""
        return self._client._send(self._set(False))

    def capture(self, actions: Iterable[ActionLike]) -> CaptureResult:
        """Store a batch of actions (dicts with the fields of ``ActionIn``, or ``ActionIn``)."""
        return self._client._send(self._capture(actions))

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
        """Store one action (``id``: yours, or derived from the content, so a resend is
        a duplicate; ``at``: when it happened, default now)."""
        action = _action(
            session_id,
            action_type,
            target_type,
            outcome,
            target_ids,
            error_code,
            duration_ms,
            intent,
            at,
            id,
            agent_id,
        )
        return self._client._send(self._capture([action]))

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
        """The timeline, newest first; pass ``next_cursor`` for the next page."""
        filters = {
            "session_id": session_id,
            "agent_id": agent_id,
            "action_type": action_type,
            "outcome": outcome,
            "since": _time(since),
            "until": _time(until),
            "limit": limit,
            "cursor": cursor,
        }
        return self._client._send(self._actions(filters))

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
        """Sequences newest first; with ``query``, those whose intent matches it best."""
        filters = {
            "query": query,
            "session_id": session_id,
            "agent_id": agent_id,
            "outcome": outcome,
            "since": _time(since),
            "until": _time(until),
            "limit": limit,
            "cursor": cursor,
        }
        return self._client._send(self._sequences(filters))

    def sequence(self, sequence_id: str) -> ActionSequence:
        return self._client._send(self._sequence(sequence_id))

    def evaluate(self, *, now: datetime | None = None) -> EvaluateResult:
        """Run the sequence, pattern and metric passes now (at ``now`` when given)."""
        return self._client._send(self._evaluate(now))

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
        """Patterns by confidence; ``since``/``until`` bound when they were last seen."""
        filters = {
            "action_type": action_type,
            "target_type": target_type,
            "outcome": outcome,
            "since": _time(since),
            "until": _time(until),
            "include_inactive": include_inactive,
            "limit": limit,
        }
        return self._client._send(self._patterns(filters))

    def pattern(self, pattern_id: str) -> PatternWithHistory:
        return self._client._send(self._pattern(pattern_id))

    def annotate(self, pattern_id: str, annotation: str | None) -> Pattern:
        """Set the note injected with a pattern whatever its confidence (None removes it)."""
        return self._client._send(self._annotate(pattern_id, {"annotation": annotation}))

    def suppress(self, pattern_id: str, suppressed: bool = True) -> Pattern:
        """Never inject a pattern (it stays listed, marked), or inject it again."""
        return self._client._send(self._annotate(pattern_id, {"suppressed": suppressed}))

    def inject(
        self,
        *,
        action_type: str,
        target_type: str,
        target_ids: Sequence[str] = (),
        session_id: str | None = None,
        agent_id: str | None = None,
    ) -> Injection:
        """The "past experience" block for an action about to be taken (with a session,
        recorded, so the session's sequence tells whether the warning was heeded)."""
        call = self._inject(action_type, target_type, target_ids, session_id, agent_id)
        return self._client._send(call)

    def metrics(self) -> MetricList:
        return self._client._send(self._metrics())

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
        """Save a custom metric (``success_condition`` e.g. ``outcome == 'success'``)."""
        body = _metric_body(
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
        return self._client._send(self._define(body))

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
        """What a metric would measure over the stored sequences, without saving it."""
        body = _metric_body(
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
        return self._client._send(self._preview(body, now))

    def set_metric_active(self, metric_id: str, active: bool) -> Metric:
        return self._client._send(self._set_metric(metric_id, active))

    def delete_metric(self, metric_id: str) -> None:
        """Delete a custom metric (built-ins are deactivated instead)."""
        self._client._send(self._delete_metric(metric_id))

    def benchmark(self, metric_id: str, *, limit: int = 1000) -> MetricBenchmark:
        """The metric's rows over time, with ``delta_vs_baseline``."""
        return self._client._send(self._benchmark(metric_id, limit))

    def compare(self, a: MetricWindow, b: MetricWindow) -> MetricComparison:
        """Two metrics over one window, or one metric over two windows."""
        return self._client._send(self._compare(a, b))

    def skills(
        self,
        *,
        query: str | None = None,
        status: SkillStatus | Literal["all"] = "active",
        limit: int = 50,
    ) -> SkillList:
        """Skills of a status by name, or with ``query`` the active ones that fit best."""
        return self._client._send(self._skills(query, status, limit))

    def add_skill(
        self,
        *,
        name: str,
        when_to_use: str,
        steps: Sequence[str],
        inputs: Iterable[InputLike] = (),
    ) -> Skill:
        return self._client._send(self._add_skill(_skill_body(name, when_to_use, steps, inputs)))

    def skill(self, skill_id: str) -> Skill:
        return self._client._send(self._skill(skill_id))

    def update_skill(
        self,
        skill_id: str,
        *,
        name: str,
        when_to_use: str,
        steps: Sequence[str],
        inputs: Iterable[InputLike] = (),
    ) -> Skill:
        body = _skill_body(name, when_to_use, steps, inputs)
        return self._client._send(self._update_skill(skill_id, body))

    def adopt_skill(self, skill_id: str) -> Skill:
        """Adopt a proposed skill: it becomes active."""
        return self._client._send(self._review(skill_id, "adopt"))

    def discard_skill(self, skill_id: str) -> Skill:
        """Discard a proposed skill (kept, so it is not proposed again)."""
        return self._client._send(self._review(skill_id, "discard"))

    def delete_skill(self, skill_id: str) -> None:
        self._client._send(self._delete_skill(skill_id))


# --------------------------------------------------------------------- async


class AsyncProceduralClient(_ProceduralCalls):
    """The same surface as ``ProceduralClient``, awaited (``AsyncProfile.procedural``)."""

    def __init__(self, client: "AsyncClient", profile: str) -> None:
        super().__init__(profile)
        self._client = client

    async def state(self) -> ProceduralState:
        """Whether procedural memory is on, and its counts."""
        return await self._client._send(self._state())

    async def enable(self) -> ProceduralState:
        return await self._client._send(self._set(True))

    async def disable(self) -> ProceduralState:
        """Stop capture and injection; everything stored stays readable."""
        return await self._client._send(self._set(False))

    async def capture(self, actions: Iterable[ActionLike]) -> CaptureResult:
        """Store a batch of actions (dicts with the fields of ``ActionIn``, or ``ActionIn``)."""
        return await self._client._send(self._capture(actions))

    async def record(
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
        """Store one action (``id``: yours, or derived from the content, so a resend is
        a duplicate; ``at``: when it happened, default now)."""
        action = _action(
            session_id,
            action_type,
            target_type,
            outcome,
            target_ids,
            error_code,
            duration_ms,
            intent,
            at,
            id,
            agent_id,
        )
        return await self._client._send(self._capture([action]))

    async def actions(
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
        """The timeline, newest first; pass ``next_cursor`` for the next page."""
        filters = {
            "session_id": session_id,
            "agent_id": agent_id,
            "action_type": action_type,
            "outcome": outcome,
            "since": _time(since),
            "until": _time(until),
            "limit": limit,
            "cursor": cursor,
        }
        return await self._client._send(self._actions(filters))

    async def sequences(
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
        """Sequences newest first; with ``query``, those whose intent matches it best."""
        filters = {
            "query": query,
            "session_id": session_id,
            "agent_id": agent_id,
            "outcome": outcome,
            "since": _time(since),
            "until": _time(until),
            "limit": limit,
            "cursor": cursor,
        }
        return await self._client._send(self._sequences(filters))

    async def sequence(self, sequence_id: str) -> ActionSequence:
        return await self._client._send(self._sequence(sequence_id))

    async def evaluate(self, *, now: datetime | None = None) -> EvaluateResult:
        """Run the sequence, pattern and metric passes now (at ``now`` when given)."""
        return await self._client._send(self._evaluate(now))

    async def patterns(
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
        """Patterns by confidence; ``since``/``until`` bound when they were last seen."""
        filters = {
            "action_type": action_type,
            "target_type": target_type,
            "outcome": outcome,
            "since": _time(since),
            "until": _time(until),
            "include_inactive": include_inactive,
            "limit": limit,
        }
        return await self._client._send(self._patterns(filters))

    async def pattern(self, pattern_id: str) -> PatternWithHistory:
        return await self._client._send(self._pattern(pattern_id))

    async def annotate(self, pattern_id: str, annotation: str | None) -> Pattern:
        """Set the note injected with a pattern whatever its confidence (None removes it)."""
        return await self._client._send(self._annotate(pattern_id, {"annotation": annotation}))

    async def suppress(self, pattern_id: str, suppressed: bool = True) -> Pattern:
        """Never inject a pattern (it stays listed, marked), or inject it again."""
        return await self._client._send(self._annotate(pattern_id, {"suppressed": suppressed}))

    async def inject(
        self,
        *,
        action_type: str,
        target_type: str,
        target_ids: Sequence[str] = (),
        session_id: str | None = None,
        agent_id: str | None = None,
    ) -> Injection:
        """The "past experience" block for an action about to be taken (with a session,
        recorded, so the session's sequence tells whether the warning was heeded)."""
        call = self._inject(action_type, target_type, target_ids, session_id, agent_id)
        return await self._client._send(call)

    async def metrics(self) -> MetricList:
        return await self._client._send(self._metrics())

    async def define_metric(
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
        """Save a custom metric (``success_condition`` e.g. ``outcome == 'success'``)."""
        body = _metric_body(
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
        return await self._client._send(self._define(body))

    async def preview_metric(
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
        """What a metric would measure over the stored sequences, without saving it."""
        body = _metric_body(
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
        return await self._client._send(self._preview(body, now))

    async def set_metric_active(self, metric_id: str, active: bool) -> Metric:
        return await self._client._send(self._set_metric(metric_id, active))

    async def delete_metric(self, metric_id: str) -> None:
        """Delete a custom metric (built-ins are deactivated instead)."""
        await self._client._send(self._delete_metric(metric_id))

    async def benchmark(self, metric_id: str, *, limit: int = 1000) -> MetricBenchmark:
        """The metric's rows over time, with ``delta_vs_baseline``."""
        return await self._client._send(self._benchmark(metric_id, limit))

    async def compare(self, a: MetricWindow, b: MetricWindow) -> MetricComparison:
        """Two metrics over one window, or one metric over two windows."""
        return await self._client._send(self._compare(a, b))

    async def skills(
        self,
        *,
        query: str | None = None,
        status: SkillStatus | Literal["all"] = "active",
        limit: int = 50,
    ) -> SkillList:
        """Skills of a status by name, or with ``query`` the active ones that fit best."""
        return await self._client._send(self._skills(query, status, limit))

    async def add_skill(
        self,
        *,
        name: str,
        when_to_use: str,
        steps: Sequence[str],
        inputs: Iterable[InputLike] = (),
    ) -> Skill:
        body = _skill_body(name, when_to_use, steps, inputs)
        return await self._client._send(self._add_skill(body))

    async def skill(self, skill_id: str) -> Skill:
        return await self._client._send(self._skill(skill_id))

    async def update_skill(
        self,
        skill_id: str,
        *,
        name: str,
        when_to_use: str,
        steps: Sequence[str],
        inputs: Iterable[InputLike] = (),
    ) -> Skill:
        body = _skill_body(name, when_to_use, steps, inputs)
        return await self._client._send(self._update_skill(skill_id, body))

    async def adopt_skill(self, skill_id: str) -> Skill:
        """Adopt a proposed skill: it becomes active."""
        return await self._client._send(self._review(skill_id, "adopt"))

    async def discard_skill(self, skill_id: str) -> Skill:
        """Discard a proposed skill (kept, so it is not proposed again)."""
        return await self._client._send(self._review(skill_id, "discard"))

    async def delete_skill(self, skill_id: str) -> None:
        await self._client._send(self._delete_skill(skill_id))
