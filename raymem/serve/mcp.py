"""Streamable-HTTP MCP at ``/mcp`` inside the Serve app, for the tenant of the bearer token.

Each request is authenticated like every API route (an invalid key is a 401
before MCP sees it); the tools then run as that key's principal through
``IngressMemoryOps``: the routes' own checks and typed ``ProfileCalls``.

The transport is stateless (no ``Mcp-Session-Id``): Serve spreads requests over
ingress replicas with no affinity, so a session held in one replica's memory would
be unknown to the next. The SDK's session manager still needs a running task
group, which ``mcp_lifespan`` provides: Serve runs the ingress app's ASGI lifespan
in each replica (startup before the replica takes requests, shutdown when it stops).
"""

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any, TypeVar

import msgspec
from mcp.server.mcpserver import Context, MCPServer
from ray.exceptions import RayActorError, RayTaskError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from raymem.actors.calls import ProfileCalls
from raymem.errors import InvalidRequest, RaymemError
from raymem.names import validate_name
from raymem.serve import http
from raymem.serve.auth import Principal
from raymem.serve.mcp_tools import (
    ActionReport,
    Ids,
    MemoryOps,
    MemoryTypes,
    Turns,
    build_mcp_server,
)
from raymem.serve.routes.base import IngressBase
from raymem.serve.routes.memories import CURSOR
from raymem.types import (
    AppendRequest,
    IngestRequest,
    IngestResult,
    MemoryErasure,
    MemoryPage,
    MemoryType,
    MemoryWithHistory,
    MessageList,
    RecallRequest,
    RecallResult,
    RememberRequest,
    Role,
    SessionEnded,
    StoredMessage,
)
from raymem.types_context import (
    Block,
    BlockList,
    BlockWrite,
    ContextRequest,
    ContextResult,
    EntryReplaceRequest,
    EntryRequest,
)
from raymem.types_procedural import CaptureRequest, CaptureResult, Injection, InjectRequest

T = TypeVar("T")
IngressGetter = Callable[[], IngressBase]  # the replica's ingress, at request time
OPS_KEY = "raymem.mcp_ops"  # the ASGI scope key where the endpoint leaves a request's MemoryOps


class ProfileUnavailable(RaymemError):
    status = 503
    code = "unavailable"


def _request(kind: type[T], fields: dict[str, Any]) -> T:
    """A request Struct validated as the HTTP routes validate bodies (a bad field is a 400)."""
    try:
        return msgspec.convert({k: v for k, v in fields.items() if v is not None}, kind)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"Invalid request: {exc}") from None


