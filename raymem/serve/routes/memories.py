"""Memory routes: ingest, remember, recall, list, get, forget and erase.

No ``from __future__ import annotations``: FastAPI inside Serve then answers 422.
"""

import re
import uuid

from fastapi import Query, Request, Response

from raymem import metrics
from raymem.errors import InvalidRequest
from raymem.names import validate_name
from raymem.serve import http
from raymem.serve.api import app
from raymem.serve.routes.base import IngressBase
from raymem.types import (
    IngestRequest,
    IngestResult,
    MemoryErasure,
    MemoryPage,
    MemoryType,
    MemoryWithHistory,
    RecallRequest,
    RecallResult,
    RememberRequest,
)

CURSOR = re.compile(r"[0-9]{1,18}")  # a memory seq, as next_cursor gives it


class MemoryRoutes(IngressBase):
    @app.post(
        "/v1/profiles/{profile}/ingest",
        tags=["memories"],
        **http.write_docs(
            IngestRequest, IngestResult, 200, "A conversation to store and extract memories from"
        ),
    )
    async def ingest(self, profile: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        body = await self._body(request, IngestRequest)
        http.check_ingest_limits(body, self.limits)
        with self._calls(principal, profile) as calls:
            result = await calls.ingest(body)
        metrics.record_stages("ingest", result.latency_ms)
        metrics.MEMORIES_ADDED.inc(result.memories.added, source="ingest")
        return http.json_response(result)

    @app.post(
        "/v1/profiles/{profile}/memories",
        status_code=201,
        tags=["memories"],
        **http.write_docs(RememberRequest, MemoryWithHistory, 201, "One thing to remember now"),
    )
    async def remember(self, profile: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        body = await self._body(request, RememberRequest)
        http.check_content(body.content, self.limits)
        memory_id = uuid.uuid4().hex  # chosen here so a retried call cannot write twice
        with self._calls(principal, profile) as calls:
            memory = await calls.remember(body, memory_id)
        metrics.MEMORIES_ADDED.inc(source="remember")
        return http.json_response(memory, 201)

    @app.post(
        "/v1/profiles/{profile}/recall",
        tags=["memories"],
        **http.write_docs(RecallRequest, RecallResult, 200, "A question"),
    )
    async def recall(self, profile: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=False)
        body = await self._body(request, RecallRequest)
        http.check_recall_limits(body, self.limits)
        with self._calls(principal, profile) as calls:
            result = await calls.recall(body)
        metrics.record_stages("recall", result.latency_ms)
        return http.json_response(result)

    @app.get(
        "/v1/profiles/{profile}/memories",
        tags=["memories"],
        responses=http.response_schema(MemoryPage),
    )
    async def list_memories(
        self,
        profile: str,
        request: Request,
        type: list[MemoryType] | None = Query(None),
        session_id: str | None = Query(None),
        include_superseded: bool = Query(False),
        limit: int = Query(50, ge=1),
        cursor: str | None = Query(None),
    ) -> Response:
        principal = self._profile(request, profile, write=False)
        http.check_limit(limit, self.limits)
        if session_id is not None:
            validate_name(session_id, "session")
        if cursor is not None and not CURSOR.fullmatch(cursor):
            raise InvalidRequest(
                f"Invalid cursor {cursor[:40]!r}: pass the next_cursor of a previous page"
            )
        with self._calls(principal, profile) as calls:
            page = await calls.list_memories(
                types=type,
                session_id=session_id,
                include_superseded=include_superseded,
                limit=limit,
                before_seq=None if cursor is None else int(cursor),
            )
        return http.json_response(page)

    @app.get(
        "/v1/profiles/{profile}/memories/{memory_id}",
        tags=["memories"],
        responses=http.response_schema(MemoryWithHistory),
    )
    async def get_memory(self, profile: str, memory_id: str, request: Request) -> Response:
        return await self._answer(
            request, profile, lambda calls: calls.get_memory(memory_id), write=False
        )

    @app.delete(
        "/v1/profiles/{profile}/memories/{memory_id}",
        status_code=204,
        tags=["memories"],
        responses=http.deleted_responses(),
    )
    async def forget(self, profile: str, memory_id: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        with self._calls(principal, profile) as calls:
            await calls.forget(memory_id)
        return Response(status_code=204)

    @app.post(
        "/v1/profiles/{profile}/memories/{memory_id}/erase",
        tags=["memories"],
        responses=http.response_schema(MemoryErasure),
    )
    async def erase_memory(self, profile: str, memory_id: str, request: Request) -> Response:
        """Erase a memory, the turns it was drawn from and every memory drawn from those.

        Answers once no copy holds the text (file, ledger, object storage); a 503
        ``erasure_incomplete`` means erased from the profile but not yet from every older
        copy: the same call again finishes it.
        """
        return await self._answer(
            request, profile, lambda calls: calls.erase_memory(memory_id), write=True
        )
