"""The typed interface of a profile: one async method per operation of the profile.

Everything that calls a profile goes through ``ProfileCalls``: the HTTP
ingress, the in-cluster ``raymem.get_profile`` (``actors/local.py``), tests and
benchmarks. Each method passes one callable that the profile's host runs
against the open profile object (a ``ProfileActor``, see ``actors/host.py``)
and checks the type of the answer, so a caller gets what the signature says;
``ProfileRouter`` finds the host, caches it and retries after hibernation.

How a call is written (the plumbing): the callable is a lambda over the
profile object that calls one of its methods with the arguments, pickled to
the host (cloudpickle carries the lambda and what it closes over)::

    async def recall(self, request: RecallRequest) -> RecallResult:
        return await self._call(RecallResult, lambda profile: profile.recall(request))

A method written for the old one-actor-per-profile plumbing converts
mechanically: ``lambda profile: profile.NAME(ARGS)`` becomes
``lambda profile: profile.NAME(ARGS)`` (the same method of the same mixin, now
called directly); a streaming method's
``actor.NAME.options(num_returns="streaming").remote(ARGS)`` becomes
``profile.NAME(ARGS)`` passed to ``router.stream``.

Operations that add data (ingest, remember, append, import, a block, a work item,
a flush) create a profile
that does not exist yet; every other one raises ``ProfileNotFound`` for it.
``run_blocking`` turns any of them into a blocking call.
"""

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from datetime import datetime
from types import NoneType
from typing import Any, TypeVar

import numpy as np
from ray.exceptions import RayActorError

from raymem.actors.host import ProcessStats
from raymem.actors.profile import ProfileActor
from raymem.actors.registry import ProfileRouter
from raymem.types import (
    AppendRequest,
    DreamAdopted,
    DreamDiff,
    DreamList,
    DreamRequest,
    DreamStatus,
    ImportResult,
    IngestRequest,
    IngestResult,
    MemoryErasure,
    MemoryPage,
    MemoryType,
    MemoryWithHistory,
    MessageList,
    ProfileInfo,
    Proposal,
    ProposalList,
    ProposalState,
    RecallRequest,
    RecallResult,
    RememberRequest,
    ReviewMode,
    ReviewModeName,
    SessionDeleted,
    SessionEnded,
    SessionList,
    SnapshotResult,
    StoredMessage,
)
from raymem.types_context import (
    Block,
    BlockList,
    BlockSaved,
    BlockWrite,
    ClosedWorkItem,
    ContextRequest,
    ContextResult,
    Episode,
    EpisodePage,
    FlushRequest,
    FlushResult,
    Resolved,
    WorkingMemory,
    WorkItem,
    WorkItemList,
    WorkItemOpen,
    WorkItemStatus,
    WorkItemUpdate,
)
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
    SkillIn,
    SkillList,
    SkillStatus,
)

T = TypeVar("T")


