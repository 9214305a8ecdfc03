"""What every route uses: authentication, names, bodies, the per-key cap, the profile's calls.

No ``from __future__ import annotations``: FastAPI inside Serve then answers 422.
"""

import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from fastapi import Request, Response
from ray.serve.handle import DeploymentHandle

from raymem import __version__
from raymem.actors.calls import ProfileCalls
from raymem.actors.registry import ProfileRouter
from raymem.config import Settings
from raymem.errors import TooManyRequests
from raymem.names import validate_name
from raymem.serve import http
from raymem.serve.api import app
from raymem.serve.auth import Authenticator, Principal

T = TypeVar("T")


class IngressBase:
    """The ingress's state and helpers, and the liveness route."""

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

    @app.get("/healthz", tags=["service"])
    async def healthz(self) -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    def _principal(self, request: Request) -> Principal:
        return self.auth.authenticate(request.headers.get("authorization"))

    def _profile(self, request: Request, profile: str, *, write: bool) -> Principal:
        """The caller, once it may use ``profile`` (and write to it when ``write``)."""
        principal = self._principal(request)
        validate_name(profile)
        principal.check(profile, write=write)
        return principal

    async def _body(self, request: Request, kind: type[T]) -> T:
        return http.decode(await http.read_body(request, self.limits.max_body_bytes), kind)

    async def _answer(
        self,
        request: Request,
        profile: str,
        operation: Callable[[ProfileCalls], Awaitable[object]],
        *,
        write: bool,
        status: int = 200,
    ) -> Response:
        """Run one operation on ``profile`` for the caller and answer its result as JSON."""
        principal = self._profile(request, profile, write=write)
        with self._calls(principal, profile) as calls:
            result = await operation(calls)
        return http.json_response(result, status)

    @contextlib.contextmanager
    def _calls(self, principal: Principal, profile: str) -> Iterator[ProfileCalls]:
        """The profile's operations, within the caller's cap on requests in flight.

        Raises:
            TooManyRequests: the key has ``max_concurrent_per_key`` requests in flight (429).
        """
        cap = self.settings.server.max_concurrent_per_key
        if self._inflight[principal.key_id] >= cap:
            raise TooManyRequests(f"More than {cap} concurrent requests for this key")
        self._inflight[principal.key_id] += 1
        try:
            yield ProfileCalls(self.router, principal.tenant, profile)
        finally:
            self._inflight[principal.key_id] -= 1
