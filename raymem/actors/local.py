"""In-cluster access to a profile: call its actor directly, without HTTP."""

import asyncio
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec

from raymem.actors.calls import ProfileCalls, run_blocking
from raymem.actors.catalog import published_settings
from raymem.actors.local_procedural import LocalProcedural
from raymem.actors.registry import ProfileRouter
from raymem.config import Settings
from raymem.names import DEFAULT_TENANT, validate_name
from raymem.types import (
    DreamAdopted,
    DreamDiff,
    DreamList,
    DreamRequest,
    DreamStatus,
    IngestRequest,
    IngestResult,
    MemoryErasure,
    MemoryPage,
    MemoryType,
    MemoryWithHistory,
    MessageIn,
    Proposal,
    ProposalList,
    ProposalState,
    RecallRequest,
    RecallResult,
    RecallType,
    RememberRequest,
    ReviewMode,
    ReviewModeName,
)
from raymem.types_context import (
    Block,
    BlockList,
    BlockWrite,
    ClosedWorkItem,
    ContextFormat,
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

DEFAULT_NAMESPACE = Settings().namespace


class LocalProfile:
    """A profile reached through its Ray actor from code running inside the cluster.

    The blocking counterpart of ``raymem.Profile``, with the same parameters.
    """

    def __init__(self, calls: ProfileCalls) -> None:
        self._calls = calls

    @property
    def name(self) -> str:
        return self._calls.profile

    @property
    def procedural(self) -> LocalProcedural:
        """Procedural memory: actions, sequences, patterns, injection, metrics, skills."""
        return LocalProcedural(self._calls)

    def ingest(
        self, messages: Iterable[Mapping[str, Any] | MessageIn], *, session_id: str
    ) -> IngestResult:
        turns = [m if isinstance(m, MessageIn) else msgspec.convert(m, MessageIn) for m in messages]
        request = IngestRequest(session_id=session_id, messages=turns)
        return run_blocking(self._calls.ingest(request))

    def remember(
        self,
        content: str,
        *,
        session_id: str | None = None,
        type: MemoryType | None = None,
        importance: float | None = None,
    ) -> MemoryWithHistory:
        request = RememberRequest(
            content=content, session_id=session_id, type=type, importance=importance
        )
        return run_blocking(self._calls.remember(request, uuid.uuid4().hex))

    def recall(
        self,
        query: str,
        *,
        limit: int = 10,
        types: list[RecallType] | None = None,
        session_id: str | None = None,
        synthesize: bool = True,
        include_messages: bool = True,
        as_of: datetime | None = None,
    ) -> RecallResult:
        request = RecallRequest(
            query=query,
            limit=limit,
            types=types,
            session_id=session_id,
            as_of=as_of,
            synthesize=synthesize,
            include_messages=include_messages,
        )
        return run_blocking(self._calls.recall(request))

    def list(
        self,
        *,
        type: MemoryType | list[MemoryType] | None = None,
        session_id: str | None = None,
        include_superseded: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> MemoryPage:
        types = [type] if isinstance(type, str) else type
        return run_blocking(
            self._calls.list_memories(
                types=types,
                session_id=session_id,
                include_superseded=include_superseded,
                limit=limit,
                before_seq=None if cursor is None else int(cursor),
            )
        )

    def get(self, memory_id: str) -> MemoryWithHistory:
        return run_blocking(self._calls.get_memory(memory_id))

    def forget(self, memory_id: str) -> None:
        """Hide a memory from recall and listings; its text stays (see ``erase``)."""
        run_blocking(self._calls.forget(memory_id))

    def erase(self, memory_id: str) -> MemoryErasure:
        """Remove a memory's text from every copy: the memory, the turns it was drawn from
        and every memory drawn from those turns."""
        return run_blocking(self._calls.erase_memory(memory_id))

    # ------------------------------------------------- the agent's context

    def context(
        self,
        query: str = "",
        *,
        session_id: str | None = None,
        budget_chars: int | None = None,
        budget_tokens: int | None = None,
        format: ContextFormat = "markdown",
        as_of: datetime | None = None,
    ) -> ContextResult:
        request = ContextRequest(
            query=query,
            session_id=session_id,
            budget_chars=budget_chars,
            budget_tokens=budget_tokens,
            format=format,
            as_of=as_of,
        )
        return run_blocking(self._calls.context(request))

    def blocks(self) -> BlockList:
        return run_blocking(self._calls.list_blocks())

    def set_block(self, name: str, *, limit: int) -> Block:
        return run_blocking(self._calls.set_block_limit(name, limit)).block

    def delete_block(self, name: str) -> None:
        run_blocking(self._calls.delete_block(name))

    def add_block_entry(self, block: str, content: str) -> BlockWrite:
        return run_blocking(self._calls.add_block_entry(block, content))

    def replace_block_entry(self, block: str, *, old: str, new: str) -> BlockWrite:
        return run_blocking(self._calls.replace_block_entry(block, old, new))

    def remove_block_entry(self, block: str, content: str) -> Block:
        return run_blocking(self._calls.remove_block_entry(block, content))

    def working_memory(self, *, session_id: str | None = None) -> WorkingMemory:
        return run_blocking(self._calls.working_memory(session_id))

    def open_work_item(
        self,
        objective: str,
        *,
        session_id: str | None = None,
        delivery_target: str | None = None,
        constraints: Sequence[str] = (),
        scope: Sequence[str] = (),
        todos: Sequence[str] = (),
        followups: Sequence[str] = (),
        waits: Sequence[str] = (),
    ) -> WorkItem:
        request = WorkItemOpen(
            objective=objective,
            session_id=session_id,
            delivery_target=delivery_target,
            constraints=list(constraints),
            scope=list(scope),
            todos=list(todos),
            followups=list(followups),
            waits=list(waits),
        )
        return run_blocking(self._calls.open_work_item(request, uuid.uuid4().hex))

    def update_work_item(
        self,
        item_id: str,
        *,
        objective: str | None = None,
        delivery_target: str | None = None,
        constraints: Sequence[str] | None = None,
        scope: Sequence[str] | None = None,
        add_todos: Sequence[str] = (),
        check_todos: Sequence[str] = (),
        uncheck_todos: Sequence[str] = (),
        add_followups: Sequence[str] = (),
        resolve_followups: Sequence[str] = (),
        add_waits: Sequence[str] = (),
        resolve_waits: Sequence[str] = (),
    ) -> WorkItem:
        request = WorkItemUpdate(
            objective=objective,
            delivery_target=delivery_target,
            constraints=None if constraints is None else list(constraints),
            scope=None if scope is None else list(scope),
            add_todos=list(add_todos),
            check_todos=list(check_todos),
            uncheck_todos=list(uncheck_todos),
            add_followups=list(add_followups),
            resolve_followups=list(resolve_followups),
            add_waits=list(add_waits),
            resolve_waits=list(resolve_waits),
        )
        return run_blocking(self._calls.update_work_item(item_id, request))

    def close_work_item(self, item_id: str, *, outcome: str | None = None) -> ClosedWorkItem:
        return run_blocking(self._calls.close_work_item(item_id, outcome))

    def get_work_item(self, item_id: str) -> WorkItem:
        return run_blocking(self._calls.get_work_item(item_id))

    def work_items(
        self,
        *,
        session_id: str | None = None,
        status: WorkItemStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> WorkItemList:
        return run_blocking(
            self._calls.list_work_items(
                session_id=session_id,
                status=status,
                limit=limit,
                before_seq=None if cursor is None else int(cursor),
            )
        )

    def episodes(
        self, *, session_id: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> EpisodePage:
        return run_blocking(
            self._calls.list_episodes(
                session_id=session_id,
                limit=limit,
                before_seq=None if cursor is None else int(cursor),
            )
        )

    def get_episode(self, episode_id: str) -> Episode:
        return run_blocking(self._calls.get_episode(episode_id))

    def resolve(self, source_ref: str) -> Resolved:
        return run_blocking(self._calls.resolve_ref(source_ref))

    def flush(
        self, messages: Iterable[Mapping[str, Any] | MessageIn], *, session_id: str
    ) -> FlushResult:
        turns = [m if isinstance(m, MessageIn) else msgspec.convert(m, MessageIn) for m in messages]
        return run_blocking(self._calls.flush(FlushRequest(session_id=session_id, messages=turns)))

    # ------------------------------------------------------------ dreams

    def start_dream(
        self, *, instructions: str = "", max_sessions: int | None = None
    ) -> DreamStatus:
        request = DreamRequest(instructions=instructions, max_sessions=max_sessions)
        return run_blocking(self._calls.start_dream(request))

    def dreams(self) -> DreamList:
        return run_blocking(self._calls.list_dreams())

    def dream_status(self, dream_id: str) -> DreamStatus:
        return run_blocking(self._calls.dream_status(dream_id))

    def wait_dream(self, dream_id: str, *, timeout_s: float = 600.0) -> DreamStatus:
        """Return once the dream no longer runs (ready, failed, ...); TimeoutError after
        ``timeout_s``."""
        return run_blocking(asyncio.wait_for(self._calls.wait_dream(dream_id), timeout_s))

    def dream_diff(self, dream_id: str) -> DreamDiff:
        return run_blocking(self._calls.dream_diff(dream_id))

    def adopt_dream(self, dream_id: str) -> DreamAdopted:
        return run_blocking(self._calls.adopt_dream(dream_id))

    def discard_dream(self, dream_id: str) -> DreamStatus:
        return run_blocking(self._calls.discard_dream(dream_id))

    def cancel_dream(self, dream_id: str) -> DreamStatus:
        return run_blocking(self._calls.cancel_dream(dream_id))

    # ------------------------------------------------------ review queue

    def review_mode(self) -> ReviewMode:
        return run_blocking(self._calls.review_mode())

    def set_review_mode(self, mode: ReviewModeName, *, below: float | None = None) -> ReviewMode:
        return run_blocking(self._calls.set_review_mode(mode, below=below))

    def proposals(self, *, state: ProposalState | None = None, limit: int = 100) -> ProposalList:
        return run_blocking(self._calls.list_proposals(state=state, limit=limit))

    def approve_proposal(self, proposal_id: str) -> Proposal:
        return run_blocking(self._calls.approve_proposal(proposal_id))

    def reject_proposal(self, proposal_id: str) -> Proposal:
        return run_blocking(self._calls.reject_proposal(proposal_id))


class AppNotRunning(RuntimeError):
    """No raymem app has published its settings in the Ray namespace asked for."""

    def __init__(self, namespace: str) -> None:
        super().__init__(namespace)
        self.namespace = namespace

    def __str__(self) -> str:
        return (
            f"No raymem app runs in Ray namespace {self.namespace!r} of this cluster: start one"
            " (raymem serve), name its namespace, or pass settings="
        )


def get_profile(
    name: str,
    *,
    tenant: str = DEFAULT_TENANT,
    namespace: str = DEFAULT_NAMESPACE,
    settings: Settings | None = None,
) -> LocalProfile:
    """A profile of the raymem app running on the current Ray cluster (``ray.init`` first).

    Args:
        name: the profile name.
        tenant: whose profile; in-cluster code is trusted to name it.
        namespace: the Ray namespace the app runs in (its ``namespace`` setting).
        settings: the service's settings; by default those the app published, so that
            profiles open as the server opens them, whatever this process's directory.

    Raises:
        InvalidRequest: ``name`` is not a valid profile name.
        AppNotRunning: no settings given, and no app published any in ``namespace``.
    """
    validate_name(name)
    if settings is None:
        settings = published_settings(namespace)
        if settings is None:
            raise AppNotRunning(namespace)
    return LocalProfile(ProfileCalls(ProfileRouter(settings), tenant, name))
