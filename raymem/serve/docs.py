"""API docs from packaged assets: Swagger UI at ``/docs`` and ReDoc at ``/redoc``, no CDN.

FastAPI's built-in pages load their scripts from a CDN, so they are blank offline;
the app turns them off (``docs_url=None, redoc_url=None``) and these pages load the
same scripts from the ``fastapi-offline`` package (Swagger UI and ReDoc dist files).

No ``from __future__ import annotations`` here: FastAPI inside Serve then 422s.
"""

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(str(files("fastapi_offline") / "static"))
ASSETS_PATH = "/docs/assets"
# The browser may load nothing from elsewhere (ReDoc's sidebar would fetch a logo from its CDN).
# Inline script and style: FastAPI's page starts Swagger UI inline; ReDoc injects its styles.
CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'"
)


def add_docs(app: FastAPI) -> None:
    """Serve the OpenAPI document as Swagger UI (``/docs``) and ReDoc (``/redoc``)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS), name="docs-assets")
    openapi_path = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_swagger_ui_html(
            openapi_url=f"{root}{openapi_path}",
            title=f"{app.title} - API",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            # No validator badge: it would fetch an image from the validator's site.
            swagger_ui_parameters={"validatorUrl": None},
        )
        page.headers["Content-Security-Policy"] = CSP
        return page

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_redoc_html(
            openapi_url=f"{root}{openapi_path}",
            title=f"{app.title} - API",
            redoc_js_url=f"{root}{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )
        page.headers["Content-Security-Policy"] = CSP
        return page
