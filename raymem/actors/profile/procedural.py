"""A profile actor's procedural memory: capture, sequences, patterns, injection, metrics, skills.

The passes run on a timer while the profile is live and procedural memory is on:
sequences and patterns every ``procedural.evaluate_interval_s`` (and once when the
profile opens, so a profile that slept catches up), metrics and skill proposals
when ``procedural.metrics_interval_s`` has passed since they last ran. ``evaluate``
runs all of them now, at a given time when asked. Summaries of sequences and
skills are embedded in the background with the memories (``ProfileBase``).
"""

import asyncio
import logging
from datetime import UTC, datetime

import msgspec

from raymem.actors.profile.base import ProfileBase, entry
from raymem.errors import InvalidRequest, PatternNotFound, SequenceNotFound
from raymem.pipelines import procedural
from raymem.pipelines.procedural import capture, inject, metrics, patterns, skills
from raymem.pipelines.procedural.search import search_sequences
from raymem.store import utc_now
from raymem.store.procedural import actions as stored_actions
from raymem.store.procedural import patterns as stored_patterns
from raymem.store.procedural import skills as stored_skills
from raymem.types_procedural import (
    ActionPage,
    ActionSequence,
    AnnotateRequest,
    CaptureRequest,
    CaptureResult,
    CompareRequest,
    EvaluateResult,
    Injection,
    InjectRequest,
    Metric,
    MetricBenchmark,
    MetricComparison,
    MetricIn,
    MetricList,
    MetricValueAt,
    Outcome,
    Pattern,
    PatternList,
    PatternWithHistory,
    ProceduralState,
    SequencePage,
    Skill,
    SkillHit,
    SkillIn,
    SkillList,
    SkillStatus,
)

log = logging.getLogger(__name__)


