"""Counts and times every HTTP request by route template, method and status.

A plain ASGI middleware (not Starlette's ``BaseHTTPMiddleware``, which would
buffer the streamed export). The route is read from the scope after routing:
the template (``/v1/profiles/{profile}/recall``), never the path, so the
series stay few whatever the profile names.
"""

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from raymem import metrics
from raymem.serve import http

UNMATCHED = "unmatched"  # no route answered (a 404 for an unknown path)


class RequestMetrics:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: int | None = None  # until a response starts

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            # Answered by the app's catch-all handler, which runs outside this middleware.
            status = status or http.status_for(exc)
            raise
        finally:
            route: Any = scope.get("route")
            tags = {
                "route": str(getattr(route, "path", UNMATCHED)),
                "method": str(scope["method"]),
                "status": str(status or 500),  # no response started: the server answers 500
            }
            metrics.REQUESTS.inc(**tags)
            metrics.REQUEST_LATENCY.observe((time.perf_counter() - started) * 1000, **tags)
