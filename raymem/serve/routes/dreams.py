"""Dream routes: start a dream, follow it, read its diff, then adopt, discard or cancel it.

No ``from __future__ import annotations``: FastAPI inside Serve then answers 422.
"""

from fastapi import Request, Response

from raymem.serve import http
from raymem.serve.api import app
from raymem.serve.routes.base import IngressBase
from raymem.types import DreamAdopted, DreamDiff, DreamList, DreamRequest, DreamStatus

DREAM = "/v1/profiles/{profile}/dreams/{dream_id}"


class DreamRoutes(IngressBase):
    @app.post(
        "/v1/profiles/{profile}/dreams",
        status_code=202,
        tags=["dreams"],
        **http.write_docs(
            DreamRequest, DreamStatus, 202, "What to focus on, and how many recent sessions to read"
        ),
    )
    async def start_dream(self, profile: str, request: Request) -> Response:
        """Start re-organising the profile into a candidate for review (409: one is open)."""
        principal = self._profile(request, profile, write=True)
        body = await self._body(request, DreamRequest)
        with self._calls(principal, profile) as calls:
            dream = await calls.start_dream(body)
        return http.json_response(dream, 202)

    @app.get(
        "/v1/profiles/{profile}/dreams",
        tags=["dreams"],
        responses=http.response_schema(DreamList),
    )
    async def list_dreams(self, profile: str, request: Request) -> Response:
        return await self._answer(request, profile, lambda calls: calls.list_dreams(), write=False)

    @app.get(DREAM, tags=["dreams"], responses=http.response_schema(DreamStatus))
    async def dream_status(self, profile: str, dream_id: str, request: Request) -> Response:
        return await self._answer(
            request, profile, lambda calls: calls.dream_status(dream_id), write=False
        )

    @app.get(f"{DREAM}/diff", tags=["dreams"], responses=http.response_schema(DreamDiff))
    async def dream_diff(self, profile: str, dream_id: str, request: Request) -> Response:
        """Every change of a ready (or adopted) dream, with its reason and evidence."""
        return await self._answer(
            request, profile, lambda calls: calls.dream_diff(dream_id), write=False
        )

    @app.post(f"{DREAM}/adopt", tags=["dreams"], responses=http.response_schema(DreamAdopted))
    async def adopt_dream(self, profile: str, dream_id: str, request: Request) -> Response:
        """Apply a ready dream to the profile in one transaction (writes since then stay)."""
        return await self._answer(
            request, profile, lambda calls: calls.adopt_dream(dream_id), write=True
        )

    @app.post(f"{DREAM}/discard", tags=["dreams"], responses=http.response_schema(DreamStatus))
    async def discard_dream(self, profile: str, dream_id: str, request: Request) -> Response:
        """Delete a ready dream's candidate; the profile stays as it is."""
        return await self._answer(
            request, profile, lambda calls: calls.discard_dream(dream_id), write=True
        )

    @app.post(f"{DREAM}/cancel", tags=["dreams"], responses=http.response_schema(DreamStatus))
    async def cancel_dream(self, profile: str, dream_id: str, request: Request) -> Response:
        """Stop a running dream and delete its candidate."""
        return await self._answer(
            request, profile, lambda calls: calls.cancel_dream(dream_id), write=True
        )
