"""Everything the Serve app offers beside the HTTP API: MCP, the memory browser, API docs.

``serve/app.py`` calls ``mount_extras`` once, before ``@serve.ingress`` freezes
the FastAPI app; ``ingress`` returns the replica's ``Ingress`` instance at
request time (it does not exist yet while the app is being built).
"""

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI
from starlette.routing import Route

from raymem.serve.docs import add_docs
from raymem.serve.mcp import McpEndpoint, mcp_lifespan
from raymem.serve.ui import add_ui


def mount_extras(app: FastAPI, ingress: Callable[[], Any]) -> None:
    """Add ``/mcp``, ``/ui``, ``/docs`` and ``/redoc`` to ``app``, and the MCP lifespan."""
    app.router.routes.append(Route("/mcp", McpEndpoint(ingress), methods=["GET", "POST", "DELETE"]))
    add_ui(app, ingress)
    add_docs(app)
    outer = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with outer(app) as state, mcp_lifespan(app):
            yield state

    app.router.lifespan_context = lifespan
