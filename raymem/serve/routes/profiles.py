"""Profile routes: list a tenant's profiles with their counts, delete one.

No ``from __future__ import annotations``: FastAPI inside Serve then answers 422.
"""

from fastapi import Request, Response

from raymem.serve import http
from raymem.serve.api import app
from raymem.serve.routes.base import IngressBase
from raymem.types import ProfileList


class ProfileRoutes(IngressBase):
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
        principal = self._profile(request, profile, write=True)
        with self._calls(principal, profile) as calls:
            await calls.delete()
        return Response(status_code=204)
