"""The memory browser at ``/ui``: one HTML page, a script and a stylesheet from the package.

The page reads the HTTP API with the user's key (asked once, kept in the tab's
session storage). Its few write controls (forget a memory, adopt or discard a
dream, approve or reject a proposal) are shown only to a key that may write; the
API refuses a read-only key's writes whatever the page shows.

No ``from __future__ import annotations`` here: FastAPI inside Serve then 422s.
"""

from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from raymem.serve.routes.base import IngressBase

ASSETS = Path(__file__).parent / "ui"
PAGE = (ASSETS / "index.html").read_text(encoding="utf-8")
# Only the app's own script, style and API: memory text can never run or fetch anything.
CSP = "default-src 'self'; img-src 'self' data:; connect-src 'self'"
HEADERS = {"Content-Security-Policy": CSP, "Cache-Control": "no-cache"}


def add_ui(app: FastAPI, ingress: Callable[[], IngressBase]) -> None:
    """Serve the browser page, its assets, and the one fact the page needs before a request."""
    app.mount("/ui/assets", StaticFiles(directory=ASSETS), name="ui-assets")

    @app.get("/ui", include_in_schema=False)
    async def ui_page(request: Request) -> HTMLResponse:
        # <base> makes every URL in the page relative to the app, under any route prefix.
        root = request.scope.get("root_path", "")
        return HTMLResponse(PAGE.replace("{{root}}", root), headers=HEADERS)

    @app.get("/ui/config", include_in_schema=False)
    async def ui_config() -> JSONResponse:
        # Whether to ask for a key before the first call (a 401 would log a console error).
        return JSONResponse({"auth_required": not ingress().auth.open})

    @app.get("/ui/key", include_in_schema=False)
    async def ui_key(request: Request) -> JSONResponse:
        # Whether to show write controls; a 401 here means the stored key is wrong.
        principal = ingress().auth.authenticate(request.headers.get("authorization"))
        return JSONResponse({"read_only": principal.read_only})
