"""``raymem mcp``: an MCP server on stdio for a coding agent, talking to a raymem server.

The agent starts it as a subprocess; each tool call becomes one HTTP request to
the server named by ``--url`` / ``$RAYMEM_URL``, authenticated by ``--token`` /
``$RAYMEM_TOKEN`` (so the key decides the tenant, as for every client).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

import anyio
import click
import httpx

from raymem.cli_common import client_options
from raymem.client import AsyncClient, AsyncProfile, AsyncSessionClient, RaymemHTTPError
from raymem.errors import InvalidRequest, RaymemError
from raymem.types import (
    NAME_PATTERN,
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
from raymem.types_procedural import ActionIn, CaptureResult, Injection

if TYPE_CHECKING:  # the MCP SDK loads only when `raymem mcp` runs, not for every command
    from raymem.serve.mcp_tools import ActionReport, Ids, MemoryTypes, Turns


T = TypeVar("T")


class Unreachable(RaymemError):
    status = 503
    code = "unreachable"


class ServerError(RaymemError):
    """An error answer of the server, with its message and code, for the tools to report."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def _segment(value: str, what: str) -> str:
    """Refuse a name or id that is no single safe URL path segment.

    The client puts them in request paths, where ``p/memories/../../other`` would
    address another route (a DELETE of a whole profile): the server never sees it.
    """
    if not re.fullmatch(NAME_PATTERN, value):
        raise InvalidRequest(
            f"Invalid {what} {value[:140]!r}: use 1-128 letters, digits, '.', '_' or '-',"
            " not starting with a dot"
        )
    return value


class ClientMemoryOps:
    """``MemoryOps`` over HTTP: one ``AsyncClient`` for the life of the stdio server."""

    def __init__(self, client: AsyncClient, url: str) -> None:
        self._client = client
        self._url = url

    def _profile(self, name: str) -> AsyncProfile:
        return self._client.get_profile(_segment(name, "profile name"))

    def _session(self, profile: str, session_id: str) -> AsyncSessionClient:
        return self._profile(profile).session(_segment(session_id, "session name"))

    async def _send(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except RaymemHTTPError as exc:
            raise ServerError(exc.message, exc.code) from None
        except httpx.HTTPError as exc:
            raise Unreachable(f"Cannot reach the raymem server at {self._url}: {exc}") from None

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
        target = self._profile(profile)
        return await self._send(
            target.recall(
                query,
                limit=limit,
                types=types,
                session_id=session_id,
                synthesize=synthesize,
                as_of=as_of,
            )
        )

    async def remember(
        self,
        profile: str,
        content: str,
        *,
        type: MemoryType | None,
        importance: float | None,
        session_id: str | None,
    ) -> MemoryWithHistory:
        target = self._profile(profile)
        return await self._send(
            target.remember(content, type=type, importance=importance, session_id=session_id)
        )

    async def forget(self, profile: str, memory_id: str) -> None:
        await self._send(self._profile(profile).forget(_segment(memory_id, "memory id")))

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
        target = self._profile(profile)
        return await self._send(
            target.list(
                type=types,
                session_id=session_id,
                include_superseded=include_superseded,
                limit=limit,
                cursor=cursor,
            )
        )

    async def get(self, profile: str, memory_id: str) -> MemoryWithHistory:
        return await self._send(self._profile(profile).get(_segment(memory_id, "memory id")))

    async def ingest(self, profile: str, messages: Turns, *, session_id: str) -> IngestResult:
        target = self._profile(profile)
        return await self._send(target.ingest(messages, session_id=session_id))

    async def append(
        self, profile: str, session_id: str, role: Role, content: str
    ) -> StoredMessage:
        session = self._session(profile, session_id)
        return await self._send(session.append(role, content))

    async def last(self, profile: str, session_id: str, n: int | None) -> MessageList:
        return await self._send(self._session(profile, session_id).last(n))

    async def end(self, profile: str, session_id: str) -> SessionEnded:
        return await self._send(self._session(profile, session_id).end())

    async def erase(self, profile: str, memory_id: str) -> MemoryErasure:
        return await self._send(self._profile(profile).erase(_segment(memory_id, "memory id")))

    async def context(
        self,
        profile: str,
        query: str,
        *,
        session_id: str | None,
        budget_tokens: int | None,
        as_of: datetime | None,
    ) -> ContextResult:
        target = self._profile(profile)
        return await self._send(
            target.context(query, session_id=session_id, budget_tokens=budget_tokens, as_of=as_of)
        )

    async def blocks(self, profile: str) -> BlockList:
        return await self._send(self._profile(profile).blocks())

    async def block_add(self, profile: str, block: str, content: str) -> BlockWrite:
        target = self._profile(profile)
        return await self._send(target.add_block_entry(_segment(block, "block name"), content))

    async def block_replace(self, profile: str, block: str, old: str, new: str) -> BlockWrite:
        target = self._profile(profile)
        name = _segment(block, "block name")
        return await self._send(target.replace_block_entry(name, old=old, new=new))

    async def block_remove(self, profile: str, block: str, content: str) -> Block:
        target = self._profile(profile)
        return await self._send(target.remove_block_entry(_segment(block, "block name"), content))

    async def record_action(self, profile: str, action: ActionReport) -> CaptureResult:
        procedural = self._profile(profile).procedural
        return await self._send(procedural.capture([ActionIn(**action)]))

    async def advise(
        self,
        profile: str,
        *,
        action_type: str,
        target_type: str,
        target_ids: Ids,
        session_id: str | None,
    ) -> Injection:
        procedural = self._profile(profile).procedural
        return await self._send(
            procedural.inject(
                action_type=action_type,
                target_type=target_type,
                target_ids=target_ids,
                session_id=session_id,
            )
        )


async def serve_stdio(url: str, token: str | None) -> None:
    """Serve raymem's MCP tools on stdin/stdout until the agent closes them."""
    from raymem.serve.mcp_tools import build_mcp_server

    async with AsyncClient(url, token) as client:
        ops = ClientMemoryOps(client, url)
        await build_mcp_server(lambda ctx: ops).run_stdio_async()


@click.command("mcp")
@client_options
def mcp(url: str, token: str | None) -> None:
    """Serve raymem's memory tools to a coding agent over MCP (stdio).

    Register it with the agent as the command `raymem mcp`, with RAYMEM_URL and
    RAYMEM_TOKEN in its environment (or --url and --token).
    """
    # stdout carries the protocol: logs go to stderr, warnings and worse only.
    logging.basicConfig(level=logging.WARNING, format="raymem mcp: %(levelname)s %(message)s")
    anyio.run(serve_stdio, url, token)
