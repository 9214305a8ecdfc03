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
    MemoryErasure,
    MemoryPage,
    MemoryType,
    MemoryWithHistory,
    MessageList,
    RecallResult,
    Role,
    SessionEnded,
    StoredMessage,
)
from raymem.types_context import Block, BlockList, BlockWrite, ContextResult
from raymem.types_procedural import CaptureResult, Injection, Outcome

INSTRUCTIONS = """\
raymem is a long-term memory service. Memories live in named profiles (for example one per \
project or per user); pass the profile's name to every tool. Call `recall` before answering \
anything that may depend on earlier work, preferences or decisions; call `remember` when the \
user states a durable fact, preference, instruction or task. A newer memory on the same topic \
supersedes the older one; `get` shows that history. `context` assembles what to put in a \
system prompt for the next turn (core blocks, open work, memories, recent turns) within a \
budget; `blocks` and `block_add` keep the always-present core facts about the user and the \
project. With procedural memory on, `action_record` reports what an action did and \
`action_advice` warns, before an action, what went wrong with such actions before."""


class Turn(TypedDict):
    """One conversation turn for ``ingest``."""

    role: Role
    content: str
    created_at: NotRequired[str]  # ISO 8601; defaults to the time it is stored


class ActionReport(TypedDict):
    """One action for ``action_record``: the fields of ``ActionIn`` a tool call gives."""

    session_id: str
    action_type: str
    target_type: str
    outcome: Outcome
    target_ids: list[str]
    error_code: NotRequired[str]
    duration_ms: NotRequired[float]
    intent: NotRequired[str]
    id: NotRequired[str]


