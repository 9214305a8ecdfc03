"""raymem's MCP tools, written once for both transports.

The tools call a ``MemoryOps`` (a small async protocol mirroring the profile
methods of ``raymem.AsyncClient``). ``raymem mcp`` (stdio) backs it with an HTTP
client (``cli_mcp.py``); the Serve app's ``/mcp`` endpoint backs it with the
routes' checks and ``ProfileCalls`` (``serve/mcp.py``), for the tenant of the
request's bearer token. The tenant is never a tool argument. This module imports
no Ray, so ``raymem mcp`` starts without it.

Failures the caller can act on (a missing profile, an invalid name, a read-only
key) come back as MCP tool errors carrying raymem's message; anything else is
the SDK's generic "Error executing tool …", never a stack trace.
"""

import contextlib
import inspect
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Annotated, Any, NotRequired, Protocol

import msgspec
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from raymem import __version__
from raymem.errors import RaymemError
from raymem.types import (
    IngestResult,
    MemoryPage,
    MemoryType,
    MemoryWithHistory,
    MessageList,
    RecallResult,
    Role,
    SessionEnded,
    StoredMessage,
)

INSTRUCTIONS = """\
raymem is a long-term memory service. Memories live in named profiles (for example one per \
project or per user); pass the profile's name to every tool. Call `recall` before answering \
anything that may depend on earlier work, preferences or decisions; call `remember` when the \
user states a durable fact, preference, instruction or task. A newer memory on the same topic \
supersedes the older one; `get` shows that history."""


class Turn(TypedDict):
    """One conversation turn for ``ingest``."""

    role: Role
    content: str
    created_at: NotRequired[str]  # ISO 8601; defaults to the time it is stored


# Aliases, because ``list`` is also a method name below.
MemoryTypes = list[MemoryType] | None
Turns = list[dict[str, Any]]


class MemoryOps(Protocol):
    """The profile operations the tools need; an error the caller can act on is a ``RaymemError``."""

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
    ) -> RecallResult: ...

    async def remember(
        self,
        profile: str,
        content: str,
        *,
        type: MemoryType | None,
        importance: float | None,
        session_id: str | None,
    ) -> MemoryWithHistory: ...

    async def forget(self, profile: str, memory_id: str) -> None: ...

    async def list(
        self,
        profile: str,
        *,
        types: MemoryTypes,
        session_id: str | None,
        include_superseded: bool,
        limit: int,
        cursor: str | None,
    ) -> MemoryPage: ...

    async def get(self, profile: str, memory_id: str) -> MemoryWithHistory: ...

    async def ingest(self, profile: str, messages: Turns, *, session_id: str) -> IngestResult: ...

    async def append(
        self, profile: str, session_id: str, role: Role, content: str
    ) -> StoredMessage: ...

    async def last(self, profile: str, session_id: str, n: int | None) -> MessageList: ...

    async def end(self, profile: str, session_id: str) -> SessionEnded: ...


OpsForCall = Callable[[Context], MemoryOps]