class IngressMemoryOps:
    """``MemoryOps`` for one principal, with the routes' checks and their typed ``ProfileCalls``.

    Each operation checks its input as its HTTP route does, then makes the same
    ``ProfileCalls`` call within the key's cap on requests in flight (``_calls``).
    """

    def __init__(self, ingress: IngressBase, principal: Principal) -> None:
        self._ingress = ingress
        self._principal = principal
        self._limits = ingress.limits

    @contextlib.asynccontextmanager
    async def _calls(self, profile: str, *, write: bool) -> AsyncIterator[ProfileCalls]:
        """The profile's calls once the key may use it; a failed actor call raises our error."""
        validate_name(profile)
        self._principal.check(profile, write=write)
        with self._ingress._calls(self._principal, profile) as calls:
            try:
                yield calls
            except RayTaskError as exc:
                if isinstance(exc.cause, RaymemError):
                    raise exc.cause from None
                raise
            except RayActorError:
                raise ProfileUnavailable("The profile is restarting; retry") from None

    async def recall(
        self,
        profile: str,
        query: str,
        *,
        limit: int,
        types: MemoryTypes,
        session_id: str | None,
        synthesize: bool,
        as_of: datetime | None,
    ) -> RecallResult:
        fields = {
            "query": query,
            "limit": limit,
            "types": types,
            "session_id": session_id,
            "synthesize": synthesize,
            "as_of": as_of,
        }
        body = _request(RecallRequest, fields)
        http.check_recall_limits(body, self._limits)
        async with self._calls(profile, write=False) as calls:
            return await calls.recall(body)

    async def remember(
        self,
        profile: str,
        content: str,
        *,
        type: MemoryType | None,
        importance: float | None,
        session_id: str | None,
    ) -> MemoryWithHistory:
        body = _request(
            RememberRequest,
            {"content": content, "type": type, "importance": importance, "session_id": session_id},
        )
        http.check_content(body.content, self._limits)
        memory_id = uuid.uuid4().hex  # chosen here so a retried call cannot write twice
        async with self._calls(profile, write=True) as calls:
            return await calls.remember(body, memory_id)

    async def forget(self, profile: str, memory_id: str) -> None:
        async with self._calls(profile, write=True) as calls:
            await calls.forget(memory_id)

    async def list(
        self,
        profile: str,
        *,
        types: MemoryTypes,
        session_id: str | None,
        include_superseded: bool,
        limit: int,
        cursor: str | None,
    ) -> MemoryPage:
        http.check_limit(limit, self._limits)
        if session_id is not None:
            validate_name(session_id, "session")
        if cursor is not None and not CURSOR.fullmatch(cursor):
            raise InvalidRequest(
                f"Invalid cursor {cursor[:40]!r}: pass the next_cursor of a previous page"
            )
        async with self._calls(profile, write=False) as calls:
            return await calls.list_memories(
                types=types,
                session_id=session_id,
                include_superseded=include_superseded,
                limit=limit,
                before_seq=None if cursor is None else int(cursor),
            )

    async def get(self, profile: str, memory_id: str) -> MemoryWithHistory:
        async with self._calls(profile, write=False) as calls:
            return await calls.get_memory(memory_id)

    async def ingest(self, profile: str, messages: Turns, *, session_id: str) -> IngestResult:
        body = _request(IngestRequest, {"session_id": session_id, "messages": messages})
        http.check_ingest_limits(body, self._limits)
        async with self._calls(profile, write=True) as calls:
            return await calls.ingest(body)

    async def append(
        self, profile: str, session_id: str, role: Role, content: str
    ) -> StoredMessage:
        validate_name(session_id, "session")
        body = _request(AppendRequest, {"role": role, "content": content})
        http.check_content(body.content, self._limits)
        async with self._calls(profile, write=True) as calls:
            return await calls.append_message(session_id, body)

    async def last(self, profile: str, session_id: str, n: int | None) -> MessageList:
        validate_name(session_id, "session")
        async with self._calls(profile, write=False) as calls:
            return await calls.last_messages(session_id, n)

    async def end(self, profile: str, session_id: str) -> SessionEnded:
        validate_name(session_id, "session")
        async with self._calls(profile, write=True) as calls:
            return await calls.end_session(session_id)

    async def erase(self, profile: str, memory_id: str) -> MemoryErasure:
        async with self._calls(profile, write=True) as calls:
            return await calls.erase_memory(memory_id)

    async def context(
        self,
        profile: str,
        query: str,
        *,
        session_id: str | None,
        budget_tokens: int | None,
        as_of: datetime | None,
    ) -> ContextResult:
        fields = {
            "query": query,
            "session_id": session_id,
            "budget_tokens": budget_tokens,
            "as_of": as_of,
        }
        body = _request(ContextRequest, fields)
        if len(body.query) > self._limits.max_query_chars:
            raise InvalidRequest(
                f"Query of {len(body.query)} characters exceeds the limit of"
                f" {self._limits.max_query_chars} - at `$.query`"
            )
        http.check_time(body.as_of, "$.as_of")
        async with self._calls(profile, write=False) as calls:
            return await calls.context(body)

    async def blocks(self, profile: str) -> BlockList:
        async with self._calls(profile, write=False) as calls:
            return await calls.list_blocks()

    async def block_add(self, profile: str, block: str, content: str) -> BlockWrite:
        validate_name(block, "block")
        body = _request(EntryRequest, {"content": content})
        http.check_content(body.content, self._limits)
        async with self._calls(profile, write=True) as calls:
            return await calls.add_block_entry(block, body.content)

    async def block_replace(self, profile: str, block: str, old: str, new: str) -> BlockWrite:
        validate_name(block, "block")
        body = _request(EntryReplaceRequest, {"old": old, "new": new})
        http.check_content(body.old, self._limits, "$.old")
        http.check_content(body.new, self._limits, "$.new")
        async with self._calls(profile, write=True) as calls:
            return await calls.replace_block_entry(block, body.old, body.new)

    async def block_remove(self, profile: str, block: str, content: str) -> Block:
        validate_name(block, "block")
        body = _request(EntryRequest, {"content": content})
        http.check_content(body.content, self._limits)
        async with self._calls(profile, write=True) as calls:
            return await calls.remove_block_entry(block, body.content)

    async def record_action(self, profile: str, action: ActionReport) -> CaptureResult:
        body = _request(CaptureRequest, {"actions": [dict(action)]})
        async with self._calls(profile, write=True) as calls:
            return await calls.capture_actions(body)

    async def advise(
        self,
        profile: str,
        *,
        action_type: str,
        target_type: str,
        target_ids: Ids,
        session_id: str | None,
    ) -> Injection:
        fields = {
            "action_type": action_type,
            "target_type": target_type,
            "target_ids": target_ids,
            "session_id": session_id,
        }
        body = _request(InjectRequest, fields)
        # A session records the advice given: a write, as for the HTTP route.
        async with self._calls(profile, write=session_id is not None) as calls:
            return await calls.inject(body)


def _ops_for(ctx: Context) -> MemoryOps:
    """The operations ``McpEndpoint`` prepared for the HTTP request that carried this call."""
    request = ctx.request_context.request
    assert isinstance(request, Request), "raymem's MCP tools run over HTTP here"
    return request.scope[OPS_KEY]  # type: ignore[no-any-return]


def _server(scope: Scope) -> MCPServer:
    return scope["app"].state.raymem_mcp  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def mcp_lifespan(app: Any) -> AsyncIterator[None]:
    """Build this replica's MCP server and run its session manager for the replica's life."""
    server = build_mcp_server(_ops_for)
    # Creates server.session_manager; the Starlette app it returns is not used.
    server.streamable_http_app(stateless_http=True, json_response=True)
    app.state.raymem_mcp = server
    async with server.session_manager.run():
        yield


class McpEndpoint:
    """ASGI endpoint for ``/mcp``: authenticate, then hand the request to the SDK's transport."""

    def __init__(self, ingress: IngressGetter) -> None:
        self._ingress = ingress

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ingress = self._ingress()
        try:
            principal = ingress.auth.authenticate(Request(scope).headers.get("authorization"))
        except RaymemError as exc:
            await http.response_for(exc)(scope, receive, send)
            return
        scope[OPS_KEY] = IngressMemoryOps(ingress, principal)  # per request, never shared
        await _server(scope).session_manager.handle_request(scope, receive, send)
