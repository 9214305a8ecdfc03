"""The FastAPI application: its OpenAPI document and error handlers.

Route modules (``raymem.serve.routes``) register their routes on ``app``;
``raymem.serve.app`` puts them together in the Serve ingress. No
``from __future__ import annotations`` here or in a route module: FastAPI
inside Serve then answers every request with a 422.
"""

from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from starlette.exceptions import HTTPException as StarletteHTTPException

from raymem import __version__
from raymem.serve import http
from raymem.serve.request_metrics import RequestMetrics

app = FastAPI(
    title="raymem",
    version=__version__,
    description="Self-hosted memory for AI agents: ingest, remember, recall, forget.",
    docs_url=None,  # /docs and /redoc come from packaged assets (serve/docs.py), not a CDN
    redoc_url=None,
)
app.add_middleware(RequestMetrics)


def _openapi() -> dict[str, Any]:
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schema.setdefault("components", {}).setdefault("schemas", {}).update(
            http.schema_components(list(http.DOCUMENTED_TYPES))
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
