"""The Ray Serve application: a FastAPI ingress that routes by profile name to profile actors.

No ``from __future__ import annotations`` here: FastAPI inside Serve then
answers every request with a 422.
"""

import collections
import contextlib
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from fastapi import FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import StreamingResponse
from ray import serve
from ray.serve.handle import DeploymentHandle
from starlette.exceptions import HTTPException as StarletteHTTPException

from raymem import __version__
from raymem.actors.calls import ProfileCalls
from raymem.actors.pools import (
    EmbedderPool,
    GeneratorPool,
    embedder_options,
    generator_options,
)
from raymem.actors.registry import ProfileRouter
from raymem.config import Settings
from raymem.errors import InvalidRequest, TooManyRequests
from raymem.names import validate_name
from raymem.serve import http
from raymem.serve.auth import Authenticator, Principal
from raymem.types import (
    AppendRequest,
    ErrorBody,
    ImportResult,
    IngestRequest,
    IngestResult,
    MemoryPage,
    MemoryType,
    MemoryWithHistory,
    MessageList,
    ProfileList,
    RecallRequest,
    RecallResult,
    RememberRequest,
    SessionDeleted,
    SessionEnded,
    SessionList,
    SnapshotResult,
    StoredMessage,
)

log = logging.getLogger(__name__)

CURSOR = re.compile(r"[0-9]{1,18}")  # a memory seq, as next_cursor gives it

SCHEMA_TYPES: list[type] = [
    AppendRequest,
    ErrorBody,
    IngestRequest,
    IngestResult,
    MemoryPage,
    MemoryWithHistory,
    MessageList,
    ProfileList,
    RecallRequest,
    RecallResult,
    RememberRequest,
    SessionDeleted,
    SessionEnded,
    SessionList,
    StoredMessage,
    SnapshotResult,
    ImportResult,
]

app = FastAPI(
    title="raymem",
    version=__version__,
    description="Self-hosted memory for AI agents: ingest, remember, recall, forget.",
    docs_url="/docs",
)


