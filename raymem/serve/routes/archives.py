"""Durability routes: snapshot to object storage, export and import a whole profile.

No ``from __future__ import annotations``: FastAPI inside Serve then answers 422.
"""

from collections.abc import AsyncIterator

from fastapi import Request, Response
from fastapi.responses import StreamingResponse

from raymem.errors import InvalidRequest
from raymem.serve import http
from raymem.serve.api import app
from raymem.serve.routes.base import IngressBase
from raymem.types import ImportResult, SnapshotResult


async def _prepend(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for chunk in rest:
        yield chunk


class ArchiveRoutes(IngressBase):
    @app.post(
        "/v1/profiles/{profile}/snapshot",
        tags=["durability"],
        responses=http.response_schema(SnapshotResult),
    )
    async def snapshot(self, profile: str, request: Request) -> Response:
        return await self._answer(request, profile, lambda calls: calls.snapshot(), write=True)

    @app.get(
        "/v1/profiles/{profile}/export",
        tags=["durability"],
        response_class=StreamingResponse,
        responses=http.export_responses(),
    )
    async def export(self, profile: str, request: Request) -> Response:
        """The whole profile as JSON Lines: header, sessions, messages, memories with chains."""
        principal = self._profile(request, profile, write=False)
        with self._calls(principal, profile) as calls:
            chunks = calls.export_chunks()
            first = await anext(chunks)  # errors (unknown profile) surface before the 200
        return StreamingResponse(
            _prepend(first, chunks),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="{profile}.jsonl"'},
        )

    @app.post(
        "/v1/profiles/{profile}/import",
        tags=["durability"],
        responses=http.response_schema(ImportResult),
        openapi_extra=http.archive_body(),
    )
    async def import_profile(self, profile: str, request: Request) -> Response:
        """Load an archive (JSON Lines, gzipped or not) into a new or empty profile."""
        principal = self._profile(request, profile, write=True)
        archive = await http.read_body(request, self.limits.max_import_bytes)
        if not archive.strip():
            raise InvalidRequest("Request body is empty: send an archive from GET …/export")
        with self._calls(principal, profile) as calls:
            result = await calls.import_archive(archive)
        return http.json_response(result)
