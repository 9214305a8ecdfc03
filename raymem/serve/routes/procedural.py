"""Procedural memory routes: the switch, actions, sequences, patterns, injection, metrics, skills.

No ``from __future__ import annotations``: FastAPI inside Serve then answers 422.
"""

from datetime import datetime
from typing import Literal

from fastapi import Query, Request, Response

from raymem.errors import InvalidRequest, PayloadTooLarge
from raymem.names import validate_name
from raymem.serve import http
from raymem.serve.api import app
from raymem.serve.routes.base import IngressBase
from raymem.types_procedural import (
    ActionPage,
    ActionSequence,
    AnnotateRequest,
    CaptureRequest,
    CaptureResult,
    CompareRequest,
    EvaluateRequest,
    EvaluateResult,
    Injection,
    InjectRequest,
    Metric,
    MetricBenchmark,
    MetricComparison,
    MetricIn,
    MetricList,
    MetricUpdate,
    MetricValueAt,
    Outcome,
    Pattern,
    PatternList,
    PatternWithHistory,
    ProceduralState,
    ProceduralToggle,
    SequencePage,
    Skill,
    SkillIn,
    SkillList,
    SkillStatus,
)

LABEL_CHARS = 128  # action and target types, as ``types_procedural.Label`` allows
MAX_BENCHMARK_ROWS = 10_000


def _check_times(*named: tuple[datetime | None, str]) -> None:
    for moment, path in named:
        http.check_time(moment, path)


