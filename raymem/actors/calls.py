"""The typed interface of a profile: one async method per operation of its actor.

Everything that calls a profile actor goes through ``ProfileCalls``: the HTTP
ingress, the in-cluster ``raymem.get_profile`` (``actors/local.py``), tests and
benchmarks. Each method makes one explicit actor call
(``actor.recall.remote(...)``) and checks the type of the answer, so a caller
gets what the signature says; ``ProfileRouter`` activates the actor, caches
its handle and retries after hibernation.

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

from raymem.actors.profile import ProcessStats
from raymem.actors.registry import ActorHandle, ProfileRouter
from raymem.types import (
    AppendRequest,
    ImportResult,
    IngestRequest,
    IngestResult,
    MemoryErasure,
    MemoryPage,
    MemoryType,
    MemoryWithHistory,
    MessageList,
    ProfileInfo,
    RecallRequest,
    RecallResult,
    RememberRequest,
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
        invoke: Callable[[ActorHandle], Awaitable[object]],
        *,
        create: bool = False,
    ) -> T:
        result = await self.router.call(self.tenant, self.profile, invoke, create=create)
        if not isinstance(result, returns):
            raise TypeError(
                f"profile {self.profile!r} answered a {type(result).__name__},"
                f" not a {returns.__name__}"
            )
        return result

    # -------------------------------------------------------------- memories

    async def ingest(self, request: IngestRequest) -> IngestResult:
        """Store a conversation and extract memories from it."""
        return await self._call(
            IngestResult, lambda actor: actor.ingest.remote(request), create=True
        )

    async def remember(self, request: RememberRequest, memory_id: str) -> MemoryWithHistory:
        """Remember one thing under ``memory_id`` (chosen by the caller: a retry writes once)."""
        return await self._call(
            MemoryWithHistory,
            lambda actor: actor.remember.remote(request, memory_id),
            create=True,
        )

    async def recall(
        self, request: RecallRequest, query_vector: np.ndarray | None = None
    ) -> RecallResult:
        """Recall; ``query_vector`` when the caller has embedded the query already."""
        return await self._call(
            RecallResult, lambda actor: actor.recall.remote(request, query_vector)
        )

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
            lambda actor: actor.list_memories.remote(
                types=types,
                session_id=session_id,
                include_superseded=include_superseded,
                limit=limit,
                before_seq=before_seq,
            ),
        )

    async def get_memory(self, memory_id: str) -> MemoryWithHistory:
        return await self._call(MemoryWithHistory, lambda actor: actor.get_memory.remote(memory_id))

    async def forget(self, memory_id: str) -> None:
        await self._call(NoneType, lambda actor: actor.forget.remote(memory_id))

    async def erase_memory(self, memory_id: str) -> MemoryErasure:
        """Erase the memory, the turns it was drawn from and the memories drawn from those."""
        return await self._call(MemoryErasure, lambda actor: actor.erase_memory.remote(memory_id))

    # -------------------------------------------------------------- sessions

    async def append_message(self, session_id: str, request: AppendRequest) -> StoredMessage:
        return await self._call(
            StoredMessage,
            lambda actor: actor.append_message.remote(session_id, request),
            create=True,
        )

    async def last_messages(self, session_id: str, last: int | None = None) -> MessageList:
        """The session's turns, oldest first; the ``last`` ones only when given."""
        return await self._call(
            MessageList, lambda actor: actor.last_messages.remote(session_id, last)
        )

    async def list_sessions(self) -> SessionList:
        return await self._call(SessionList, lambda actor: actor.list_sessions.remote())

    async def end_session(self, session_id: str) -> SessionEnded:
        """End the session and consolidate it into long-term memories."""
        return await self._call(SessionEnded, lambda actor: actor.end_session.remote(session_id))

    async def delete_session(self, session_id: str) -> SessionDeleted:
        """Erase the session: its turns, its memories and every memory drawn from its turns."""
        return await self._call(
            SessionDeleted, lambda actor: actor.delete_session.remote(session_id)
        )

    # ---------------------------------------------------- the agent's context

    async def list_blocks(self) -> BlockList:
        """The core blocks (the defaults included), with their entries in order."""
        return await self._call(BlockList, lambda actor: actor.list_blocks.remote())

    async def set_block_limit(self, name: str, limit: int) -> BlockSaved:
        """Create a block with ``limit`` characters, or change its limit."""
        return await self._call(
            BlockSaved, lambda actor: actor.set_block_limit.remote(name, limit), create=True
        )

    async def delete_block(self, name: str) -> None:
        """Delete a created block and its entries (the default blocks cannot be deleted)."""
        await self._call(NoneType, lambda actor: actor.delete_block.remote(name))

    async def add_block_entry(self, name: str, content: str) -> BlockWrite:
        """Add an entry; a normalised duplicate is a no-op that says so."""
        return await self._call(
            BlockWrite, lambda actor: actor.add_block_entry.remote(name, content), create=True
        )

    async def replace_block_entry(self, name: str, old: str, new: str) -> BlockWrite:
        """Rewrite the entry whose whole text (normalised) is ``old``."""
        return await self._call(
            BlockWrite, lambda actor: actor.replace_block_entry.remote(name, old, new)
        )

    async def remove_block_entry(self, name: str, content: str) -> Block:
        """Remove the entry whose whole text (normalised) is ``content``."""
        return await self._call(Block, lambda actor: actor.remove_block_entry.remote(name, content))

    async def open_work_item(self, request: WorkItemOpen, item_id: str) -> WorkItem:
        """Open a work item under ``item_id`` (chosen by the caller: a retry opens one)."""
        return await self._call(
            WorkItem, lambda actor: actor.open_work_item.remote(request, item_id), create=True
        )

    async def update_work_item(self, item_id: str, request: WorkItemUpdate) -> WorkItem:
        return await self._call(
            WorkItem, lambda actor: actor.update_work_item.remote(item_id, request)
        )

    async def close_work_item(self, item_id: str, outcome: str | None = None) -> ClosedWorkItem:
        """Close a work item and finalise its episode."""
        return await self._call(
            ClosedWorkItem, lambda actor: actor.close_work_item.remote(item_id, outcome)
        )

    async def get_work_item(self, item_id: str) -> WorkItem:
        return await self._call(WorkItem, lambda actor: actor.get_work_item.remote(item_id))

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
            lambda actor: actor.list_work_items.remote(
                session_id=session_id, status=status, limit=limit, before_seq=before_seq
            ),
        )

    async def working_memory(self, session_id: str | None = None) -> WorkingMemory:
        """Where the work stands: open work items, current tasks and instructions."""
        return await self._call(
            WorkingMemory, lambda actor: actor.working_memory.remote(session_id)
        )

    async def list_episodes(
        self, *, session_id: str | None = None, limit: int = 50, before_seq: int | None = None
    ) -> EpisodePage:
        """A page of episodes, newest first; ``before_seq`` is a previous page's cursor."""
        return await self._call(
            EpisodePage,
            lambda actor: actor.list_episodes.remote(
                session_id=session_id, limit=limit, before_seq=before_seq
            ),
        )

    async def get_episode(self, episode_id: str) -> Episode:
        return await self._call(Episode, lambda actor: actor.get_episode.remote(episode_id))

    async def context(
        self, request: ContextRequest, query_vector: np.ndarray | None = None
    ) -> ContextResult:
        """The assembled context; ``query_vector`` when the caller has embedded the query."""
        return await self._call(
            ContextResult, lambda actor: actor.context.remote(request, query_vector)
        )

    async def resolve_ref(self, ref: str) -> Resolved:
        """The record a ``source_ref`` names (its ``kind`` says which)."""
        return await self._call(Resolved, lambda actor: actor.resolve_ref.remote(ref))

    async def flush(self, request: FlushRequest) -> FlushResult:
        """Store what is durable in a slice of conversation (best effort)."""
        return await self._call(FlushResult, lambda actor: actor.flush.remote(request), create=True)

    # ------------------------------------------------------ procedural memory

    async def procedural_state(self) -> ProceduralState:
        """Whether procedural memory is on, and what it holds."""
        return await self._call(ProceduralState, lambda actor: actor.procedural_state.remote())

    async def set_procedural(self, enabled: bool) -> ProceduralState:
        """Turn procedural memory on or off (off keeps everything readable)."""
        return await self._call(
            ProceduralState, lambda actor: actor.set_procedural.remote(enabled), create=True
        )

    async def capture_actions(self, request: CaptureRequest) -> CaptureResult:
        """Store actions (idempotent by id); nothing while procedural memory is off."""
        return await self._call(
            CaptureResult, lambda actor: actor.capture_actions.remote(request), create=True
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
            lambda actor: actor.list_actions.remote(
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
            lambda actor: actor.list_sequences.remote(
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
            SequencePage, lambda actor: actor.search_sequences.remote(query, limit)
        )

    async def get_sequence(self, sequence_id: str) -> ActionSequence:
        return await self._call(
            ActionSequence, lambda actor: actor.get_sequence.remote(sequence_id)
        )

    async def evaluate_procedural(self, now: datetime | None = None) -> EvaluateResult:
        """Run the sequence, pattern and metric passes now (at ``now`` when given)."""
        return await self._call(EvaluateResult, lambda actor: actor.evaluate_procedural.remote(now))

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
            lambda actor: actor.list_patterns.remote(
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
        return await self._call(
            PatternWithHistory, lambda actor: actor.get_pattern.remote(pattern_id)
        )

    async def annotate_pattern(self, pattern_id: str, request: AnnotateRequest) -> Pattern:
        """Set or clear an operator's note on a pattern, or suppress it."""
        return await self._call(
            Pattern, lambda actor: actor.annotate_pattern.remote(pattern_id, request)
        )

    async def inject(self, request: InjectRequest) -> Injection:
        """The "past experience" block for an action about to be taken."""
        return await self._call(Injection, lambda actor: actor.inject.remote(request))

    async def list_metrics(self) -> MetricList:
        return await self._call(MetricList, lambda actor: actor.list_metrics.remote())

    async def define_metric(self, request: MetricIn) -> Metric:
        """Save a custom metric."""
        return await self._call(Metric, lambda actor: actor.define_metric.remote(request))

    async def preview_metric(
        self, request: MetricIn, *, now: datetime | None = None
    ) -> MetricValueAt:
        """What a custom metric would measure at ``now`` (default: now), without saving it."""
        return await self._call(
            MetricValueAt, lambda actor: actor.preview_metric.remote(request, now)
        )

    async def set_metric_active(self, metric_id: str, active: bool) -> Metric:
        return await self._call(
            Metric, lambda actor: actor.set_metric_active.remote(metric_id, active)
        )

    async def delete_metric(self, metric_id: str) -> None:
        """Delete a custom metric and its benchmark rows (a built-in cannot be deleted)."""
        await self._call(NoneType, lambda actor: actor.delete_metric.remote(metric_id))

    async def metric_benchmark(self, metric_id: str, *, limit: int = 1000) -> MetricBenchmark:
        """A metric's benchmark rows over time, oldest first."""
        return await self._call(
            MetricBenchmark, lambda actor: actor.metric_benchmark.remote(metric_id, limit)
        )

    async def compare_metrics(self, request: CompareRequest) -> MetricComparison:
        """Two metrics over one window, or one metric over two windows."""
        return await self._call(
            MetricComparison, lambda actor: actor.compare_metrics.remote(request)
        )

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
            lambda actor: actor.list_skills.remote(query=query, status=status, limit=limit),
        )

    async def add_skill(self, request: SkillIn) -> Skill:
        return await self._call(Skill, lambda actor: actor.add_skill.remote(request), create=True)

    async def get_skill(self, skill_id: str) -> Skill:
        return await self._call(Skill, lambda actor: actor.get_skill.remote(skill_id))

    async def update_skill(self, skill_id: str, request: SkillIn) -> Skill:
        return await self._call(Skill, lambda actor: actor.update_skill.remote(skill_id, request))

    async def review_skill(self, skill_id: str, *, adopt: bool) -> Skill:
        """Adopt a candidate skill (it becomes active) or discard it."""
        return await self._call(Skill, lambda actor: actor.review_skill.remote(skill_id, adopt))

    async def delete_skill(self, skill_id: str) -> None:
        await self._call(NoneType, lambda actor: actor.delete_skill.remote(skill_id))

    # ------------------------------------------------ the profile as a whole

    async def activate(self) -> str:
        """Activate the profile, creating it empty if new; returns its actor's name."""
        return await self._call(str, lambda actor: actor.ping.remote(), create=True)

    async def info(self) -> ProfileInfo:
        """The profile's counts of messages, current memories and sessions."""
        return await self._call(ProfileInfo, lambda actor: actor.info.remote())

    async def delete(self) -> None:
        """Delete the profile's data (local and in object storage) and free its name."""
        await self._call(NoneType, lambda actor: actor.destroy.remote())
        await self.router.wait_released(self.tenant, self.profile)

    async def wait_vectorised(self) -> None:
        """Return once every memory and message has its vector (tests, benchmarks)."""
        await self._call(NoneType, lambda actor: actor.wait_vectorised.remote())

    # ------------------------------------------------------------ durability

    async def snapshot(self) -> SnapshotResult:
        """Write a snapshot to object storage now."""
        return await self._call(SnapshotResult, lambda actor: actor.snapshot.remote())

    async def import_archive(self, archive: bytes) -> ImportResult:
        """Load a JSON Lines archive (gzipped or not) into this new or empty profile."""
        return await self._call(
            ImportResult, lambda actor: actor.import_archive.remote(archive), create=True
        )

    async def export_chunks(self) -> AsyncIterator[bytes]:
        """The profile as JSON Lines, in chunks, from one consistent point in time."""
        chunks = self.router.stream(
            self.tenant,
            self.profile,
            lambda actor: actor.export_chunks.options(num_returns="streaming").remote(),
        )
        async for chunk in chunks:
            if not isinstance(chunk, bytes):
                raise TypeError(f"profile {self.profile!r} exported a {type(chunk).__name__}")
            yield chunk

    # --------------------------------------------- the live actor, not woken

    async def process_stats(self) -> ProcessStats | None:
        """The live actor's process id and memory use; None when it is not live.

        Never activates the profile and does not count as use, so sampling (benchmarks,
        metrics) neither wakes a hibernated profile nor keeps an idle one awake.
        """
        handle = self.router.live_handle(self.tenant, self.profile)
        if handle is None:
            return None
        try:
            stats = await handle.process_stats.remote()
        except RayActorError:  # exited since the lookup
            return None
        if not isinstance(stats, ProcessStats):
            raise TypeError(f"profile {self.profile!r} answered a {type(stats).__name__}")
        return stats

    async def hibernate(self) -> None:
        """Ask the live actor to hibernate once no call is in flight (nothing if not live)."""
        handle = self.router.live_handle(self.tenant, self.profile)
        if handle is not None:
            with contextlib.suppress(RayActorError):  # exited since the lookup: asleep already
                await handle.hibernate.remote()


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