ProfileArg = Annotated[
    str,
    Field(
        description="Name of the memory profile, e.g. the project or user it belongs to "
        "(letters, digits, '.', '_' or '-').",
    ),
]
SessionArg = Annotated[
    str, Field(description="Id of the conversation session (letters, digits, '.', '_' or '-').")
]
MemoryIdArg = Annotated[
    str, Field(description="A memory's `id`, as recall, list or remember gave it.")
]
TypesArg = Annotated[
    list[MemoryType] | None,
    Field(description="Only these memory types (fact, event, instruction, task); default all."),
]

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def _plain(value: Any) -> Any:
    """JSON-ready data without null fields: fewer tokens for the model to read."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _result(struct: msgspec.Struct) -> dict[str, Any]:
    return _plain(msgspec.to_builtins(struct))  # type: ignore[no-any-return]


@contextlib.contextmanager
def _tool_errors() -> Iterator[None]:
    """raymem's own errors become tool errors with their message; others stay the SDK's."""
    try:
        yield
    except RaymemError as exc:
        raise ToolError(f"{exc} ({exc.code})") from None


def build_mcp_server(ops_for: OpsForCall) -> MCPServer:
    """The MCP server with raymem's tools; ``ops_for`` gives the operations for one call."""
    server: MCPServer = MCPServer(
        "raymem", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )

    def tool(**options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """``server.tool`` with the docstring, dedented, as the description the model reads."""

        def register(function: Callable[..., Any]) -> Callable[..., Any]:
            description = inspect.cleandoc(function.__doc__ or "")
            server.add_tool(function, description=description, **options)
            return function

        return register

    @tool(annotations=READ)
    async def recall(
        ctx: Context,
        profile: ProfileArg,
        query: Annotated[
            str, Field(description="The question or topic, in natural language.", min_length=1)
        ],
        limit: Annotated[int, Field(description="How many memories at most.", ge=1, le=100)] = 10,
        types: TypesArg = None,
        session_id: Annotated[
            str | None, Field(description="Only memories from this session.")
        ] = None,
        synthesize: Annotated[
            bool, Field(description="Also write a short answer from the memories found.")
        ] = True,
        as_of: Annotated[
            datetime | None,
            Field(
                description="ISO 8601 time to treat as now for relative dates in the query "
                "('yesterday', 'last week'); default: the server's clock."
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Search a profile's long-term memory. Call it before answering anything that may
        depend on what was said, decided or preferred earlier. Returns `answer` (a short answer
        from the current facts found) and `memories`, best first: each with `id`, `type`,
        `content`, `score`, the search `channels` that found it, and for events `event_time`;
        an item of type "message" is a raw conversation turn that matched. Memories are
        current: a superseded statement is not returned as a memory, and a turn that only
        says what has since been replaced is marked `stale: true`, ranked below its
        replacement, with `superseded_by` naming the memory that holds now (see `get`)."""
        with _tool_errors():
            result = await ops_for(ctx).recall(
                profile,
                query,
                limit=limit,
                types=types,
                session_id=session_id,
                synthesize=synthesize,
                as_of=as_of,
            )
        return _result(result)

    @tool(annotations=WRITE)
    async def remember(
        ctx: Context,
        profile: ProfileArg,
        content: Annotated[
            str,
            Field(
                description="One self-contained statement, e.g. 'The user prefers pnpm over npm.'",
                min_length=1,
            ),
        ],
        type: Annotated[
            MemoryType | None,
            Field(
                description="fact, event, instruction or task; default: classified from content."
            ),
        ] = None,
        importance: Annotated[
            float | None, Field(description="0 to 1; default 0.5.", ge=0, le=1)
        ] = None,
        session_id: Annotated[
            str | None, Field(description="The session this came from, if any.")
        ] = None,
    ) -> dict[str, Any]:
        """Store one memory now, when the user states a durable fact, preference, instruction
        or task worth keeping beyond this conversation. It is recallable as soon as this
        returns. A memory on the same topic as an existing one supersedes it (the old one stays
        in its `history`). Returns the stored memory with its `id`, `type` and `topic_key`."""
        with _tool_errors():
            memory = await ops_for(ctx).remember(
                profile, content, type=type, importance=importance, session_id=session_id
            )
        return _result(memory)

    @tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    async def forget(ctx: Context, profile: ProfileArg, memory_id: MemoryIdArg) -> dict[str, Any]:
        """Forget one memory: recall stops returning it. Call it when the user says something
        is wrong or no longer true and no replacement should be remembered (to correct a memory,
        `remember` the new statement instead). Returns `{"forgotten": id}`."""
        with _tool_errors():
            await ops_for(ctx).forget(profile, memory_id)
        return {"forgotten": memory_id}

    @tool(name="list", annotations=READ)
    async def list_memories(
        ctx: Context,
        profile: ProfileArg,
        types: TypesArg = None,
        session_id: Annotated[
            str | None, Field(description="Only memories from this session.")
        ] = None,
        include_superseded: Annotated[
            bool, Field(description="Also list memories that newer ones replaced.")
        ] = False,
        limit: Annotated[int, Field(description="Page size.", ge=1, le=100)] = 20,
        cursor: Annotated[
            str | None, Field(description="`next_cursor` of the previous page.")
        ] = None,
    ) -> dict[str, Any]:
        """List a profile's memories, newest first, without a query: to review what is known,
        e.g. all open tasks (types=["task"]). Use `recall` to search. Returns `memories` and
        `next_cursor` (pass it back to get the next page; absent on the last page)."""
        with _tool_errors():
            page = await ops_for(ctx).list(
                profile,
                types=types,
                session_id=session_id,
                include_superseded=include_superseded,
                limit=limit,
                cursor=cursor,
            )
        return _result(page)

    @tool(annotations=READ)
    async def get(ctx: Context, profile: ProfileArg, memory_id: MemoryIdArg) -> dict[str, Any]:
        """Get one memory by its id, with its `history`: the chain of statements on the same
        topic, oldest first, that it superseded (or that superseded it: see `superseded_by`).
        Call it to see how a preference or decision changed over time."""
        with _tool_errors():
            memory = await ops_for(ctx).get(profile, memory_id)
        return _result(memory)

    @tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
    async def ingest(
        ctx: Context,
        profile: ProfileArg,
        session_id: SessionArg,
        messages: Annotated[
            list[Turn],
            Field(description="Turns, oldest first: {role, content, created_at?}.", min_length=1),
        ],
    ) -> dict[str, Any]:
        """Store a whole conversation (or a new part of it) and extract memories from it: facts,
        events, instructions and tasks. Call it at the end of a piece of work or when the
        context is about to be compacted. Sending the same turns again is harmless. Returns
        counts of stored and duplicate messages and of added and superseded memories, and the
        new `memory_ids`."""
        with _tool_errors():
            result = await ops_for(ctx).ingest(
                profile, [dict(turn) for turn in messages], session_id=session_id
            )
        return _result(result)

    @tool(annotations=WRITE)
    async def session_append(
        ctx: Context,
        profile: ProfileArg,
        session_id: SessionArg,
        role: Annotated[Role, Field(description="user, assistant, tool or system.")],
        content: Annotated[str, Field(description="The turn's text.", min_length=1)],
    ) -> dict[str, Any]:
        """Append one turn to a session's short-term history as the conversation goes, so it
        can be picked up later with `session_last`. No memories are extracted from it until
        `session_end`. Returns the stored turn with its `id`."""
        with _tool_errors():
            message = await ops_for(ctx).append(profile, session_id, role, content)
        return _result(message)

    @tool(annotations=READ)
    async def session_last(
        ctx: Context,
        profile: ProfileArg,
        session_id: SessionArg,
        n: Annotated[int, Field(description="How many of the latest turns.", ge=1, le=10_000)] = 20,
    ) -> dict[str, Any]:
        """The latest turns of a session, oldest first: to pick up a conversation where it was
        left. Returns `messages`, each with `role`, `content` and `created_at`."""
        with _tool_errors():
            messages = await ops_for(ctx).last(profile, session_id, n)
        return _result(messages)

    @tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
    async def session_end(
        ctx: Context, profile: ProfileArg, session_id: SessionArg
    ) -> dict[str, Any]:
        """End a session and consolidate its turns into long-term memories. Call it when a
        conversation or task is finished. Returns the session and counts of added and
        superseded memories, with the new `memory_ids`."""
        with _tool_errors():
            ended = await ops_for(ctx).end(profile, session_id)
        return _result(ended)

    return server
