"""Everything the Serve app offers beside the HTTP API: MCP, the memory browser, API docs.

``serve/app.py`` calls ``mount_extras`` once, before ``@serve.ingress`` freezes
the FastAPI app. The extras reach the replica's ``Ingress`` (its keys, limits and
``ProfileCalls``) at request time through ``replica_ingress``: it does not exist
yet while the app is being built.
"""

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from ray import serve
from starlette.routing import Route

from raymem.serve.docs import add_docs
from raymem.serve.mcp import McpEndpoint, mcp_lifespan
from raymem.serve.routes.base import IngressBase
from raymem.serve.ui import add_ui


def replica_ingress() -> IngressBase:
    """The ``Ingress`` instance of the replica serving the current request."""
    ingress = serve.get_replica_context().servable_object
    if not isinstance(ingress, IngressBase):
        raise TypeError(f"the replica serves a {type(ingress).__name__}, not raymem's ingress")
    return ingress


def mount_extras(app: FastAPI) -> None:
    """Add ``/mcp``, ``/ui``, ``/docs`` and ``/redoc`` to ``app``, and the MCP lifespan."""
    endpoint = McpEndpoint(replica_ingress)
    app.router.routes.append(Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"]))
    add_ui(app, replica_ingress)
    add_docs(app)
    outer = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with outer(app) as state, mcp_lifespan(app):
            yield state

    app.router.lifespan_context = lifespan