# Aliases, because ``list`` is also a method name below.
MemoryTypes = list[MemoryType] | None
Turns = list[dict[str, Any]]
Ids = list[str]


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

    async def erase(self, profile: str, memory_id: str) -> MemoryErasure: ...

    async def context(
        self,
        profile: str,
        query: str,
        *,
        session_id: str | None,
        budget_tokens: int | None,
        as_of: datetime | None,
    ) -> ContextResult: ...

    async def blocks(self, profile: str) -> BlockList: ...

    async def block_add(self, profile: str, block: str, content: str) -> BlockWrite: ...

    async def block_replace(self, profile: str, block: str, old: str, new: str) -> BlockWrite: ...

    async def block_remove(self, profile: str, block: str, content: str) -> Block: ...

    async def record_action(self, profile: str, action: ActionReport) -> CaptureResult: ...

    async def advise(
        self,
        profile: str,
        *,
        action_type: str,
        target_type: str,
        target_ids: Ids,
        session_id: str | None,
    ) -> Injection: ...


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
BlockArg = Annotated[
    str,
    Field(
        description="The core block: 'user' (who the user is, preferences) or 'project' "
        "(the project's conventions and facts), or another block the profile created."
    ),
]
EntryArg = Annotated[
    str, Field(description="The entry's whole text (case and spacing do not matter).", min_length=1)
]
ActionTypeArg = Annotated[
    str,
    Field(description="The agent's own name for the action, e.g. a tool name: 'update_node'."),
]
TargetTypeArg = Annotated[
    str, Field(description="The kind of thing it acts on, e.g. 'node', 'file', 'table'.")
]
TargetIdsArg = Annotated[
    tuple[str, ...], Field(description="Ids of the things it acts on, e.g. ['n7'] or file paths.")
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


def _context_result(context: ContextResult) -> dict[str, Any]:
    """The context for a model: the text once, and per section the refs of what it holds."""
    return {
        "text": context.text,
        "budget_chars": context.budget_chars,
        "sections": {
            section.name: [item.source_ref for item in section.items]
            for section in context.sections
            if section.items
        },
        "dropped": context.dropped,
    }


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

    @tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    async def erase(ctx: Context, profile: ProfileArg, memory_id: MemoryIdArg) -> dict[str, Any]:
        """Erase a memory for good: its text is removed from every copy raymem keeps, together
        with the conversation turns it was drawn from and every other memory drawn from those
        turns. It cannot be undone. Call it only when the user asks for something to be deleted
        permanently (a secret, personal data); to stop using a memory call `forget`, to correct
        one `remember` the new statement. Returns how many memories and turns were erased and
        `erased_memory_ids`."""
        with _tool_errors():
            erased = await ops_for(ctx).erase(profile, memory_id)
        return _result(erased)

    @tool(annotations=READ)
    async def context(
        ctx: Context,
        profile: ProfileArg,
        query: Annotated[
            str,
            Field(
                description="What the next turn is about; default: the session's latest user turn."
            ),
        ] = "",
        session_id: Annotated[
            str | None,
            Field(description="The current session: adds its open work and recent turns."),
        ] = None,
        budget_tokens: Annotated[
            int | None,
            Field(
                description="Most tokens the text may take (estimated at ~4 characters a "
                "token); default: the server's, 8,000 characters.",
                ge=1,
                le=1_000_000,
            ),
        ] = None,
        as_of: Annotated[
            datetime | None,
            Field(description="ISO 8601 time to treat as now; default: the server's clock."),
        ] = None,
    ) -> dict[str, Any]:
        """Assemble what the agent should know for its next turn, ready to put in a system
        prompt: the core blocks (who the user is, the project's conventions), open work
        items and current tasks, the memories and past episodes relevant to `query`, and the
        session's recent turns, within `budget_tokens`. Call it at the start of a task or
        turn instead of several `recall`s. Returns `text` (markdown, never over the budget),
        `sections` (the `source_ref` of each item in each section; `mem_<id>` is a memory
        `get` shows) and `dropped` (the refs cut to fit). Memories in it are current: a
        replaced fact is left out."""
        with _tool_errors():
            assembled = await ops_for(ctx).context(
                profile, query, session_id=session_id, budget_tokens=budget_tokens, as_of=as_of
            )
        return _context_result(assembled)

    @tool(annotations=READ)
    async def blocks(ctx: Context, profile: ProfileArg) -> dict[str, Any]:
        """List the profile's core blocks: short, always-present notes that `context` puts
        first, 'user' (who the user is, how they like to work) and 'project' (conventions,
        key facts), and any the profile created. Call it to see what is there before adding
        or changing an entry. Returns `blocks`, each with `name`, `limit` and `size` in
        characters, and its `entries`."""
        with _tool_errors():
            found = await ops_for(ctx).blocks(profile)
        return _result(found)

    @tool(annotations=WRITE)
    async def block_add(
        ctx: Context,
        profile: ProfileArg,
        block: BlockArg,
        content: Annotated[
            str,
            Field(
                description="One short self-contained entry, e.g. 'Name: Dana. Prefers concise "
                "answers.'",
                min_length=1,
            ),
        ],
    ) -> dict[str, Any]:
        """Add an entry to a core block, for something that should be in front of the agent
        in every conversation (the user's name and working preferences, the project's build
        command), not for details that `remember` keeps. A block has a size limit: when the
        entry does not fit the call fails with `block_full`; then shorten or replace entries
        (`block_replace`, `block_remove`). Returns the `block` with its entries, and
        `duplicate: true` when the block already said it."""
        with _tool_errors():
            written = await ops_for(ctx).block_add(profile, block, content)
        return _result(written)

    @tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    async def block_replace(
        ctx: Context,
        profile: ProfileArg,
        block: BlockArg,
        old: EntryArg,
        new: Annotated[str, Field(description="The entry's new text.", min_length=1)],
    ) -> dict[str, Any]:
        """Rewrite one entry of a core block, when it is out of date or to make room (a
        shorter wording). `old` must be the entry's whole text as `blocks` lists it. Returns
        the `block` with its entries."""
        with _tool_errors():
            written = await ops_for(ctx).block_replace(profile, block, old, new)
        return _result(written)

    @tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    async def block_remove(
        ctx: Context, profile: ProfileArg, block: BlockArg, content: EntryArg
    ) -> dict[str, Any]:
        """Remove one entry from a core block, when it is no longer true or no longer worth
        its place. `content` must be the entry's whole text as `blocks` lists it. Returns
        the block with its remaining `entries`."""
        with _tool_errors():
            block_left = await ops_for(ctx).block_remove(profile, block, content)
        return _result(block_left)

    @tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
    async def action_record(
        ctx: Context,
        profile: ProfileArg,
        session_id: SessionArg,
        action_type: ActionTypeArg,
        target_type: TargetTypeArg,
        outcome: Annotated[
            Outcome,
            Field(
                description="success; failure (it failed); dead_end (it worked but led nowhere)."
            ),
        ],
        target_ids: TargetIdsArg = (),
        error_code: Annotated[
            str | None,
            Field(description="On failure, the error's name, e.g. 'NodeNotFoundError'."),
        ] = None,
        duration_ms: Annotated[
            float | None, Field(description="How long it took, in milliseconds.", ge=0)
        ] = None,
        intent: Annotated[
            str, Field(description="What it was for, in a few words.", max_length=500)
        ] = "",
        id: Annotated[
            str | None,
            Field(
                description="Your id for this action (letters, digits, '.', '_' or '-'), so "
                "that reporting it again stores it once; default: a new action each call."
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Report an action the agent took (a tool call, an edit, a command) and how it
        turned out, for procedural memory: raymem groups a session's actions into sequences
        and learns which actions tend to fail and what fixes them, which `action_advice`
        then tells. Call it after each significant action, failures especially. Returns
        `stored`, `duplicates` (an `id` reported before) and `ignored` (not kept because
        procedural memory is off for the profile), and the action's id in `ids`."""
        report = ActionReport(
            session_id=session_id,
            action_type=action_type,
            target_type=target_type,
            outcome=outcome,
            target_ids=list(target_ids),
        )
        if error_code is not None:
            report["error_code"] = error_code
        if duration_ms is not None:
            report["duration_ms"] = duration_ms
        if intent:
            report["intent"] = intent
        if id is not None:
            report["id"] = id
        with _tool_errors():
            result = await ops_for(ctx).record_action(profile, report)
        return _result(result)

    @tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def action_advice(
        ctx: Context,
        profile: ProfileArg,
        action_type: ActionTypeArg,
        target_type: TargetTypeArg,
        target_ids: TargetIdsArg = (),
        session_id: Annotated[
            str | None,
            Field(
                description="The current session: the advice is recorded with it, so "
                "procedural memory can tell whether it helped."
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Before taking an action, ask what past experience says about it: the failure
        patterns learnt from earlier sessions for this kind of action and target (e.g.
        "update_node on node targets failed with NodeNotFoundError in 83% of 6 sequences:
        run create_node first"). Call it before an action that has failed before or is
        costly to get wrong. Returns `text`, a ready "past experience" note (empty when
        nothing applies), and the `patterns` behind it with their `confidence`."""
        with _tool_errors():
            advice = await ops_for(ctx).advise(
                profile,
                action_type=action_type,
                target_type=target_type,
                target_ids=list(target_ids),
                session_id=session_id,
            )
        return _result(advice)

    return server