class ProfileCalls:
    """The operations of one profile of one tenant."""

    def __init__(self, router: ProfileRouter, tenant: str, profile: str) -> None:
        self.router, self.tenant, self.profile = router, tenant, profile

    async def _call(
        self,
        returns: type[T],
        operation: Callable[[ProfileActor], Awaitable[object]],
        *,
        create: bool = False,
    ) -> T:
        result = await self.router.call(self.tenant, self.profile, operation, create=create)
        if not isinstance(result, returns):
            raise TypeError(
                f"profile {self.profile!r} answered a {type(result).__name__},"
                f" not a {returns.__name__}"
            )
        return result

    # -------------------------------------------------------------- memories

    async def ingest(self, request: IngestRequest) -> IngestResult:
        """Store a conversation and extract memories from it."""
        return await self._call(IngestResult, lambda profile: profile.ingest(request), create=True)

    async def remember(self, request: RememberRequest, memory_id: str) -> MemoryWithHistory:
        """Remember one thing under ``memory_id`` (chosen by the caller: a retry writes once)."""
        return await self._call(
            MemoryWithHistory,
            lambda profile: profile.remember(request, memory_id),
            create=True,
        )

    async def recall(
        self, request: RecallRequest, query_vector: np.ndarray | None = None
    ) -> RecallResult:
        """Recall; ``query_vector`` when the caller has embedded the query already."""
        return await self._call(RecallResult, lambda profile: profile.recall(request, query_vector))

    async def list_memories(
        self,
        *,
        types: list[MemoryType] | None = None,
        session_id: str | None = None,
        include_superseded: bool = False,
        limit: int = 50,
        before_seq: int | None = None,
    ) -> MemoryPage:
        """A page of memories, newest first; ``before_seq`` is a previous page's cursor."""
        return await self._call(
            MemoryPage,
            lambda profile: profile.list_memories(
                types=types,
                session_id=session_id,
                include_superseded=include_superseded,
                limit=limit,
                before_seq=before_seq,
            ),
        )

    async def get_memory(self, memory_id: str) -> MemoryWithHistory:
        return await self._call(MemoryWithHistory, lambda profile: profile.get_memory(memory_id))

    async def forget(self, memory_id: str) -> None:
        await self._call(NoneType, lambda profile: profile.forget(memory_id))

    async def erase_memory(self, memory_id: str) -> MemoryErasure:
        """Erase the memory, the turns it was drawn from and the memories drawn from those."""
        return await self._call(MemoryErasure, lambda profile: profile.erase_memory(memory_id))

    # -------------------------------------------------------------- sessions

    async def append_message(self, session_id: str, request: AppendRequest) -> StoredMessage:
        return await self._call(
            StoredMessage,
            lambda profile: profile.append_message(session_id, request),
            create=True,
        )

    async def last_messages(self, session_id: str, last: int | None = None) -> MessageList:
        """The session's turns, oldest first; the ``last`` ones only when given."""
        return await self._call(
            MessageList, lambda profile: profile.last_messages(session_id, last)
        )

    async def list_sessions(self) -> SessionList:
        return await self._call(SessionList, lambda profile: profile.list_sessions())

    async def end_session(self, session_id: str) -> SessionEnded:
        """End the session and consolidate it into long-term memories."""
        return await self._call(SessionEnded, lambda profile: profile.end_session(session_id))

    async def delete_session(self, session_id: str) -> SessionDeleted:
        """Erase the session: its turns, its memories and every memory drawn from its turns."""
        return await self._call(SessionDeleted, lambda profile: profile.delete_session(session_id))

    # ---------------------------------------------------- the agent's context

    async def list_blocks(self) -> BlockList:
        """The core blocks (the defaults included), with their entries in order."""
        return await self._call(BlockList, lambda profile: profile.list_blocks())

    async def set_block_limit(self, name: str, limit: int) -> BlockSaved:
        """Create a block with ``limit`` characters, or change its limit."""
        return await self._call(
            BlockSaved, lambda profile: profile.set_block_limit(name, limit), create=True
        )

    async def delete_block(self, name: str) -> None:
        """Delete a created block and its entries (the default blocks cannot be deleted)."""
        await self._call(NoneType, lambda profile: profile.delete_block(name))

    async def add_block_entry(self, name: str, content: str) -> BlockWrite:
        """Add an entry; a normalised duplicate is a no-op that says so."""
        return await self._call(
            BlockWrite, lambda profile: profile.add_block_entry(name, content), create=True
        )

    async def replace_block_entry(self, name: str, old: str, new: str) -> BlockWrite:
        """Rewrite the entry whose whole text (normalised) is ``old``."""
        return await self._call(
            BlockWrite, lambda profile: profile.replace_block_entry(name, old, new)
        )

    async def remove_block_entry(self, name: str, content: str) -> Block:
        """Remove the entry whose whole text (normalised) is ``content``."""
        return await self._call(Block, lambda profile: profile.remove_block_entry(name, content))

    async def open_work_item(self, request: WorkItemOpen, item_id: str) -> WorkItem:
        """Open a work item under ``item_id`` (chosen by the caller: a retry opens one)."""
        return await self._call(
            WorkItem, lambda profile: profile.open_work_item(request, item_id), create=True
        )

    async def update_work_item(self, item_id: str, request: WorkItemUpdate) -> WorkItem:
        return await self._call(
            WorkItem, lambda profile: profile.update_work_item(item_id, request)
        )

    async def close_work_item(self, item_id: str, outcome: str | None = None) -> ClosedWorkItem:
        """Close a work item and finalise its episode."""
        return await self._call(
            ClosedWorkItem, lambda profile: profile.close_work_item(item_id, outcome)
        )

    async def get_work_item(self, item_id: str) -> WorkItem:
        return await self._call(WorkItem, lambda profile: profile.get_work_item(item_id))

    async def list_work_items(
        self,
        *,
        session_id: str | None = None,
        status: WorkItemStatus | None = None,
        limit: int = 50,
        before_seq: int | None = None,
    ) -> WorkItemList:
        """A page of work items, newest first; ``before_seq`` is a previous page's cursor."""
        return await self._call(
            WorkItemList,
            lambda profile: profile.list_work_items(
                session_id=session_id, status=status, limit=limit, before_seq=before_seq
            ),
        )

    async def working_memory(self, session_id: str | None = None) -> WorkingMemory:
        """Where the work stands: open work items, current tasks and instructions."""
        return await self._call(WorkingMemory, lambda profile: profile.working_memory(session_id))

    async def list_episodes(
        self, *, session_id: str | None = None, limit: int = 50, before_seq: int | None = None
    ) -> EpisodePage:
        """A page of episodes, newest first; ``before_seq`` is a previous page's cursor."""
        return await self._call(
            EpisodePage,
            lambda profile: profile.list_episodes(
                session_id=session_id, limit=limit, before_seq=before_seq
            ),
        )

    async def get_episode(self, episode_id: str) -> Episode:
        return await self._call(Episode, lambda profile: profile.get_episode(episode_id))

    async def context(
        self, request: ContextRequest, query_vector: np.ndarray | None = None
    ) -> ContextResult:
        """The assembled context; ``query_vector`` when the caller has embedded the query."""
        return await self._call(
            ContextResult, lambda profile: profile.context(request, query_vector)
        )

    async def resolve_ref(self, ref: str) -> Resolved:
        """The record a ``source_ref`` names (its ``kind`` says which)."""
        return await self._call(Resolved, lambda profile: profile.resolve_ref(ref))

    async def flush(self, request: FlushRequest) -> FlushResult:
        """Store what is durable in a slice of conversation (best effort)."""
        return await self._call(FlushResult, lambda profile: profile.flush(request), create=True)

    # ---------------------------------------------------------------- dreams

    async def start_dream(self, request: DreamRequest) -> DreamStatus:
        """Start re-organising the profile into a candidate; it runs in the background."""
        return await self._call(DreamStatus, lambda profile: profile.start_dream(request))

    async def dream_status(self, dream_id: str) -> DreamStatus:
        return await self._call(DreamStatus, lambda profile: profile.dream_status(dream_id))

    async def list_dreams(self) -> DreamList:
        """The profile's latest dreams, newest first."""
        return await self._call(DreamList, lambda profile: profile.list_dreams())

    async def dream_diff(self, dream_id: str) -> DreamDiff:
        """Every change a ready (or adopted) dream makes, with its reason."""
        return await self._call(DreamDiff, lambda profile: profile.dream_diff(dream_id))

    async def adopt_dream(self, dream_id: str) -> DreamAdopted:
        """Apply a ready dream's changes to the profile, in one transaction."""
        return await self._call(DreamAdopted, lambda profile: profile.adopt_dream(dream_id))

    async def discard_dream(self, dream_id: str) -> DreamStatus:
        """Delete a ready dream's candidate; the profile stays as it is."""
        return await self._call(DreamStatus, lambda profile: profile.discard_dream(dream_id))

    async def cancel_dream(self, dream_id: str) -> DreamStatus:
        """Stop a running dream and delete its candidate."""
        return await self._call(DreamStatus, lambda profile: profile.cancel_dream(dream_id))

    async def wait_dream(self, dream_id: str) -> DreamStatus:
        """Return once a running dream is ready, or has failed (tests, benchmarks)."""
        return await self._call(DreamStatus, lambda profile: profile.wait_dream(dream_id))

    # ---------------------------------------------------------- review queue

    async def review_mode(self) -> ReviewMode:
        return await self._call(ReviewMode, lambda profile: profile.review_mode())

    async def set_review_mode(
        self, mode: ReviewModeName, *, below: float | None = None
    ) -> ReviewMode:
        """``review``: low-confidence supersessions and merges wait as proposals."""
        return await self._call(ReviewMode, lambda profile: profile.set_review_mode(mode, below))

    async def list_proposals(
        self, *, state: ProposalState | None = None, limit: int = 100
    ) -> ProposalList:
        """Proposals, oldest first; only those in ``state`` when given."""
        return await self._call(ProposalList, lambda profile: profile.list_proposals(state, limit))

    async def approve_proposal(self, proposal_id: str) -> Proposal:
        """Make the change a proposal holds."""
        return await self._call(
            Proposal, lambda profile: profile.decide_proposal(proposal_id, "approved")
        )

    async def reject_proposal(self, proposal_id: str) -> Proposal:
        """Leave both memories of a proposal as they are."""
        return await self._call(
            Proposal, lambda profile: profile.decide_proposal(proposal_id, "rejected")
        )

    # ------------------------------------------------------ procedural memory

    async def procedural_state(self) -> ProceduralState:
        """Whether procedural memory is on, and what it holds."""
        return await self._call(ProceduralState, lambda profile: profile.procedural_state())

    async def set_procedural(self, enabled: bool) -> ProceduralState:
        """Turn procedural memory on or off (off keeps everything readable)."""
        return await self._call(
            ProceduralState, lambda profile: profile.set_procedural(enabled), create=True
        )

    async def capture_actions(self, request: CaptureRequest) -> CaptureResult:
        """Store actions (idempotent by id); nothing while procedural memory is off."""
        return await self._call(
            CaptureResult, lambda profile: profile.capture_actions(request), create=True
        )

    async def list_actions(
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
        """The timeline, newest first; ``cursor`` is a previous page's ``next_cursor``."""
        return await self._call(
            ActionPage,
            lambda profile: profile.list_actions(
                session_id=session_id,
                agent_id=agent_id,
                action_type=action_type,
                outcome=outcome,
                since=since,
                until=until,
                limit=limit,
                cursor=cursor,
            ),
        )

    async def list_sequences(
        self,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        outcome: Outcome | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> SequencePage:
        """Action sequences by the time they ended, newest first."""
        return await self._call(
            SequencePage,
            lambda profile: profile.list_sequences(
                session_id=session_id,
                agent_id=agent_id,
                outcome=outcome,
                since=since,
                until=until,
                limit=limit,
                cursor=cursor,
            ),
        )

    async def search_sequences(self, query: str, *, limit: int = 10) -> SequencePage:
        """Sequences whose intent summary matches ``query`` (text and vector), best first."""
        return await self._call(
            SequencePage, lambda profile: profile.search_sequences(query, limit)
        )

    async def get_sequence(self, sequence_id: str) -> ActionSequence:
        return await self._call(ActionSequence, lambda profile: profile.get_sequence(sequence_id))

    async def evaluate_procedural(self, now: datetime | None = None) -> EvaluateResult:
        """Run the sequence, pattern and metric passes now (at ``now`` when given)."""
        return await self._call(EvaluateResult, lambda profile: profile.evaluate_procedural(now))

    async def list_patterns(
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
        return await self._call(
            PatternList,
            lambda profile: profile.list_patterns(
                action_type=action_type,
                target_type=target_type,
                outcome=outcome,
                since=since,
                until=until,
                include_inactive=include_inactive,
                limit=limit,
            ),
        )

    async def get_pattern(self, pattern_id: str) -> PatternWithHistory:
        """A pattern with its supersession chain."""
        return await self._call(PatternWithHistory, lambda profile: profile.get_pattern(pattern_id))

    async def annotate_pattern(self, pattern_id: str, request: AnnotateRequest) -> Pattern:
        """Set or clear an operator's note on a pattern, or suppress it."""
        return await self._call(
            Pattern, lambda profile: profile.annotate_pattern(pattern_id, request)
        )

    async def inject(self, request: InjectRequest) -> Injection:
        """The "past experience" block for an action about to be taken."""
        return await self._call(Injection, lambda profile: profile.inject(request))

    async def list_metrics(self) -> MetricList:
        return await self._call(MetricList, lambda profile: profile.list_metrics())

    async def define_metric(self, request: MetricIn) -> Metric:
        """Save a custom metric."""
        return await self._call(Metric, lambda profile: profile.define_metric(request))

    async def preview_metric(
        self, request: MetricIn, *, now: datetime | None = None
    ) -> MetricValueAt:
        """What a custom metric would measure at ``now`` (default: now), without saving it."""
        return await self._call(MetricValueAt, lambda profile: profile.preview_metric(request, now))

    async def set_metric_active(self, metric_id: str, active: bool) -> Metric:
        return await self._call(
            Metric, lambda profile: profile.set_metric_active(metric_id, active)
        )

    async def delete_metric(self, metric_id: str) -> None:
        """Delete a custom metric and its benchmark rows (a built-in cannot be deleted)."""
        await self._call(NoneType, lambda profile: profile.delete_metric(metric_id))

    async def metric_benchmark(self, metric_id: str, *, limit: int = 1000) -> MetricBenchmark:
        """A metric's benchmark rows over time, oldest first."""
        return await self._call(
            MetricBenchmark, lambda profile: profile.metric_benchmark(metric_id, limit)
        )

    async def compare_metrics(self, request: CompareRequest) -> MetricComparison:
        """Two metrics over one window, or one metric over two windows."""
        return await self._call(MetricComparison, lambda profile: profile.compare_metrics(request))

    async def list_skills(
        self,
        *,
        query: str | None = None,
        status: SkillStatus | None = "active",
        limit: int = 50,
    ) -> SkillList:
        """Skills of a status (None: all) by name, or the active ones best for ``query``."""
        return await self._call(
            SkillList,
            lambda profile: profile.list_skills(query=query, status=status, limit=limit),
        )

    async def add_skill(self, request: SkillIn) -> Skill:
        return await self._call(Skill, lambda profile: profile.add_skill(request), create=True)

    async def get_skill(self, skill_id: str) -> Skill:
        return await self._call(Skill, lambda profile: profile.get_skill(skill_id))

    async def update_skill(self, skill_id: str, request: SkillIn) -> Skill:
        return await self._call(Skill, lambda profile: profile.update_skill(skill_id, request))

    async def review_skill(self, skill_id: str, *, adopt: bool) -> Skill:
        """Adopt a candidate skill (it becomes active) or discard it."""
        return await self._call(Skill, lambda profile: profile.review_skill(skill_id, adopt))

    async def delete_skill(self, skill_id: str) -> None:
        await self._call(NoneType, lambda profile: profile.delete_skill(skill_id))

    # ------------------------------------------------ the profile as a whole

    async def activate(self) -> str:
        """Activate the profile, creating it empty if new; returns ``<tenant>/<profile>``."""
        return await self._call(str, lambda profile: profile.ping(), create=True)

    async def info(self) -> ProfileInfo:
        """The profile's counts of messages, current memories and sessions."""
        return await self._call(ProfileInfo, lambda profile: profile.info())

    async def delete(self) -> None:
        """Delete the profile's data (local and in object storage) and free its name."""
        await self._call(NoneType, lambda profile: profile.destroy())
        await self.router.wait_released(self.tenant, self.profile)

    async def wait_vectorised(self) -> None:
        """Return once every memory and message has its vector (tests, benchmarks)."""
        await self._call(NoneType, lambda profile: profile.wait_vectorised())

    # ------------------------------------------------------------ durability

    async def snapshot(self) -> SnapshotResult:
        """Write a snapshot to object storage now."""
        return await self._call(SnapshotResult, lambda profile: profile.snapshot())

    async def import_archive(self, archive: bytes) -> ImportResult:
        """Load a JSON Lines archive (gzipped or not) into this new or empty profile."""
        return await self._call(
            ImportResult, lambda profile: profile.import_archive(archive), create=True
        )

    async def export_chunks(self) -> AsyncIterator[bytes]:
        """The profile as JSON Lines, in chunks, from one consistent point in time."""
        chunks = self.router.stream(
            self.tenant,
            self.profile,
            lambda profile: profile.export_chunks(),
        )
        async for chunk in chunks:
            if not isinstance(chunk, bytes):
                raise TypeError(f"profile {self.profile!r} exported a {type(chunk).__name__}")
            yield chunk

    # ------------------------------------------- the open profile, not woken

    async def process_stats(self) -> ProcessStats | None:
        """The host process the profile is open in, and this opening of it; None when the
        profile is not open.

        Never activates the profile and does not count as use, so sampling (benchmarks,
        metrics) neither wakes a hibernated profile nor keeps an idle one awake.
        """
        host = await self.router.live_host(self.tenant, self.profile)
        if host is None:
            return None
        try:
            stats = await host.stats.remote(self.tenant, self.profile)
        except RayActorError:  # the host died since the lookup
            return None
        if stats is not None and not isinstance(stats, ProcessStats):
            raise TypeError(f"profile {self.profile!r} answered a {type(stats).__name__}")
        return stats

    async def hibernate(self) -> None:
        """Ask the open profile to hibernate once no call is in flight (nothing if not open)."""
        host = await self.router.live_host(self.tenant, self.profile)
        if host is not None:
            with contextlib.suppress(RayActorError):  # the host died: asleep already
                await host.hibernate.remote(self.tenant, self.profile)


# ---------------------------------------------------------- blocking calls


class _BackgroundLoop:
    """One event loop on a daemon thread, started on first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(
                    target=self._loop.run_forever, name="raymem-calls", daemon=True
                ).start()
            return self._loop


_background = _BackgroundLoop()


def run_blocking(call: Coroutine[Any, Any, T]) -> T:
    """Wait for ``call`` (a ``ProfileCalls`` method's coroutine) from synchronous code.

    Usable from any thread, inside a running event loop or not: the call runs on
    a background loop shared by the process.
    """
    return asyncio.run_coroutine_threadsafe(call, _background.get()).result()
