"""HTTP clients: ``Client`` (blocking) and ``AsyncClient``, both over httpx.

Each operation is described once, as a ``_Call`` (method, path, body and the
type of its answer); the sync and async classes only differ in how they send
it, and have the same methods with the same parameters.

    client = raymem.Client("http://127.0.0.1:8000")
    profile = client.get_profile("my-project")
    profile.ingest([{"role": "user", "content": "Use pnpm, not npm."}], session_id="s1")
    print(profile.recall("Which package manager?").answer)
"""

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from types import NoneType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast
from urllib.parse import quote

import httpx
import msgspec

from raymem.archive_io import Destination, Progress, Source, archive_sink, read_archive
from raymem.config import ObjectStoreSettings
from raymem.names import validate_name
from raymem.types import (
    DreamAdopted,
    DreamDiff,
    DreamList,
    DreamStatus,
    ImportResult,
    IngestResult,
    MemoryErasure,
    MemoryPage,
    MemoryType,
    MemoryWithHistory,
    MessageList,
    ProfileList,
    Proposal,
    ProposalList,
    ProposalState,
    RecallResult,
    RecallType,
    ReviewMode,
    ReviewModeName,
    Role,
    SessionDeleted,
    SessionEnded,
    SessionList,
    SnapshotResult,
    StoredMessage,
)
from raymem.types_context import (
    Block,
    BlockList,
    BlockWrite,
    ClosedWorkItem,
    ContextFormat,
    ContextResult,
    Episode,
    EpisodePage,
    FlushResult,
    Resolved,
    ResolvedRef,
    WorkingMemory,
    WorkItem,
    WorkItemList,
    WorkItemOpen,
    WorkItemStatus,
    WorkItemUpdate,
)

if TYPE_CHECKING:
    from raymem.client_procedural import AsyncProceduralClient, ProceduralClient

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT_S = 60.0
DREAM_POLL_S = 0.5  # how often ``wait_dream`` asks whether a dream still runs
MessageLike = Mapping[str, Any] | msgspec.Struct

T = TypeVar("T")