class ProceduralOperations(ProfileBase):
    _procedural_timer: asyncio.Task[None] | None = None

    async def _ensure_open(self) -> None:
        """Open the store (``ProfileBase``), then start the passes' timer once."""
        await super()._ensure_open()
        if self._procedural_timer is None:
            self._procedural_timer = asyncio.create_task(self._run_passes())

    # --------------------------------------------------------- background work

    async def _run_passes(self) -> None:
        """The passes while the profile is live; nothing while procedural memory is off."""
        settings = self.settings.procedural
        while not self._closing:
            try:
                enabled, _ = await stored_actions.enabled_state(self._open_store.reader)
                if enabled:
                    now = utc_now()
                    due = await procedural.metrics_due(
                        self._open_store, now, settings.metrics_interval_s
                    )
                    await self._evaluate(now, with_metrics=due)
            except Exception:  # the next round tries again; the actions stay open
                log.exception("procedural passes of profile %s failed", self.name)
            await asyncio.sleep(settings.evaluate_interval_s)

    async def _evaluate(self, now: datetime, *, with_metrics: bool) -> EvaluateResult:
        result = await procedural.evaluate(
            self._open_store,
            now,
            self.settings.procedural,
            with_metrics=with_metrics,
            summariser=self._intent_summariser(),
        )
        await self._after_write()
        return result

    # ------------------------------------------------------ state and capture

    @entry
    async def procedural_state(self) -> ProceduralState:
        return await capture.state(self._open_store)

    @entry
    async def set_procedural(self, enabled: bool) -> ProceduralState:
        if await capture.set_enabled(self._open_store, enabled):
            await self._after_write()
        return await capture.state(self._open_store)

    @entry
    async def capture_actions(self, request: CaptureRequest) -> CaptureResult:
        result = await capture.capture(self._open_store, request.actions)
        if result.stored:
            await self._after_write()
        return result

    @entry
    async def list_actions(
        self,
        *,
        session_id: str | None,
        agent_id: str | None,
        action_type: str | None,
        outcome: Outcome | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        cursor: str | None,
    ) -> ActionPage:
        _check_cursor(cursor)
        found, next_cursor = await stored_actions.list_actions(
            self._open_store.reader,
            session_id=session_id,
            agent_id=agent_id,
            action_type=action_type,
            outcome=outcome,
            since=since,
            until=until,
            limit=limit,
            cursor=cursor,
        )
        return ActionPage(actions=found, next_cursor=next_cursor)

    # -------------------------------------------------------------- sequences

    @entry
    async def list_sequences(
        self,
        *,
        session_id: str | None,
        agent_id: str | None,
        outcome: Outcome | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        cursor: str | None,
    ) -> SequencePage:
        _check_cursor(cursor)
        found, next_cursor = await stored_actions.list_sequences(
            self._open_store.reader,
            session_id=session_id,
            agent_id=agent_id,
            outcome=outcome,
            since=since,
            until=until,
            limit=limit,
            cursor=cursor,
        )
        return SequencePage(sequences=found, next_cursor=next_cursor)

    @entry
    async def search_sequences(self, query: str, limit: int) -> SequencePage:
        """Sequences whose intent matches ``query``, by text and vector, best first."""
        found = await search_sequences(self._open_store, query, limit=limit, embed=self._embed)
        return SequencePage(sequences=found)

    @entry
    async def get_sequence(self, sequence_id: str) -> ActionSequence:
        sequence = await stored_actions.get_sequence(self._open_store.reader, sequence_id)
        if sequence is None:
            raise SequenceNotFound(sequence_id)
        return sequence

    @entry
    async def evaluate_procedural(self, now: datetime | None) -> EvaluateResult:
        """Run the sequence, pattern and metric passes now (at ``now`` when given)."""
        return await self._evaluate(_utc(now) if now else utc_now(), with_metrics=True)

    # --------------------------------------------------------------- patterns

    @entry
    async def list_patterns(
        self,
        *,
        action_type: str | None,
        target_type: str | None,
        outcome: Outcome | None,
        since: datetime | None,
        until: datetime | None,
        include_inactive: bool,
        limit: int,
    ) -> PatternList:
        found = await stored_patterns.list_patterns(
            self._open_store.reader,
            action_type=action_type,
            target_type=target_type,
            outcome=outcome,
            since=since,
            until=until,
            include_inactive=include_inactive,
            limit=limit,
        )
        return PatternList(patterns=found)

    @entry
    async def get_pattern(self, pattern_id: str) -> PatternWithHistory:
        reader = self._open_store.reader
        pattern = await stored_patterns.get_pattern(reader, pattern_id)
        if pattern is None:
            raise PatternNotFound(pattern_id)
        chain = await stored_patterns.history(reader, pattern_id)
        return PatternWithHistory(**msgspec.structs.asdict(pattern), history=chain)

    @entry
    async def annotate_pattern(self, pattern_id: str, request: AnnotateRequest) -> Pattern:
        pattern = await patterns.annotate(self._open_store, pattern_id, request, now=utc_now())
        await self._after_write()
        return pattern

    @entry
    async def inject(self, request: InjectRequest) -> Injection:
        block = await inject.inject(self._open_store, request)
        if request.session_id is not None and block.patterns:
            await self._after_write()  # the injection was recorded
        return block

    # ---------------------------------------------------------------- metrics

    @entry
    async def list_metrics(self) -> MetricList:
        return MetricList(metrics=await metrics.list_metrics(self._open_store, utc_now()))

    @entry
    async def define_metric(self, request: MetricIn) -> Metric:
        metric = await metrics.define(self._open_store, request, utc_now())
        await self._after_write()
        return metric

    @entry
    async def preview_metric(self, request: MetricIn, now: datetime | None) -> MetricValueAt:
        return await metrics.preview(self._open_store, request, _utc(now) if now else utc_now())

    @entry
    async def set_metric_active(self, metric_id: str, active: bool) -> Metric:
        metric = await metrics.set_active(self._open_store, metric_id, active, utc_now())
        await self._after_write()
        return metric

    @entry
    async def delete_metric(self, metric_id: str) -> None:
        await metrics.delete(self._open_store, metric_id)
        await self._after_write()

    @entry
    async def metric_benchmark(self, metric_id: str, limit: int) -> MetricBenchmark:
        return await metrics.benchmark(self._open_store, metric_id, limit=limit)

    @entry
    async def compare_metrics(self, request: CompareRequest) -> MetricComparison:
        windows = {
            side: msgspec.structs.replace(window, start=_utc(window.start), end=_utc(window.end))
            for side, window in (("a", request.a), ("b", request.b))
        }
        return await metrics.compare(self._open_store, CompareRequest(**windows))

    # ----------------------------------------------------------------- skills

    @entry
    async def list_skills(
        self, *, query: str | None, status: SkillStatus | None, limit: int
    ) -> SkillList:
        """Skills by name (of one status, or all), or the active ones best for ``query``."""
        store = self._open_store
        if query is not None:
            hits = await skills.search(store, query, limit=limit, embed=self._embed)
            return SkillList(skills=hits)
        found = await stored_skills.list_skills(store.reader, status=status, limit=limit)
        return SkillList(skills=[SkillHit(**msgspec.structs.asdict(skill)) for skill in found])

    @entry
    async def add_skill(self, request: SkillIn) -> Skill:
        skill = await skills.add(self._open_store, request, utc_now())
        await self._after_write()
        return skill

    @entry
    async def get_skill(self, skill_id: str) -> Skill:
        return await skills.get(self._open_store, skill_id)

    @entry
    async def update_skill(self, skill_id: str, request: SkillIn) -> Skill:
        skill = await skills.update(self._open_store, skill_id, request, utc_now())
        await self._after_write()
        return skill

    @entry
    async def review_skill(self, skill_id: str, adopt: bool) -> Skill:
        skill = await skills.review(self._open_store, skill_id, adopt=adopt, now=utc_now())
        await self._after_write()
        return skill

    @entry
    async def delete_skill(self, skill_id: str) -> None:
        await skills.remove(self._open_store, skill_id)
        await self._after_write()


def _check_cursor(cursor: str | None) -> None:
    if cursor is not None and not stored_actions.valid_cursor(cursor):
        raise InvalidRequest(
            f"Invalid cursor {cursor[:40]!r}: pass the next_cursor of a previous page"
        )


def _utc(moment: datetime) -> datetime:
    """A time sent without a zone is UTC (stored times are aware; they must compare)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