class ProceduralRoutes(IngressBase):
    # ------------------------------------------------------------ the switch

    @app.get(
        "/v1/profiles/{profile}/procedural",
        tags=["procedural"],
        responses=http.response_schema(ProceduralState),
    )
    async def procedural_state(self, profile: str, request: Request) -> Response:
        return await self._answer(
            request, profile, lambda calls: calls.procedural_state(), write=False
        )

    @app.put(
        "/v1/profiles/{profile}/procedural",
        tags=["procedural"],
        **http.write_docs(ProceduralToggle, ProceduralState, 200, "Turn procedural memory on/off"),
    )
    async def set_procedural(self, profile: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        body = await self._body(request, ProceduralToggle)
        with self._calls(principal, profile) as calls:
            state = await calls.set_procedural(body.enabled)
        return http.json_response(state)

    @app.post(
        "/v1/profiles/{profile}/procedural/evaluate",
        tags=["procedural"],
        **http.write_docs(EvaluateRequest, EvaluateResult, 200, "Optional: the passes' clock"),
    )
    async def evaluate(self, profile: str, request: Request) -> Response:
        """Run the sequence, pattern and metric passes now (an empty body is ``{}``)."""
        principal = self._profile(request, profile, write=True)
        raw = await http.read_body(request, self.limits.max_body_bytes)
        body = http.decode(raw, EvaluateRequest) if raw.strip() else EvaluateRequest()
        http.check_time(body.now, "$.now")
        with self._calls(principal, profile) as calls:
            result = await calls.evaluate_procedural(body.now)
        return http.json_response(result)

    # --------------------------------------------------------------- actions

    @app.post(
        "/v1/profiles/{profile}/actions",
        tags=["procedural"],
        **http.write_docs(CaptureRequest, CaptureResult, 200, "One action or a batch"),
    )
    async def capture(self, profile: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        body = await self._body(request, CaptureRequest)
        most = self.settings.procedural.max_actions_per_request
        if len(body.actions) > most:
            raise PayloadTooLarge(
                f"{len(body.actions)} actions exceed the limit of {most} per request"
            )
        _check_times(*((a.at, f"$.actions[{i}].at") for i, a in enumerate(body.actions)))
        with self._calls(principal, profile) as calls:
            result = await calls.capture_actions(body)
        return http.json_response(result)

    @app.get(
        "/v1/profiles/{profile}/actions",
        tags=["procedural"],
        responses=http.response_schema(ActionPage),
    )
    async def list_actions(
        self,
        profile: str,
        request: Request,
        session_id: str | None = Query(None),
        agent_id: str | None = Query(None),
        action_type: str | None = Query(None, max_length=LABEL_CHARS),
        outcome: Outcome | None = Query(None),
        since: datetime | None = Query(None),
        until: datetime | None = Query(None),
        limit: int = Query(50, ge=1),
        cursor: str | None = Query(None, max_length=200),
    ) -> Response:
        """The timeline of actions, newest first; ``since`` inclusive, ``until`` exclusive."""
        principal = self._profile(request, profile, write=False)
        self._check_filters(limit, session_id, agent_id, since, until)
        with self._calls(principal, profile) as calls:
            page = await calls.list_actions(
                session_id=session_id,
                agent_id=agent_id,
                action_type=action_type,
                outcome=outcome,
                since=since,
                until=until,
                limit=limit,
                cursor=cursor,
            )
        return http.json_response(page)

    def _check_filters(
        self,
        limit: int,
        session_id: str | None,
        agent_id: str | None,
        since: datetime | None,
        until: datetime | None,
    ) -> None:
        http.check_limit(limit, self.limits)
        if session_id is not None:
            validate_name(session_id, "session")
        if agent_id is not None:
            validate_name(agent_id, "agent")
        _check_times((since, "since"), (until, "until"))

    # ------------------------------------------------------------- sequences

    @app.get(
        "/v1/profiles/{profile}/sequences",
        tags=["procedural"],
        responses=http.response_schema(SequencePage),
    )
    async def list_sequences(
        self,
        profile: str,
        request: Request,
        query: str | None = Query(None),
        session_id: str | None = Query(None),
        agent_id: str | None = Query(None),
        outcome: Outcome | None = Query(None),
        since: datetime | None = Query(None),
        until: datetime | None = Query(None),
        limit: int = Query(50, ge=1),
        cursor: str | None = Query(None, max_length=200),
    ) -> Response:
        """Sequences newest first, filtered; with ``query``, those whose intent matches it."""
        principal = self._profile(request, profile, write=False)
        self._check_filters(limit, session_id, agent_id, since, until)
        with self._calls(principal, profile) as calls:
            if query is not None:
                self._check_query(query)
                page = await calls.search_sequences(query, limit=limit)
            else:
                page = await calls.list_sequences(
                    session_id=session_id,
                    agent_id=agent_id,
                    outcome=outcome,
                    since=since,
                    until=until,
                    limit=limit,
                    cursor=cursor,
                )
        return http.json_response(page)

    def _check_query(self, query: str) -> None:
        if len(query) > self.limits.max_query_chars:
            raise InvalidRequest(
                f"Query of {len(query)} characters exceeds the limit of"
                f" {self.limits.max_query_chars} - at `query`"
            )
        if not query.strip():
            raise InvalidRequest("Query must not be blank - at `query`")

    @app.get(
        "/v1/profiles/{profile}/sequences/{sequence_id}",
        tags=["procedural"],
        responses=http.response_schema(ActionSequence),
    )
    async def get_sequence(self, profile: str, sequence_id: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=False)
        validate_name(sequence_id, "sequence")
        with self._calls(principal, profile) as calls:
            sequence = await calls.get_sequence(sequence_id)
        return http.json_response(sequence)

    # -------------------------------------------------------------- patterns

    @app.get(
        "/v1/profiles/{profile}/patterns",
        tags=["procedural"],
        responses=http.response_schema(PatternList),
    )
    async def list_patterns(
        self,
        profile: str,
        request: Request,
        action_type: str | None = Query(None, max_length=LABEL_CHARS),
        target_type: str | None = Query(None, max_length=LABEL_CHARS),
        outcome: Outcome | None = Query(None),
        since: datetime | None = Query(None),
        until: datetime | None = Query(None),
        include_inactive: bool = Query(False),
        limit: int = Query(100, ge=1),
    ) -> Response:
        """Patterns by confidence; ``since``/``until`` bound when they were last seen.
        Suppressed ones are listed, marked; ``include_inactive`` adds superseded and
        deleted ones."""
        principal = self._profile(request, profile, write=False)
        self._check_filters(limit, None, None, since, until)
        with self._calls(principal, profile) as calls:
            found = await calls.list_patterns(
                action_type=action_type,
                target_type=target_type,
                outcome=outcome,
                since=since,
                until=until,
                include_inactive=include_inactive,
                limit=limit,
            )
        return http.json_response(found)

    @app.post(
        "/v1/profiles/{profile}/patterns/inject",
        tags=["procedural"],
        **http.write_docs(InjectRequest, Injection, 200, "The action about to be taken"),
    )
    async def inject(self, profile: str, request: Request) -> Response:
        """The "past experience" block; with a ``session_id``, the injection is recorded."""
        principal = self._profile(request, profile, write=False)
        body = await self._body(request, InjectRequest)
        if body.session_id is not None:
            principal.check(profile, write=True)
        with self._calls(principal, profile) as calls:
            block = await calls.inject(body)
        return http.json_response(block)

    @app.get(
        "/v1/profiles/{profile}/patterns/{pattern_id}",
        tags=["procedural"],
        responses=http.response_schema(PatternWithHistory),
    )
    async def get_pattern(self, profile: str, pattern_id: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=False)
        validate_name(pattern_id, "pattern")
        with self._calls(principal, profile) as calls:
            pattern = await calls.get_pattern(pattern_id)
        return http.json_response(pattern)

    @app.post(
        "/v1/profiles/{profile}/patterns/{pattern_id}/annotate",
        tags=["procedural"],
        **http.write_docs(AnnotateRequest, Pattern, 200, "A note to inject, or suppression"),
    )
    async def annotate_pattern(self, profile: str, pattern_id: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        validate_name(pattern_id, "pattern")
        body = await self._body(request, AnnotateRequest)
        with self._calls(principal, profile) as calls:
            pattern = await calls.annotate_pattern(pattern_id, body)
        return http.json_response(pattern)

    # --------------------------------------------------------------- metrics

    @app.get(
        "/v1/profiles/{profile}/metrics",
        tags=["procedural"],
        responses=http.response_schema(MetricList),
    )
    async def list_metrics(self, profile: str, request: Request) -> Response:
        return await self._answer(request, profile, lambda calls: calls.list_metrics(), write=False)

    @app.post(
        "/v1/profiles/{profile}/metrics",
        status_code=201,
        tags=["procedural"],
        **http.write_docs(MetricIn, Metric, 201, "A custom metric"),
    )
    async def define_metric(self, profile: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        body = await self._body(request, MetricIn)
        with self._calls(principal, profile) as calls:
            metric = await calls.define_metric(body)
        return http.json_response(metric, 201)

    @app.post(
        "/v1/profiles/{profile}/metrics/preview",
        tags=["procedural"],
        **http.write_docs(MetricIn, MetricValueAt, 200, "A metric to measure without saving"),
    )
    async def preview_metric(
        self, profile: str, request: Request, now: datetime | None = Query(None)
    ) -> Response:
        """What the metric measures over the stored sequences at ``now`` (default: now)."""
        principal = self._profile(request, profile, write=False)
        body = await self._body(request, MetricIn)
        http.check_time(now, "now")
        with self._calls(principal, profile) as calls:
            value = await calls.preview_metric(body, now=now)
        return http.json_response(value)

    @app.post(
        "/v1/profiles/{profile}/metrics/compare",
        tags=["procedural"],
        **http.write_docs(CompareRequest, MetricComparison, 200, "Two metrics or two windows"),
    )
    async def compare_metrics(self, profile: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=False)
        body = await self._body(request, CompareRequest)
        _check_times(
            (body.a.start, "$.a.start"),
            (body.a.end, "$.a.end"),
            (body.b.start, "$.b.start"),
            (body.b.end, "$.b.end"),
        )
        with self._calls(principal, profile) as calls:
            comparison = await calls.compare_metrics(body)
        return http.json_response(comparison)

    @app.patch(
        "/v1/profiles/{profile}/metrics/{metric_id}",
        tags=["procedural"],
        **http.write_docs(MetricUpdate, Metric, 200, "Activate or deactivate"),
    )
    async def update_metric(self, profile: str, metric_id: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        validate_name(metric_id, "metric")
        body = await self._body(request, MetricUpdate)
        with self._calls(principal, profile) as calls:
            metric = await calls.set_metric_active(metric_id, body.active)
        return http.json_response(metric)

    @app.delete(
        "/v1/profiles/{profile}/metrics/{metric_id}",
        status_code=204,
        tags=["procedural"],
        responses=http.deleted_responses(),
    )
    async def delete_metric(self, profile: str, metric_id: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        validate_name(metric_id, "metric")
        with self._calls(principal, profile) as calls:
            await calls.delete_metric(metric_id)
        return Response(status_code=204)

    @app.get(
        "/v1/profiles/{profile}/metrics/{metric_id}/benchmark",
        tags=["procedural"],
        responses=http.response_schema(MetricBenchmark),
    )
    async def metric_benchmark(
        self,
        profile: str,
        metric_id: str,
        request: Request,
        limit: int = Query(1000, ge=1, le=MAX_BENCHMARK_ROWS),
    ) -> Response:
        """The metric's rows over time (value, samples, baseline, delta_vs_baseline)."""
        principal = self._profile(request, profile, write=False)
        validate_name(metric_id, "metric")
        with self._calls(principal, profile) as calls:
            rows = await calls.metric_benchmark(metric_id, limit=limit)
        return http.json_response(rows)

    # ---------------------------------------------------------------- skills

    @app.get(
        "/v1/profiles/{profile}/skills",
        tags=["procedural"],
        responses=http.response_schema(SkillList),
    )
    async def list_skills(
        self,
        profile: str,
        request: Request,
        query: str | None = Query(None),
        status: SkillStatus | Literal["all"] = Query("active"),
        limit: int = Query(50, ge=1),
    ) -> Response:
        """Skills of a status by name, or with ``query`` the active ones that fit it best."""
        principal = self._profile(request, profile, write=False)
        http.check_limit(limit, self.limits)
        if query is not None:
            self._check_query(query)
        with self._calls(principal, profile) as calls:
            found = await calls.list_skills(
                query=query, status=None if status == "all" else status, limit=limit
            )
        return http.json_response(found)

    @app.post(
        "/v1/profiles/{profile}/skills",
        status_code=201,
        tags=["procedural"],
        **http.write_docs(SkillIn, Skill, 201, "A named procedure"),
    )
    async def add_skill(self, profile: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        body = await self._body(request, SkillIn)
        with self._calls(principal, profile) as calls:
            skill = await calls.add_skill(body)
        return http.json_response(skill, 201)

    @app.get(
        "/v1/profiles/{profile}/skills/{skill_id}",
        tags=["procedural"],
        responses=http.response_schema(Skill),
    )
    async def get_skill(self, profile: str, skill_id: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=False)
        validate_name(skill_id, "skill")
        with self._calls(principal, profile) as calls:
            skill = await calls.get_skill(skill_id)
        return http.json_response(skill)

    @app.put(
        "/v1/profiles/{profile}/skills/{skill_id}",
        tags=["procedural"],
        **http.write_docs(SkillIn, Skill, 200, "The skill's new text"),
    )
    async def update_skill(self, profile: str, skill_id: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        validate_name(skill_id, "skill")
        body = await self._body(request, SkillIn)
        with self._calls(principal, profile) as calls:
            skill = await calls.update_skill(skill_id, body)
        return http.json_response(skill)

    @app.post(
        "/v1/profiles/{profile}/skills/{skill_id}/{decision}",
        tags=["procedural"],
        responses=http.response_schema(Skill),
    )
    async def review_skill(
        self, profile: str, skill_id: str, decision: Literal["adopt", "discard"], request: Request
    ) -> Response:
        """Adopt a proposed skill (it becomes active) or discard it (kept, never re-proposed)."""
        principal = self._profile(request, profile, write=True)
        validate_name(skill_id, "skill")
        with self._calls(principal, profile) as calls:
            skill = await calls.review_skill(skill_id, adopt=decision == "adopt")
        return http.json_response(skill)

    @app.delete(
        "/v1/profiles/{profile}/skills/{skill_id}",
        status_code=204,
        tags=["procedural"],
        responses=http.deleted_responses(),
    )
    async def delete_skill(self, profile: str, skill_id: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        validate_name(skill_id, "skill")
        with self._calls(principal, profile) as calls:
            await calls.delete_skill(skill_id)
        return Response(status_code=204)