class RaymemHTTPError(Exception):
    """An error response from the server: its status, machine code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(status, code, message)
        self.status, self.code, self.message = status, code, message

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


class RawBody(msgspec.Struct):
    """A request body sent as it is (an archive), not encoded as JSON."""

    data: bytes


class _Call(Generic[T]):
    """One request and the type its answer decodes to (``NoneType``: no body)."""

    def __init__(
        self,
        method: str,
        path: str,
        result: type[T],
        *,
        body: object = None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        self.method, self.path, self.result = method, path, result
        self.body, self.params = body, params

    def request_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"params": self.params}
        if isinstance(self.body, RawBody):
            kwargs["content"] = self.body.data
            kwargs["headers"] = {"Content-Type": "application/x-ndjson"}
        elif self.body is not None:
            kwargs["content"] = msgspec.json.encode(self.body)
            kwargs["headers"] = {"Content-Type": "application/json"}
        return kwargs

    def answer(self, response: httpx.Response) -> T:
        """The decoded answer; ``RaymemHTTPError`` for an error response."""
        raise_for_error(response)
        if self.result is NoneType:
            return cast(T, None)
        return msgspec.json.decode(response.content, type=self.result)


def raise_for_error(response: httpx.Response) -> None:
    """Raise ``RaymemHTTPError`` for a 4xx or 5xx response (its body must have been read)."""
    if response.status_code < 400:
        return
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "http_error", response.text[:500]
    raise RaymemHTTPError(response.status_code, code, message)


def _as_dict(message: MessageLike) -> dict[str, Any]:
    if isinstance(message, msgspec.Struct):
        return cast(dict[str, Any], msgspec.to_builtins(message))
    return dict(message)


def _without_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _segment(value: str) -> str:
    """``value`` as one path segment: ``/`` and ``.`` escaped too, so ``..`` cannot climb."""
    return quote(value, safe="").replace(".", "%2E")


def _types(type: MemoryType | Sequence[MemoryType] | None) -> list[MemoryType] | None:
    return [type] if isinstance(type, str) else None if type is None else list(type)


def _work_item_open(
    objective: str,
    session_id: str | None,
    delivery_target: str | None,
    constraints: Sequence[str],
    scope: Sequence[str],
    todos: Sequence[str],
    followups: Sequence[str],
    waits: Sequence[str],
) -> WorkItemOpen:
    return WorkItemOpen(
        objective=objective,
        session_id=session_id,
        delivery_target=delivery_target,
        constraints=list(constraints),
        scope=list(scope),
        todos=list(todos),
        followups=list(followups),
        waits=list(waits),
    )


class _Profile:
    """The calls of one profile; subclasses send them."""

    def __init__(self, name: str) -> None:
        self.name = validate_name(name, "profile")
        self._base = f"/v1/profiles/{name}"

    def _ingest(self, messages: Iterable[MessageLike], session_id: str) -> _Call[IngestResult]:
        body = {"session_id": session_id, "messages": [_as_dict(m) for m in messages]}
        return _Call("POST", f"{self._base}/ingest", IngestResult, body=body)

    def _remember(
        self,
        content: str,
        session_id: str | None,
        type: MemoryType | None,
        importance: float | None,
    ) -> _Call[MemoryWithHistory]:
        body = _without_none(
            {"content": content, "session_id": session_id, "type": type, "importance": importance}
        )
        return _Call("POST", f"{self._base}/memories", MemoryWithHistory, body=body)

    def _recall(
        self,
        query: str,
        limit: int,
        types: Sequence[RecallType] | None,
        session_id: str | None,
        synthesize: bool,
        include_messages: bool,
        as_of: datetime | None,
    ) -> _Call[RecallResult]:
        body = _without_none(
            {
                "query": query,
                "limit": limit,
                "types": None if types is None else list(types),
                "session_id": session_id,
                "synthesize": synthesize,
                "include_messages": include_messages,
                "as_of": None if as_of is None else as_of.isoformat(),
            }
        )
        return _Call("POST", f"{self._base}/recall", RecallResult, body=body)

    def _list(
        self,
        type: MemoryType | Sequence[MemoryType] | None,
        session_id: str | None,
        include_superseded: bool,
        limit: int,
        cursor: str | None,
    ) -> _Call[MemoryPage]:
        params = _without_none(
            {
                "type": _types(type),
                "session_id": session_id,
                "include_superseded": include_superseded,
                "limit": limit,
                "cursor": cursor,
            }
        )
        return _Call("GET", f"{self._base}/memories", MemoryPage, params=params)

    def _get(self, memory_id: str) -> _Call[MemoryWithHistory]:
        return _Call("GET", f"{self._base}/memories/{_segment(memory_id)}", MemoryWithHistory)

    def _forget(self, memory_id: str) -> _Call[None]:
        return _Call("DELETE", f"{self._base}/memories/{_segment(memory_id)}", NoneType)

    def _erase(self, memory_id: str) -> _Call[MemoryErasure]:
        return _Call("POST", f"{self._base}/memories/{memory_id}/erase", MemoryErasure)

    def _sessions(self) -> _Call[SessionList]:
        return _Call("GET", f"{self._base}/sessions", SessionList)

    def _delete(self) -> _Call[None]:
        return _Call("DELETE", self._base, NoneType)

    def _snapshot(self) -> _Call[SnapshotResult]:
        return _Call("POST", f"{self._base}/snapshot", SnapshotResult)

    def _import(self, archive: bytes) -> _Call[ImportResult]:
        return _Call("POST", f"{self._base}/import", ImportResult, body=RawBody(archive))

    # ------------------------------------------------- the agent's context

    def _context(
        self,
        query: str,
        session_id: str | None,
        budget_chars: int | None,
        budget_tokens: int | None,
        format: ContextFormat,
        as_of: datetime | None,
    ) -> _Call[ContextResult]:
        body = _without_none(
            {
                "query": query,
                "session_id": session_id,
                "budget_chars": budget_chars,
                "budget_tokens": budget_tokens,
                "format": format,
                "as_of": None if as_of is None else as_of.isoformat(),
            }
        )
        return _Call("POST", f"{self._base}/context", ContextResult, body=body)

    def _blocks(self) -> _Call[BlockList]:
        return _Call("GET", f"{self._base}/blocks", BlockList)

    def _set_block(self, name: str, limit: int) -> _Call[Block]:
        return _Call("PUT", f"{self._base}/blocks/{name}", Block, body={"limit": limit})

    def _delete_block(self, name: str) -> _Call[None]:
        return _Call("DELETE", f"{self._base}/blocks/{name}", NoneType)

    def _add_entry(self, block: str, content: str) -> _Call[BlockWrite]:
        path = f"{self._base}/blocks/{block}/entries"
        return _Call("POST", path, BlockWrite, body={"content": content})

    def _replace_entry(self, block: str, old: str, new: str) -> _Call[BlockWrite]:
        path = f"{self._base}/blocks/{block}/entries"
        return _Call("PUT", path, BlockWrite, body={"old": old, "new": new})

    def _remove_entry(self, block: str, content: str) -> _Call[Block]:
        path = f"{self._base}/blocks/{block}/entries"
        return _Call("DELETE", path, Block, body={"content": content})

    def _working_memory(self, session_id: str | None) -> _Call[WorkingMemory]:
        params = _without_none({"session_id": session_id})
        return _Call("GET", f"{self._base}/working-memory", WorkingMemory, params=params)

    def _open_work_item(self, request: WorkItemOpen) -> _Call[WorkItem]:
        return _Call("POST", f"{self._base}/work-items", WorkItem, body=request)

    def _update_work_item(self, item_id: str, request: WorkItemUpdate) -> _Call[WorkItem]:
        return _Call("PATCH", f"{self._base}/work-items/{item_id}", WorkItem, body=request)

    def _close_work_item(self, item_id: str, outcome: str | None) -> _Call[ClosedWorkItem]:
        path = f"{self._base}/work-items/{item_id}/close"
        return _Call("POST", path, ClosedWorkItem, body=_without_none({"outcome": outcome}))

    def _get_work_item(self, item_id: str) -> _Call[WorkItem]:
        return _Call("GET", f"{self._base}/work-items/{item_id}", WorkItem)

    def _work_items(
        self,
        session_id: str | None,
        status: WorkItemStatus | None,
        limit: int,
        cursor: str | None,
    ) -> _Call[WorkItemList]:
        params = _without_none(
            {"session_id": session_id, "status": status, "limit": limit, "cursor": cursor}
        )
        return _Call("GET", f"{self._base}/work-items", WorkItemList, params=params)

    def _episodes(
        self, session_id: str | None, limit: int, cursor: str | None
    ) -> _Call[EpisodePage]:
        params = _without_none({"session_id": session_id, "limit": limit, "cursor": cursor})
        return _Call("GET", f"{self._base}/episodes", EpisodePage, params=params)

    def _get_episode(self, episode_id: str) -> _Call[Episode]:
        return _Call("GET", f"{self._base}/episodes/{episode_id}", Episode)

    def _resolve(self, source_ref: str) -> _Call[Resolved]:
        # The answer decodes to the kind it names (ResolvedMemory, ResolvedMessage, ...).
        return _Call("GET", f"{self._base}/refs/{source_ref}", cast(type[Resolved], ResolvedRef))

    def _flush(self, messages: Iterable[MessageLike], session_id: str) -> _Call[FlushResult]:
        body = {"session_id": session_id, "messages": [_as_dict(m) for m in messages]}
        return _Call("POST", f"{self._base}/flush", FlushResult, body=body)

    def _start_dream(self, instructions: str, max_sessions: int | None) -> _Call[DreamStatus]:
        body = _without_none({"instructions": instructions, "max_sessions": max_sessions})
        return _Call("POST", f"{self._base}/dreams", DreamStatus, body=body)

    def _dreams(self) -> _Call[DreamList]:
        return _Call("GET", f"{self._base}/dreams", DreamList)

    def _dream(
        self, dream_id: str, result: type[T], action: str = "", method: str = "POST"
    ) -> _Call[T]:
        path = f"{self._base}/dreams/{dream_id}" + (f"/{action}" if action else "")
        return _Call(method, path, result)

    def _set_review_mode(self, mode: ReviewModeName, below: float | None) -> _Call[ReviewMode]:
        body = _without_none({"mode": mode, "below": below})
        return _Call("PUT", f"{self._base}/review", ReviewMode, body=body)

    def _proposals(self, state: ProposalState | None, limit: int) -> _Call[ProposalList]:
        params = _without_none({"state": state, "limit": limit})
        return _Call("GET", f"{self._base}/proposals", ProposalList, params=params)

    def _decide(self, proposal_id: str, decision: str) -> _Call[Proposal]:
        return _Call("POST", f"{self._base}/proposals/{proposal_id}/{decision}", Proposal)


class _Session:
    def __init__(self, profile: str, session_id: str) -> None:
        self.profile = profile
        self.session_id = validate_name(session_id, "session")
        self._base = f"/v1/profiles/{profile}/sessions/{session_id}"

    def _append(
        self, role: Role, content: str, created_at: datetime | None
    ) -> _Call[StoredMessage]:
        body = _without_none({"role": role, "content": content, "created_at": created_at})
        return _Call("POST", f"{self._base}/messages", StoredMessage, body=body)

    def _last(self, n: int | None) -> _Call[MessageList]:
        params = None if n is None else {"last": n}
        return _Call("GET", f"{self._base}/messages", MessageList, params=params)

    def _end(self) -> _Call[SessionEnded]:
        return _Call("POST", f"{self._base}/end", SessionEnded)

    def _delete(self) -> _Call[SessionDeleted]:
        return _Call("DELETE", self._base, SessionDeleted)


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


_HEALTH: _Call[dict[str, Any]] = _Call("GET", "/healthz", dict)
_PROFILES = _Call("GET", "/v1/profiles", ProfileList)


# ------------------------------------------------------------------ blocking


class Client:
    """A blocking client for a raymem server.

    Args:
        url: the server's address.
        token: an API key, when the server has keys configured.
        timeout: seconds to wait for each answer.
        object_store: where ``s3://`` archives are written and read (endpoint, region,
            credentials); by default boto3's usual sources (``AWS_*`` variables and files).
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        object_store: ObjectStoreSettings | None = None,
    ) -> None:
        self._http = httpx.Client(base_url=url, headers=_headers(token), timeout=timeout)
        self._object_store = object_store or ObjectStoreSettings()

    def _send(self, call: _Call[T]) -> T:
        return call.answer(self._http.request(call.method, call.path, **call.request_kwargs()))

    def get_profile(self, name: str) -> "Profile":
        """The profile ``name`` (``InvalidRequest`` for a name the server would refuse)."""
        return Profile(self, name)

    def profiles(self) -> ProfileList:
        """Your profiles, with their counts of messages, memories and sessions."""
        return self._send(_PROFILES)

    def health(self) -> dict[str, Any]:
        return self._send(_HEALTH)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Profile(_Profile):
    def __init__(self, client: Client, name: str) -> None:
        super().__init__(name)
        self._client = client

    def ingest(self, messages: Iterable[MessageLike], *, session_id: str) -> IngestResult:
        """Store a conversation's turns and extract memories from them."""
        return self._client._send(self._ingest(messages, session_id))

    def remember(
        self,
        content: str,
        *,
        session_id: str | None = None,
        type: MemoryType | None = None,
        importance: float | None = None,
    ) -> MemoryWithHistory:
        """Remember one thing now (its type is classified when not given)."""
        return self._client._send(self._remember(content, session_id, type, importance))

    def recall(
        self,
        query: str,
        *,
        limit: int = 10,
        types: Sequence[RecallType] | None = None,
        session_id: str | None = None,
        synthesize: bool = True,
        include_messages: bool = True,
        as_of: datetime | None = None,
    ) -> RecallResult:
        """What the profile knows about ``query``: an answer and the memories behind it.

        ``as_of``: "now" for the query's relative dates ("yesterday"); the server's clock
        when not given.
        """
        call = self._recall(query, limit, types, session_id, synthesize, include_messages, as_of)
        return self._client._send(call)

    def list(
        self,
        *,
        type: MemoryType | Sequence[MemoryType] | None = None,
        session_id: str | None = None,
        include_superseded: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> MemoryPage:
        """A page of memories, newest first; pass ``next_cursor`` for the next page."""
        call = self._list(type, session_id, include_superseded, limit, cursor)
        return self._client._send(call)

    def get(self, memory_id: str) -> MemoryWithHistory:
        return self._client._send(self._get(memory_id))

    def forget(self, memory_id: str) -> None:
        """Hide a memory from recall and listings; its text stays (see ``erase``)."""
        self._client._send(self._forget(memory_id))

    def erase(self, memory_id: str) -> MemoryErasure:
        """Remove a memory's text from every copy: the memory, the turns it was drawn from
        and every memory drawn from those turns. A retry after a 503 finishes the job."""
        return self._client._send(self._erase(memory_id))

    def sessions(self) -> SessionList:
        return self._client._send(self._sessions())

    def session(self, session_id: str) -> "SessionClient":
        """The session ``session_id`` (``InvalidRequest`` for a name the server would refuse)."""
        return SessionClient(self._client, self.name, session_id)

    @property
    def procedural(self) -> "ProceduralClient":
        """Procedural memory: actions, sequences, patterns, injection, metrics, skills."""
        from raymem.client_procedural import ProceduralClient  # it builds on this module

        return ProceduralClient(self._client, self.name)

    def delete(self) -> None:
        """Delete the profile and all its data."""
        self._client._send(self._delete())

    def snapshot(self) -> SnapshotResult:
        """Write a snapshot of the profile to the server's object storage."""
        return self._client._send(self._snapshot())

    def export(self, destination: Destination, progress: Progress | None = None) -> int:
        """Save the whole profile as JSON Lines to a path (gzipped if it ends in .gz),
        an ``s3://bucket/key`` URL, or a binary stream. Returns the size of what was written
        (compressed, for .gz)."""
        with (
            archive_sink(destination, self._client._object_store) as sink,
            self._client._http.stream("GET", f"{self._base}/export") as response,
        ):
            if response.status_code >= 400:
                response.read()
                raise_for_error(response)
            for chunk in response.iter_bytes():
                sink.write(chunk)
                if progress is not None:
                    progress(len(chunk))
        return sink.written

    def import_archive(self, source: Source) -> ImportResult:
        """Load an archive (a path, an ``s3://`` URL, bytes or a stream) into this new or
        empty profile."""
        archive = read_archive(source, self._client._object_store)
        return self._client._send(self._import(archive))

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
        """A prompt-ready context for ``query`` (default: the session's latest user turn):
        core blocks, working memory, memories, episodes and recent turns, whose ``text``
        never passes the budget (characters, or tokens at the configured estimate)."""
        call = self._context(query, session_id, budget_chars, budget_tokens, format, as_of)
        return self._client._send(call)

    def blocks(self) -> BlockList:
        """The core blocks with their entries, the defaults ``user`` and ``project`` included."""
        return self._client._send(self._blocks())

    def set_block(self, name: str, *, limit: int) -> Block:
        """Create a block of ``limit`` characters, or change a block's limit."""
        return self._client._send(self._set_block(name, limit))

    def delete_block(self, name: str) -> None:
        """Delete a created block with its entries (a default block cannot be deleted)."""
        self._client._send(self._delete_block(name))

    def add_block_entry(self, block: str, content: str) -> BlockWrite:
        """Add an entry; ``duplicate`` when the block says it already (case and spacing
        aside); a ``RaymemHTTPError`` 409 ``block_full`` when it does not fit."""
        return self._client._send(self._add_entry(block, content))

    def replace_block_entry(self, block: str, *, old: str, new: str) -> BlockWrite:
        """Rewrite the entry whose whole text is ``old`` (case and spacing aside)."""
        return self._client._send(self._replace_entry(block, old, new))

    def remove_block_entry(self, block: str, content: str) -> Block:
        """Remove the entry whose whole text is ``content`` (case and spacing aside)."""
        return self._client._send(self._remove_entry(block, content))

    def working_memory(self, *, session_id: str | None = None) -> WorkingMemory:
        """Open work items and current tasks and instructions (a session's, when given)."""
        return self._client._send(self._working_memory(session_id))

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
        """Open a work item: its objective, target, limits, plan, follow-ups and waits."""
        request = _work_item_open(
            objective, session_id, delivery_target, constraints, scope, todos, followups, waits
        )
        return self._client._send(self._open_work_item(request))

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
        """Change an open work item; todos, follow-ups and waits are named by their text."""
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
        return self._client._send(self._update_work_item(item_id, request))

    def close_work_item(self, item_id: str, *, outcome: str | None = None) -> ClosedWorkItem:
        """Close a work item; its episode is finalised and returned with it."""
        return self._client._send(self._close_work_item(item_id, outcome))

    def get_work_item(self, item_id: str) -> WorkItem:
        return self._client._send(self._get_work_item(item_id))

    def work_items(
        self,
        *,
        session_id: str | None = None,
        status: WorkItemStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> WorkItemList:
        """A page of work items, newest first; pass ``next_cursor`` for the next page."""
        return self._client._send(self._work_items(session_id, status, limit, cursor))

    def episodes(
        self, *, session_id: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> EpisodePage:
        """A page of episodes, newest first; pass ``next_cursor`` for the next page."""
        return self._client._send(self._episodes(session_id, limit, cursor))

    def get_episode(self, episode_id: str) -> Episode:
        return self._client._send(self._get_episode(episode_id))

    def resolve(self, source_ref: str) -> Resolved:
        """The record a ``source_ref`` names; its class and ``kind`` say which."""
        return self._client._send(self._resolve(source_ref))

    def flush(self, messages: Iterable[MessageLike], *, session_id: str) -> FlushResult:
        """Store what is durable in turns about to be compacted; best effort (``error``
        says what failed; the call itself does not fail for it)."""
        return self._client._send(self._flush(messages, session_id))

    # ------------------------------------------------------------ dreams

    def start_dream(
        self, *, instructions: str = "", max_sessions: int | None = None
    ) -> DreamStatus:
        """Start re-organising the profile into a candidate for review (runs in the background).

        ``instructions``: what to focus on, in plain text; ``max_sessions``: how many
        recent sessions to read (the server's bound by default).
        """
        return self._client._send(self._start_dream(instructions, max_sessions))

    def dreams(self) -> DreamList:
        """The profile's latest dreams, newest first."""
        return self._client._send(self._dreams())

    def dream_status(self, dream_id: str) -> DreamStatus:
        """A dream's state, progress and counts."""
        return self._client._send(self._dream(dream_id, DreamStatus, method="GET"))

    def wait_dream(self, dream_id: str, *, timeout_s: float = 600.0) -> DreamStatus:
        """Poll until the dream no longer runs (ready, failed, ...); TimeoutError after
        ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while (dream := self.dream_status(dream_id)).state == "running":
            if time.monotonic() > deadline:
                raise TimeoutError(f"dream {dream_id} still runs after {timeout_s} s")
            time.sleep(DREAM_POLL_S)
        return dream

    def dream_diff(self, dream_id: str) -> DreamDiff:
        """Every change a ready (or adopted) dream makes, with its reason and evidence."""
        return self._client._send(self._dream(dream_id, DreamDiff, "diff", "GET"))

    def adopt_dream(self, dream_id: str) -> DreamAdopted:
        """Apply a ready dream to the profile; writes made meanwhile stay."""
        return self._client._send(self._dream(dream_id, DreamAdopted, "adopt"))

    def discard_dream(self, dream_id: str) -> DreamStatus:
        """Delete a ready dream's candidate; the profile stays as it is."""
        return self._client._send(self._dream(dream_id, DreamStatus, "discard"))

    def cancel_dream(self, dream_id: str) -> DreamStatus:
        """Stop a running dream and delete its candidate."""
        return self._client._send(self._dream(dream_id, DreamStatus, "cancel"))

    # ------------------------------------------------------ review queue

    def review_mode(self) -> ReviewMode:
        return self._client._send(_Call("GET", f"{self._base}/review", ReviewMode))

    def set_review_mode(self, mode: ReviewModeName, *, below: float | None = None) -> ReviewMode:
        """``review``: supersessions and merges under ``below`` confidence wait as proposals."""
        return self._client._send(self._set_review_mode(mode, below))

    def proposals(self, *, state: ProposalState | None = None, limit: int = 100) -> ProposalList:
        """Proposals waiting for (or given) a decision, oldest first."""
        return self._client._send(self._proposals(state, limit))

    def approve_proposal(self, proposal_id: str) -> Proposal:
        """Make the change a proposal holds."""
        return self._client._send(self._decide(proposal_id, "approve"))

    def reject_proposal(self, proposal_id: str) -> Proposal:
        """Leave both memories of a proposal as they are."""
        return self._client._send(self._decide(proposal_id, "reject"))


class SessionClient(_Session):
    def __init__(self, client: Client, profile: str, session_id: str) -> None:
        super().__init__(profile, session_id)
        self._client = client

    def append(
        self, role: Role, content: str, *, created_at: datetime | None = None
    ) -> StoredMessage:
        """Add one turn to the session (``created_at``: when it was said; default now)."""
        return self._client._send(self._append(role, content, created_at))

    def last(self, n: int | None = None) -> MessageList:
        """The session's turns, oldest first; the last ``n`` only when given."""
        return self._client._send(self._last(n))

    def end(self) -> SessionEnded:
        """End the session and consolidate it into long-term memories."""
        return self._client._send(self._end())

    def delete(self) -> SessionDeleted:
        """Delete the session's turns and forget the memories derived from it."""
        return self._client._send(self._delete())


# --------------------------------------------------------------------- async


class AsyncClient:
    """The same surface as ``Client``, awaited."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        object_store: ObjectStoreSettings | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(base_url=url, headers=_headers(token), timeout=timeout)
        self._object_store = object_store or ObjectStoreSettings()

    async def _send(self, call: _Call[T]) -> T:
        response = await self._http.request(call.method, call.path, **call.request_kwargs())
        return call.answer(response)

    def get_profile(self, name: str) -> "AsyncProfile":
        """The profile ``name`` (``InvalidRequest`` for a name the server would refuse)."""
        return AsyncProfile(self, name)

    async def profiles(self) -> ProfileList:
        """Your profiles, with their counts of messages, memories and sessions."""
        return await self._send(_PROFILES)

    async def health(self) -> dict[str, Any]:
        return await self._send(_HEALTH)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncProfile(_Profile):
    def __init__(self, client: AsyncClient, name: str) -> None:
        super().__init__(name)
        self._client = client

    async def ingest(self, messages: Iterable[MessageLike], *, session_id: str) -> IngestResult:
        """Store a conversation's turns and extract memories from them."""
        return await self._client._send(self._ingest(messages, session_id))

    async def remember(
        self,
        content: str,
        *,
        session_id: str | None = None,
        type: MemoryType | None = None,
        importance: float | None = None,
    ) -> MemoryWithHistory:
        """Remember one thing now (its type is classified when not given)."""
        return await self._client._send(self._remember(content, session_id, type, importance))

    async def recall(
        self,
        query: str,
        *,
        limit: int = 10,
        types: Sequence[RecallType] | None = None,
        session_id: str | None = None,
        synthesize: bool = True,
        include_messages: bool = True,
        as_of: datetime | None = None,
    ) -> RecallResult:
        """What the profile knows about ``query``: an answer and the memories behind it.

        ``as_of``: "now" for the query's relative dates ("yesterday"); the server's clock
        when not given.
        """
        call = self._recall(query, limit, types, session_id, synthesize, include_messages, as_of)
        return await self._client._send(call)

    async def list(
        self,
        *,
        type: MemoryType | Sequence[MemoryType] | None = None,
        session_id: str | None = None,
        include_superseded: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> MemoryPage:
        """A page of memories, newest first; pass ``next_cursor`` for the next page."""
        call = self._list(type, session_id, include_superseded, limit, cursor)
        return await self._client._send(call)

    async def get(self, memory_id: str) -> MemoryWithHistory:
        return await self._client._send(self._get(memory_id))

    async def forget(self, memory_id: str) -> None:
        """Hide a memory from recall and listings; its text stays (see ``erase``)."""
        await self._client._send(self._forget(memory_id))

    async def erase(self, memory_id: str) -> MemoryErasure:
        """Remove a memory's text from every copy: the memory, the turns it was drawn from
        and every memory drawn from those turns. A retry after a 503 finishes the job."""
        return await self._client._send(self._erase(memory_id))

    async def sessions(self) -> SessionList:
        return await self._client._send(self._sessions())

    def session(self, session_id: str) -> "AsyncSessionClient":
        """The session ``session_id`` (``InvalidRequest`` for a name the server would refuse)."""
        return AsyncSessionClient(self._client, self.name, session_id)

    @property
    def procedural(self) -> "AsyncProceduralClient":
        """Procedural memory: actions, sequences, patterns, injection, metrics, skills."""
        from raymem.client_procedural import AsyncProceduralClient  # it builds on this module

        return AsyncProceduralClient(self._client, self.name)

    async def delete(self) -> None:
        """Delete the profile and all its data."""
        await self._client._send(self._delete())

    async def snapshot(self) -> SnapshotResult:
        """Write a snapshot of the profile to the server's object storage."""
        return await self._client._send(self._snapshot())

    async def export(self, destination: Destination, progress: Progress | None = None) -> int:
        """Save the whole profile as JSON Lines to a path (gzipped if it ends in .gz),
        an ``s3://bucket/key`` URL, or a binary stream. Returns the size of what was written
        (compressed, for .gz)."""
        with archive_sink(destination, self._client._object_store) as sink:
            async with self._client._http.stream("GET", f"{self._base}/export") as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise_for_error(response)
                async for chunk in response.aiter_bytes():
                    sink.write(chunk)
                    if progress is not None:
                        progress(len(chunk))
        return sink.written

    async def import_archive(self, source: Source) -> ImportResult:
        """Load an archive (a path, an ``s3://`` URL, bytes or a stream) into this new or
        empty profile."""
        archive = read_archive(source, self._client._object_store)
        return await self._client._send(self._import(archive))

    # ------------------------------------------------- the agent's context

    async def context(
        self,
        query: str = "",
        *,
        session_id: str | None = None,
        budget_chars: int | None = None,
        budget_tokens: int | None = None,
        format: ContextFormat = "markdown",
        as_of: datetime | None = None,
    ) -> ContextResult:
        """A prompt-ready context for ``query`` (default: the session's latest user turn):
        core blocks, working memory, memories, episodes and recent turns, whose ``text``
        never passes the budget (characters, or tokens at the configured estimate)."""
        call = self._context(query, session_id, budget_chars, budget_tokens, format, as_of)
        return await self._client._send(call)

    async def blocks(self) -> BlockList:
        """The core blocks with their entries, the defaults ``user`` and ``project`` included."""
        return await self._client._send(self._blocks())

    async def set_block(self, name: str, *, limit: int) -> Block:
        """Create a block of ``limit`` characters, or change a block's limit."""
        return await self._client._send(self._set_block(name, limit))

    async def delete_block(self, name: str) -> None:
        """Delete a created block with its entries (a default block cannot be deleted)."""
        await self._client._send(self._delete_block(name))

    async def add_block_entry(self, block: str, content: str) -> BlockWrite:
        """Add an entry; ``duplicate`` when the block says it already (case and spacing
        aside); a ``RaymemHTTPError`` 409 ``block_full`` when it does not fit."""
        return await self._client._send(self._add_entry(block, content))

    async def replace_block_entry(self, block: str, *, old: str, new: str) -> BlockWrite:
        """Rewrite the entry whose whole text is ``old`` (case and spacing aside)."""
        return await self._client._send(self._replace_entry(block, old, new))

    async def remove_block_entry(self, block: str, content: str) -> Block:
        """Remove the entry whose whole text is ``content`` (case and spacing aside)."""
        return await self._client._send(self._remove_entry(block, content))

    async def working_memory(self, *, session_id: str | None = None) -> WorkingMemory:
        """Open work items and current tasks and instructions (a session's, when given)."""
        return await self._client._send(self._working_memory(session_id))

    async def open_work_item(
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
        """Open a work item: its objective, target, limits, plan, follow-ups and waits."""
        request = _work_item_open(
            objective, session_id, delivery_target, constraints, scope, todos, followups, waits
        )
        return await self._client._send(self._open_work_item(request))

    async def update_work_item(
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
        """Change an open work item; todos, follow-ups and waits are named by their text."""
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
        return await self._client._send(self._update_work_item(item_id, request))

    async def close_work_item(self, item_id: str, *, outcome: str | None = None) -> ClosedWorkItem:
        """Close a work item; its episode is finalised and returned with it."""
        return await self._client._send(self._close_work_item(item_id, outcome))

    async def get_work_item(self, item_id: str) -> WorkItem:
        return await self._client._send(self._get_work_item(item_id))

    async def work_items(
        self,
        *,
        session_id: str | None = None,
        status: WorkItemStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> WorkItemList:
        """A page of work items, newest first; pass ``next_cursor`` for the next page."""
        return await self._client._send(self._work_items(session_id, status, limit, cursor))

    async def episodes(
        self, *, session_id: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> EpisodePage:
        """A page of episodes, newest first; pass ``next_cursor`` for the next page."""
        return await self._client._send(self._episodes(session_id, limit, cursor))

    async def get_episode(self, episode_id: str) -> Episode:
        return await self._client._send(self._get_episode(episode_id))

    async def resolve(self, source_ref: str) -> Resolved:
        """The record a ``source_ref`` names; its class and ``kind`` say which."""
        return await self._client._send(self._resolve(source_ref))

    async def flush(self, messages: Iterable[MessageLike], *, session_id: str) -> FlushResult:
        """Store what is durable in turns about to be compacted; best effort (``error``
        says what failed; the call itself does not fail for it)."""
        return await self._client._send(self._flush(messages, session_id))

    # ------------------------------------------------------------ dreams

    async def start_dream(
        self, *, instructions: str = "", max_sessions: int | None = None
    ) -> DreamStatus:
        """Start re-organising the profile into a candidate for review (runs in the background).

        ``instructions``: what to focus on, in plain text; ``max_sessions``: how many
        recent sessions to read (the server's bound by default).
        """
        return await self._client._send(self._start_dream(instructions, max_sessions))

    async def dreams(self) -> DreamList:
        """The profile's latest dreams, newest first."""
        return await self._client._send(self._dreams())

    async def dream_status(self, dream_id: str) -> DreamStatus:
        """A dream's state, progress and counts."""
        return await self._client._send(self._dream(dream_id, DreamStatus, method="GET"))

    async def wait_dream(self, dream_id: str, *, timeout_s: float = 600.0) -> DreamStatus:
        """Poll until the dream no longer runs (ready, failed, ...); TimeoutError after
        ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while (dream := await self.dream_status(dream_id)).state == "running":
            if time.monotonic() > deadline:
                raise TimeoutError(f"dream {dream_id} still runs after {timeout_s} s")
            await asyncio.sleep(DREAM_POLL_S)
        return dream

    async def dream_diff(self, dream_id: str) -> DreamDiff:
        """Every change a ready (or adopted) dream makes, with its reason and evidence."""
        return await self._client._send(self._dream(dream_id, DreamDiff, "diff", "GET"))

    async def adopt_dream(self, dream_id: str) -> DreamAdopted:
        """Apply a ready dream to the profile; writes made meanwhile stay."""
        return await self._client._send(self._dream(dream_id, DreamAdopted, "adopt"))

    async def discard_dream(self, dream_id: str) -> DreamStatus:
        """Delete a ready dream's candidate; the profile stays as it is."""
        return await self._client._send(self._dream(dream_id, DreamStatus, "discard"))

    async def cancel_dream(self, dream_id: str) -> DreamStatus:
        """Stop a running dream and delete its candidate."""
        return await self._client._send(self._dream(dream_id, DreamStatus, "cancel"))

    # ------------------------------------------------------ review queue

    async def review_mode(self) -> ReviewMode:
        return await self._client._send(_Call("GET", f"{self._base}/review", ReviewMode))

    async def set_review_mode(
        self, mode: ReviewModeName, *, below: float | None = None
    ) -> ReviewMode:
        """``review``: supersessions and merges under ``below`` confidence wait as proposals."""
        return await self._client._send(self._set_review_mode(mode, below))

    async def proposals(
        self, *, state: ProposalState | None = None, limit: int = 100
    ) -> ProposalList:
        """Proposals waiting for (or given) a decision, oldest first."""
        return await self._client._send(self._proposals(state, limit))

    async def approve_proposal(self, proposal_id: str) -> Proposal:
        """Make the change a proposal holds."""
        return await self._client._send(self._decide(proposal_id, "approve"))

    async def reject_proposal(self, proposal_id: str) -> Proposal:
        """Leave both memories of a proposal as they are."""
        return await self._client._send(self._decide(proposal_id, "reject"))


class AsyncSessionClient(_Session):
    def __init__(self, client: AsyncClient, profile: str, session_id: str) -> None:
        super().__init__(profile, session_id)
        self._client = client

    async def append(
        self, role: Role, content: str, *, created_at: datetime | None = None
    ) -> StoredMessage:
        """Add one turn to the session (``created_at``: when it was said; default now)."""
        return await self._client._send(self._append(role, content, created_at))

    async def last(self, n: int | None = None) -> MessageList:
        """The session's turns, oldest first; the last ``n`` only when given."""
        return await self._client._send(self._last(n))

    async def end(self) -> SessionEnded:
        """End the session and consolidate it into long-term memories."""
        return await self._client._send(self._end())

    async def delete(self) -> SessionDeleted:
        """Delete the session's turns and forget the memories derived from it."""
        return await self._client._send(self._delete())
