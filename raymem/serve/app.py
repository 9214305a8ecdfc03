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
from raymem.actors.pools import (
    EmbedderPool,
    GeneratorPool,
    embedder_options,
    generator_options,
)
from raymem.actors.registry import ProfileRouter
from raymem.config import Settings
from raymem.errors import InvalidRequest, TooManyRequests
from raymem.serve import http
from raymem.serve.auth import Authenticator, Principal
from raymem.serve.extras import mount_extras
from raymem.store import COUNTS_SQL, profile_info
from raymem.store.connection import open_sync
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
    ProfileInfo,
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
    docs_url=None,  # /docs and /redoc come from packaged assets (mount_extras), not a CDN
    redoc_url=None,
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


# MCP at /mcp, the memory browser at /ui, API docs: added before @serve.ingress freezes the app.
mount_extras(app, lambda: serve.get_replica_context().servable_object)


@serve.deployment(name="Ingress", max_ongoing_requests=256, ray_actor_options={"num_cpus": 0})
@serve.ingress(app)
class Ingress:
    """Authenticates, validates and routes each request to its profile actor."""

    def __init__(
        self,
        settings: Settings,
        embedder: DeploymentHandle,
        generator: DeploymentHandle | None = None,
    ) -> None:
        logging.basicConfig(level=logging.INFO)
        self.settings = settings
        self.limits = settings.limits
        self.router = ProfileRouter(settings)
        self.auth = Authenticator(settings)
        self.embedder = embedder
        self._inflight: collections.Counter[str] = collections.Counter()

    # ---------------------------------------------------------------- helpers

    def _principal(self, request: Request) -> Principal:
        return self.auth.authenticate(request.headers.get("authorization"))

    def _profile(self, request: Request, profile: str, *, write: bool) -> tuple[Principal, str]:
        principal = self._principal(request)
        http.validate_name(profile)
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

    async def _call(
        self,
        principal: Principal,
        profile: str,
        method: str,
        *args: Any,
        create: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Call the profile actor within the caller's concurrency cap."""
        with self._slot(principal):
            return await self.router.call(
                principal.tenant, profile, method, *args, create=create, **kwargs
            )

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
        return http.json_response(await self._call(principal, name, "ingest", body, create=True))

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
        result = await self._call(principal, name, "remember", body, memory_id, create=True)
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
        return http.json_response(await self._call(principal, name, "recall", body))

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
            http.validate_name(session_id, "session")
        if cursor is not None and not CURSOR.fullmatch(cursor):
            raise InvalidRequest(
                f"Invalid cursor {cursor[:40]!r}: pass the next_cursor of a previous page"
            )
        page = await self._call(
            principal,
            name,
            "list_memories",
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
        return http.json_response(await self._call(principal, name, "get_memory", memory_id))

    @app.delete(
        "/v1/profiles/{profile}/memories/{memory_id}",
        status_code=204,
        tags=["memories"],
        responses=http.deleted_responses(),
    )
    async def forget(self, profile: str, memory_id: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=True)
        await self._call(principal, name, "forget", memory_id)
        return Response(status_code=204)

    @app.get("/v1/profiles", tags=["profiles"], responses=http.response_schema(ProfileList))
    async def list_profiles(self, request: Request) -> Response:
        principal = self._principal(request)
        return http.json_response(ProfileList(profiles=self._profile_infos(principal)))

    def _profile_infos(self, principal: Principal) -> list[ProfileInfo]:
        """Counts read from each file without activating its actor (WAL readers are consistent)."""
        from pathlib import Path

        root = Path(self.settings.data_dir) / principal.tenant
        infos = []
        for db in sorted(root.glob("*/profile.db")):
            name = db.parent.name
            if not principal.may_use(name):
                continue
            conn = open_sync(db)
            try:
                infos.append(profile_info(name, conn.execute(COUNTS_SQL).fetchone()))
            except Exception:  # a profile being created or deleted right now
                log.warning("cannot read counts of profile %s", name, exc_info=True)
            finally:
                conn.close()
        return infos

    @app.delete(
        "/v1/profiles/{profile}",
        status_code=204,
        tags=["profiles"],
        responses=http.deleted_responses(),
    )
    async def delete_profile(self, profile: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=True)
        with self._slot(principal):
            await self.router.delete(principal.tenant, name)
        return Response(status_code=204)

    @app.post(
        "/v1/profiles/{profile}/sessions/{session_id}/messages",
        status_code=201,
        tags=["sessions"],
        **_write(AppendRequest, StoredMessage, 201, "One turn"),
    )
    async def append_message(self, profile: str, session_id: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=True)
        http.validate_name(session_id, "session")
        body: AppendRequest = await self._body(request, AppendRequest)
        http.check_content(body.content, self.limits)
        http.check_time(body.created_at, "$.created_at")
        result = await self._call(principal, name, "append_message", session_id, body, create=True)
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
        http.validate_name(session_id, "session")
        return http.json_response(
            await self._call(principal, name, "last_messages", session_id, last)
        )

    @app.get(
        "/v1/profiles/{profile}/sessions",
        tags=["sessions"],
        responses=http.response_schema(SessionList),
    )
    async def list_sessions(self, profile: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=False)
        return http.json_response(await self._call(principal, name, "list_sessions"))

    @app.post(
        "/v1/profiles/{profile}/sessions/{session_id}/end",
        tags=["sessions"],
        responses=http.response_schema(SessionEnded),
    )
    async def end_session(self, profile: str, session_id: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=True)
        http.validate_name(session_id, "session")
        return http.json_response(await self._call(principal, name, "end_session", session_id))

    @app.delete(
        "/v1/profiles/{profile}/sessions/{session_id}",
        tags=["sessions"],
        responses=http.response_schema(SessionDeleted),
    )
    async def delete_session(self, profile: str, session_id: str, request: Request) -> Response:
        """Delete a session's turns and forget the memories derived from it."""
        principal, name = self._profile(request, profile, write=True)
        http.validate_name(session_id, "session")
        return http.json_response(await self._call(principal, name, "delete_session", session_id))

    @app.post(
        "/v1/profiles/{profile}/snapshot",
        tags=["durability"],
        responses=http.response_schema(SnapshotResult),
    )
    async def snapshot(self, profile: str, request: Request) -> Response:
        principal, name = self._profile(request, profile, write=True)
        return http.json_response(await self._call(principal, name, "snapshot"))

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
            chunks = self.router.stream(principal.tenant, name, "export_chunks")
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
        return http.json_response(
            await self._call(principal, name, "import_archive", archive, create=True)
        )


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