def _openapi() -> dict[str, Any]:
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schema.setdefault("components", {}).setdefault("schemas", {}).update(
            http.schema_components(SCHEMA_TYPES)
        )
        for operations in schema["paths"].values():
            for operation in operations.values():
                # Validation errors are answered 400 with our error body, never FastAPI's 422.
                operation.get("responses", {}).pop("422", None)
        schema["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        schema["security"] = [{"bearer": []}]
        app.openapi_schema = schema
    return app.openapi_schema


app.openapi = _openapi  # type: ignore[method-assign]


@app.exception_handler(Exception)
async def _any_error(request: Request, exc: Exception) -> Response:
    return http.response_for(exc)


@app.exception_handler(RequestValidationError)
async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
    problems = "; ".join(
        f"{e.get('msg', 'invalid')} - at `{'.'.join(str(p) for p in e.get('loc', ()))}`"
        for e in exc.errors()
    )
    return http.error_response(400, "invalid_request", f"Invalid request: {problems}")


@app.exception_handler(StarletteHTTPException)
async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    message = "No such route" if exc.status_code == 404 else str(exc.detail)
    return http.error_response(exc.status_code, code, message)


def _write(body: type, result: type, status: int = 200, description: str = "") -> dict[str, Any]:
    return {
        "openapi_extra": http.body_schema(body, description),
        "responses": http.response_schema(result, status),
    }


async def _prepend(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for chunk in rest:
        yield chunk


@serve.deployment(name="Ingress", max_ongoing_requests=256, ray_actor_options={"num_cpus": 0})
@serve.ingress(app)
class Ingress:
    """Authenticates, validates and routes each request to its profile actor."""

    # Serve awaits an async constructor; type checkers expect __init__ to return None.
    async def __init__(  # type: ignore[misc]
        self, settings: Settings, *model_pools: DeploymentHandle[Any] | None
    ) -> None:
        """``model_pools`` are bound only so that Serve deploys them with the app: profile
        actors reach them by deployment name."""
        logging.basicConfig(level=logging.INFO)
        self.settings = settings
        self.limits = settings.limits
        self.router = ProfileRouter(settings)
        self.auth = Authenticator(settings)
        self._inflight: collections.Counter[str] = collections.Counter()
        await self.router.catalog.publish(settings)  # in-cluster clients read them there

    # ---------------------------------------------------------------- helpers

    def _principal(self, request: Request) -> Principal:
        return self.auth.authenticate(request.headers.get("authorization"))

    def _profile(self, request: Request, profile: str, *, write: bool) -> tuple[Principal, str]:
        principal = self._principal(request)
        validate_name(profile)
        principal.check(profile, write=write)
        return principal, profile

    async def _body(self, request: Request, kind: type) -> Any:
        return http.decode(await http.read_body(request, self.limits.max_body_bytes), kind)

    @contextlib.contextmanager
    def _slot(self, principal: Principal) -> Iterator[None]:
        """Cap the requests in flight per API key: beyond it, 429 with Retry-After."""
        cap = self.settings.server.max_concurrent_per_key
        if self._inflight[principal.key_id] >= cap:
            raise TooManyRequests(f"More than {cap} concurrent requests for this key")
        self._inflight[principal.key_id] += 1
        try:
            yield
        finally:
            self._inflight[principal.key_id] -= 1

    def _calls(self, principal: Principal, profile: str) -> ProfileCalls:
        return ProfileCalls(self.router, principal.tenant, profile)

    # ----------------------------------------------------------------- routes

    @app.get("/healthz", tags=["service"])
    async def healthz(self) -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    @app.post(
        "/v1/profiles/{profile}/ingest",
        tags=["memories"],
        **_write(
            IngestRequest, IngestResult, 200, "A conversation to store and extract memories from"
        ),
    )
    async def ingest(self, profile: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=True)
        body: IngestRequest = await self._body(request, IngestRequest)
        http.check_ingest_limits(body, self.limits)
        with self._slot(principal):
            result = await self._calls(principal, name).ingest(body)
        return http.json_response(result)

    @app.post(
        "/v1/profiles/{profile}/memories",
        status_code=201,
        tags=["memories"],
        **_write(RememberRequest, MemoryWithHistory, 201, "One thing to remember now"),
    )
    async def remember(self, profile: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=True)
        body: RememberRequest = await self._body(request, RememberRequest)
        http.check_content(body.content, self.limits)
        memory_id = uuid.uuid4().hex  # chosen here so a retried call cannot write twice
        with self._slot(principal):
            result = await self._calls(principal, name).remember(body, memory_id)
        return http.json_response(result, 201)

    @app.post(
        "/v1/profiles/{profile}/recall",
        tags=["memories"],
        **_write(RecallRequest, RecallResult, 200, "A question"),
    )
    async def recall(self, profile: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=False)
        body: RecallRequest = await self._body(request, RecallRequest)
        http.check_recall_limits(body, self.limits)
        with self._slot(principal):
            result = await self._calls(principal, name).recall(body)
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
        principal, name = self._profile(request, profile, write=False)
        http.check_limit(limit, self.limits)
        if session_id is not None:
            validate_name(session_id, "session")
        if cursor is not None and not CURSOR.fullmatch(cursor):
            raise InvalidRequest(
                f"Invalid cursor {cursor[:40]!r}: pass the next_cursor of a previous page"
            )
        with self._slot(principal):
            page = await self._calls(principal, name).list_memories(
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
        principal, name = self._profile(request, profile, write=False)
        with self._slot(principal):
            memory = await self._calls(principal, name).get_memory(memory_id)
        return http.json_response(memory)

    @app.delete(
        "/v1/profiles/{profile}/memories/{memory_id}",
        status_code=204,
        tags=["memories"],
        responses=http.deleted_responses(),
    )
    async def forget(self, profile: str, memory_id: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=True)
        with self._slot(principal):
            await self._calls(principal, name).forget(memory_id)
        return Response(status_code=204)

    @app.get("/v1/profiles", tags=["profiles"], responses=http.response_schema(ProfileList))
    async def list_profiles(self, request: Request) -> Response:
        """The caller's profiles with their counts, from the catalog (no profile is woken)."""
        principal = self._principal(request)
        only = None if "*" in principal.profiles else list(principal.profiles)
        infos = await self.router.catalog.profiles(principal.tenant, only)
        return http.json_response(ProfileList(profiles=infos))

    @app.delete(
        "/v1/profiles/{profile}",
        status_code=204,
        tags=["profiles"],
        responses=http.deleted_responses(),
    )
    async def delete_profile(self, profile: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=True)
        with self._slot(principal):
            await self._calls(principal, name).delete()
        return Response(status_code=204)

    @app.post(
        "/v1/profiles/{profile}/sessions/{session_id}/messages",
        status_code=201,
        tags=["sessions"],
        **_write(AppendRequest, StoredMessage, 201, "One turn"),
    )
    async def append_message(self, profile: str, session_id: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=True)
        validate_name(session_id, "session")
        body: AppendRequest = await self._body(request, AppendRequest)
        http.check_content(body.content, self.limits)
        http.check_time(body.created_at, "$.created_at")
        with self._slot(principal):
            result = await self._calls(principal, name).append_message(session_id, body)
        return http.json_response(result, 201)

    @app.get(
        "/v1/profiles/{profile}/sessions/{session_id}/messages",
        tags=["sessions"],
        responses=http.response_schema(MessageList),
    )
    async def last_messages(
        self,
        profile: str,
        session_id: str,
        request: Request,
        last: int | None = Query(None, ge=1, le=10_000),
    ) -> Response:
        principal, name = self._profile(request, profile, write=False)
        validate_name(session_id, "session")
        with self._slot(principal):
            messages = await self._calls(principal, name).last_messages(session_id, last)
        return http.json_response(messages)

    @app.get(
        "/v1/profiles/{profile}/sessions",
        tags=["sessions"],
        responses=http.response_schema(SessionList),
    )
    async def list_sessions(self, profile: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=False)
        with self._slot(principal):
            sessions = await self._calls(principal, name).list_sessions()
        return http.json_response(sessions)

    @app.post(
        "/v1/profiles/{profile}/sessions/{session_id}/end",
        tags=["sessions"],
        responses=http.response_schema(SessionEnded),
    )
    async def end_session(self, profile: str, session_id: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=True)
        validate_name(session_id, "session")
        with self._slot(principal):
            ended = await self._calls(principal, name).end_session(session_id)
        return http.json_response(ended)

    @app.delete(
        "/v1/profiles/{profile}/sessions/{session_id}",
        tags=["sessions"],
        responses=http.response_schema(SessionDeleted),
    )
    async def delete_session(self, profile: str, session_id: str, request: Request) -> Response:
        """Delete a session's turns and forget the memories derived from it."""
        principal, name = self._profile(request, profile, write=True)
        validate_name(session_id, "session")
        with self._slot(principal):
            deleted = await self._calls(principal, name).delete_session(session_id)
        return http.json_response(deleted)

    @app.post(
        "/v1/profiles/{profile}/snapshot",
        tags=["durability"],
        responses=http.response_schema(SnapshotResult),
    )
    async def snapshot(self, profile: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=True)
        with self._slot(principal):
            snapshot = await self._calls(principal, name).snapshot()
        return http.json_response(snapshot)

    @app.get(
        "/v1/profiles/{profile}/export",
        tags=["durability"],
        response_class=StreamingResponse,
        responses=http.export_responses(),
    )
    async def export(self, profile: str, request: Request) -> Response:
        """The whole profile as JSON Lines: header, sessions, messages, memories with chains."""
        principal, name = self._profile(request, profile, write=False)
        with self._slot(principal):
            chunks = self._calls(principal, name).export_chunks()
            first = await anext(chunks)  # errors (unknown profile) surface before the 200
        return StreamingResponse(
            _prepend(first, chunks),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="{name}.jsonl"'},
        )

    @app.post(
        "/v1/profiles/{profile}/import",
        tags=["durability"],
        responses=http.response_schema(ImportResult),
        openapi_extra=http.archive_body(),
    )
    async def import_profile(self, profile: str, request: Request) -> Response:
        """Load an archive (JSON Lines, gzipped or not) into a new or empty profile."""
        principal, name = self._profile(request, profile, write=True)
        archive = await http.read_body(request, self.limits.max_import_bytes)
        if not archive.strip():
            raise InvalidRequest("Request body is empty: send an archive from GET …/export")
        with self._slot(principal):
            result = await self._calls(principal, name).import_archive(archive)
        return http.json_response(result)


def build_app(settings: Settings) -> Any:
    """The Serve application graph: the ingress and the embedder pool."""
    models = settings.models
    embedder = EmbedderPool.options(**embedder_options(models)).bind(models)
    # A model generator runs in its own pool; the rules and OpenAI backends need none.
    generator = None
    if models.generator == "transformers":
        generator = GeneratorPool.options(**generator_options(models)).bind(models)
    ingress = Ingress.options(num_replicas=settings.server.ingress_replicas)
    return ingress.bind(settings, embedder, generator)


def app_builder(args: dict[str, str]) -> Any:
    """Entry point for Serve config files and KubeRay (``import_path: raymem.serve.app:app_builder``).

    ``args`` may name a TOML file as ``config``; the ``RAYMEM_*`` environment of
    the Serve controller applies on top, as for ``raymem serve``.
    """
    from raymem.config import load_settings

    return build_app(load_settings(args.get("config") or None))
