"""The agent's context routes: core blocks, work items and working memory, episodes,
context assembly, get by reference, and flush before compaction.

No ``from __future__ import annotations``: FastAPI inside Serve then answers 422.
"""

import re
import uuid
from collections.abc import Iterable
from typing import Any

from fastapi import Query, Request, Response

from raymem.config import LimitSettings
from raymem.errors import InvalidRequest
from raymem.names import validate_name
from raymem.serve import http
from raymem.serve.api import app
from raymem.serve.routes.base import IngressBase
from raymem.types import IngestRequest
from raymem.types_context import (
    Block,
    BlockLimitRequest,
    BlockList,
    BlockWrite,
    ClosedWorkItem,
    ContextRequest,
    ContextResult,
    EntryReplaceRequest,
    EntryRequest,
    Episode,
    EpisodePage,
    FlushRequest,
    FlushResult,
    ResolvedBlockEntry,
    ResolvedEpisode,
    ResolvedMemory,
    ResolvedMessage,
    ResolvedWorkItem,
    WorkingMemory,
    WorkItem,
    WorkItemClose,
    WorkItemList,
    WorkItemOpen,
    WorkItemStatus,
    WorkItemUpdate,
)

CURSOR = re.compile(r"[0-9]{1,18}")  # a seq, as next_cursor gives it
# Work item and episode ids are 32 hex digits; anything else names nothing (404),
# but a path segment longer than this is refused before it reaches the profile.
MAX_ID_CHARS = 128
MAX_REF_CHARS = 512


def _cursor(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    if not CURSOR.fullmatch(cursor):
        raise InvalidRequest(
            f"Invalid cursor {cursor[:40]!r}: pass the next_cursor of a previous page"
        )
    return int(cursor)


def _check_id(value: str, what: str, limit: int = MAX_ID_CHARS) -> None:
    if len(value) > limit:
        raise InvalidRequest(f"Invalid {what} of {len(value)} characters (at most {limit})")


def _check_texts(texts: Iterable[tuple[str, str | None]], limits: LimitSettings) -> None:
    """Each (path, text) within the content limit; None for a field left out."""
    for path, text in texts:
        if text is not None and len(text) > limits.max_content_chars:
            raise InvalidRequest(
                f"Text of {len(text)} characters exceeds the limit of"
                f" {limits.max_content_chars} - at `{path}`"
            )


def _work_texts(body: WorkItemOpen | WorkItemUpdate) -> list[tuple[str, str | None]]:
    texts: list[tuple[str, str | None]] = []
    for field in body.__struct_fields__:
        value = getattr(body, field)
        if isinstance(value, str):
            texts.append((f"$.{field}", value))
        elif isinstance(value, list):
            texts.extend((f"$.{field}[{index}]", text) for index, text in enumerate(value))
    return texts


def _resolved_responses() -> dict[int | str, dict[str, Any]]:
    """The answer of GET …/refs/{ref}: one of the kinds of record, told by ``kind``."""
    responses = http.response_schema(ResolvedMemory)
    kinds = (ResolvedMemory, ResolvedMessage, ResolvedEpisode, ResolvedBlockEntry, ResolvedWorkItem)
    responses[200] = {
        "description": "The record, by kind",
        "content": {http.JSON: {"schema": {"oneOf": [http.schema_ref(kind) for kind in kinds]}}},
    }
    return responses


class ContextRoutes(IngressBase):
    # ----------------------------------------------------------- core blocks

    @app.get(
        "/v1/profiles/{profile}/blocks",
        tags=["context"],
        responses=http.response_schema(BlockList),
    )
    async def list_blocks(self, profile: str, request: Request) -> Response:
        return await self._answer(request, profile, lambda calls: calls.list_blocks(), write=False)

    @app.put(
        "/v1/profiles/{profile}/blocks/{name}",
        tags=["context"],
        **http.write_docs(BlockLimitRequest, Block, 200, "A block's limit in characters", also=201),
    )
    async def set_block_limit(self, profile: str, name: str, request: Request) -> Response:
        """Create a block (201), or change its limit (200)."""
        principal = self._profile(request, profile, write=True)
        validate_name(name, "block")
        body = await self._body(request, BlockLimitRequest)
        with self._calls(principal, profile) as calls:
            saved = await calls.set_block_limit(name, body.limit)
        return http.json_response(saved.block, 201 if saved.created else 200)

    @app.delete(
        "/v1/profiles/{profile}/blocks/{name}",
        status_code=204,
        tags=["context"],
        responses=http.deleted_responses(),
    )
    async def delete_block(self, profile: str, name: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        validate_name(name, "block")
        with self._calls(principal, profile) as calls:
            await calls.delete_block(name)
        return Response(status_code=204)

    @app.post(
        "/v1/profiles/{profile}/blocks/{name}/entries",
        status_code=201,
        tags=["context"],
        **http.write_docs(EntryRequest, BlockWrite, 201, "An entry to add"),
    )
    async def add_block_entry(self, profile: str, name: str, request: Request) -> Response:
        """Add an entry (201); 200 with ``duplicate`` when the block says it already; 409
        ``block_full`` when it does not fit."""
        principal = self._profile(request, profile, write=True)
        validate_name(name, "block")
        body = await self._body(request, EntryRequest)
        http.check_content(body.content, self.limits)
        with self._calls(principal, profile) as calls:
            written = await calls.add_block_entry(name, body.content)
        return http.json_response(written, 200 if written.duplicate else 201)

    @app.put(
        "/v1/profiles/{profile}/blocks/{name}/entries",
        tags=["context"],
        **http.write_docs(EntryReplaceRequest, BlockWrite, 200, "The entry to rewrite"),
    )
    async def replace_block_entry(self, profile: str, name: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        validate_name(name, "block")
        body = await self._body(request, EntryReplaceRequest)
        http.check_content(body.old, self.limits, "$.old")
        http.check_content(body.new, self.limits, "$.new")
        with self._calls(principal, profile) as calls:
            written = await calls.replace_block_entry(name, body.old, body.new)
        return http.json_response(written)

    @app.delete(
        "/v1/profiles/{profile}/blocks/{name}/entries",
        tags=["context"],
        **http.write_docs(EntryRequest, Block, 200, "The entry to remove"),
    )
    async def remove_block_entry(self, profile: str, name: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        validate_name(name, "block")
        body = await self._body(request, EntryRequest)
        http.check_content(body.content, self.limits)
        with self._calls(principal, profile) as calls:
            block = await calls.remove_block_entry(name, body.content)
        return http.json_response(block)

    # ------------------------------------------------ work items and episodes

    @app.get(
        "/v1/profiles/{profile}/working-memory",
        tags=["context"],
        responses=http.response_schema(WorkingMemory),
    )
    async def working_memory(
        self, profile: str, request: Request, session_id: str | None = Query(None)
    ) -> Response:
        principal = self._profile(request, profile, write=False)
        if session_id is not None:
            validate_name(session_id, "session")
        with self._calls(principal, profile) as calls:
            memory = await calls.working_memory(session_id)
        return http.json_response(memory)

    @app.post(
        "/v1/profiles/{profile}/work-items",
        status_code=201,
        tags=["context"],
        **http.write_docs(WorkItemOpen, WorkItem, 201, "A work item to open"),
    )
    async def open_work_item(self, profile: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        body = await self._body(request, WorkItemOpen)
        _check_texts(_work_texts(body), self.limits)
        item_id = uuid.uuid4().hex  # chosen here so a retried call cannot open two
        with self._calls(principal, profile) as calls:
            item = await calls.open_work_item(body, item_id)
        return http.json_response(item, 201)

    @app.get(
        "/v1/profiles/{profile}/work-items",
        tags=["context"],
        responses=http.response_schema(WorkItemList),
    )
    async def list_work_items(
        self,
        profile: str,
        request: Request,
        session_id: str | None = Query(None),
        status: WorkItemStatus | None = Query(None),
        limit: int = Query(50, ge=1),
        cursor: str | None = Query(None),
    ) -> Response:
        principal = self._profile(request, profile, write=False)
        http.check_limit(limit, self.limits)
        if session_id is not None:
            validate_name(session_id, "session")
        before_seq = _cursor(cursor)
        with self._calls(principal, profile) as calls:
            page = await calls.list_work_items(
                session_id=session_id, status=status, limit=limit, before_seq=before_seq
            )
        return http.json_response(page)

    @app.get(
        "/v1/profiles/{profile}/work-items/{item_id}",
        tags=["context"],
        responses=http.response_schema(WorkItem),
    )
    async def get_work_item(self, profile: str, item_id: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=False)
        _check_id(item_id, "work item id")
        with self._calls(principal, profile) as calls:
            item = await calls.get_work_item(item_id)
        return http.json_response(item)

    @app.patch(
        "/v1/profiles/{profile}/work-items/{item_id}",
        tags=["context"],
        **http.write_docs(WorkItemUpdate, WorkItem, 200, "Changes to an open work item"),
    )
    async def update_work_item(self, profile: str, item_id: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        _check_id(item_id, "work item id")
        body = await self._body(request, WorkItemUpdate)
        _check_texts(_work_texts(body), self.limits)
        with self._calls(principal, profile) as calls:
            item = await calls.update_work_item(item_id, body)
        return http.json_response(item)

    @app.post(
        "/v1/profiles/{profile}/work-items/{item_id}/close",
        tags=["context"],
        **http.write_docs(WorkItemClose, ClosedWorkItem, 200, "How the work ended"),
    )
    async def close_work_item(self, profile: str, item_id: str, request: Request) -> Response:
        """Close a work item and finalise its episode."""
        principal = self._profile(request, profile, write=True)
        _check_id(item_id, "work item id")
        body = await self._body(request, WorkItemClose)
        _check_texts([("$.outcome", body.outcome)], self.limits)
        with self._calls(principal, profile) as calls:
            closed = await calls.close_work_item(item_id, body.outcome)
        return http.json_response(closed)

    @app.get(
        "/v1/profiles/{profile}/episodes",
        tags=["context"],
        responses=http.response_schema(EpisodePage),
    )
    async def list_episodes(
        self,
        profile: str,
        request: Request,
        session_id: str | None = Query(None),
        limit: int = Query(50, ge=1),
        cursor: str | None = Query(None),
    ) -> Response:
        principal = self._profile(request, profile, write=False)
        http.check_limit(limit, self.limits)
        if session_id is not None:
            validate_name(session_id, "session")
        before_seq = _cursor(cursor)
        with self._calls(principal, profile) as calls:
            page = await calls.list_episodes(
                session_id=session_id, limit=limit, before_seq=before_seq
            )
        return http.json_response(page)

    @app.get(
        "/v1/profiles/{profile}/episodes/{episode_id}",
        tags=["context"],
        responses=http.response_schema(Episode),
    )
    async def get_episode(self, profile: str, episode_id: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=False)
        _check_id(episode_id, "episode id")
        with self._calls(principal, profile) as calls:
            episode = await calls.get_episode(episode_id)
        return http.json_response(episode)

    # ------------------------------------------------ context, refs and flush

    @app.post(
        "/v1/profiles/{profile}/context",
        tags=["context"],
        **http.write_docs(ContextRequest, ContextResult, 200, "What to assemble, and the budget"),
    )
    async def context(self, profile: str, request: Request) -> Response:
        """Core blocks, working memory, memories, episodes and recent turns within a budget."""
        principal = self._profile(request, profile, write=False)
        body = await self._body(request, ContextRequest)
        if len(body.query) > self.limits.max_query_chars:
            raise InvalidRequest(
                f"Query of {len(body.query)} characters exceeds the limit of"
                f" {self.limits.max_query_chars} - at `$.query`"
            )
        http.check_time(body.as_of, "$.as_of")
        with self._calls(principal, profile) as calls:
            result = await calls.context(body)
        return http.json_response(result)

    @app.get(
        "/v1/profiles/{profile}/refs/{source_ref}",
        tags=["context"],
        responses=_resolved_responses(),
    )
    async def resolve_ref(self, profile: str, source_ref: str, request: Request) -> Response:
        """The record a ``source_ref`` names: a memory with its history, a turn with its
        neighbours, an episode, a block entry or a work item (``kind`` says which)."""
        principal = self._profile(request, profile, write=False)
        _check_id(source_ref, "reference", MAX_REF_CHARS)
        with self._calls(principal, profile) as calls:
            resolved = await calls.resolve_ref(source_ref)
        return http.json_response(resolved)

    @app.post(
        "/v1/profiles/{profile}/flush",
        tags=["context"],
        **http.write_docs(FlushRequest, FlushResult, 200, "The turns about to be compacted"),
    )
    async def flush(self, profile: str, request: Request) -> Response:
        """Store what is durable before a harness compacts its context; best effort: a
        failed stage is reported in ``error``, never as a failed request."""
        principal = self._profile(request, profile, write=True)
        body = await self._body(request, FlushRequest)
        http.check_ingest_limits(
            IngestRequest(session_id=body.session_id, messages=body.messages), self.limits
        )
        with self._calls(principal, profile) as calls:
            result = await calls.flush(body)
        return http.json_response(result)
