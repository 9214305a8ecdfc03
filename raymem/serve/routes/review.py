"""Review queue routes: a profile's review mode, and the proposals a person approves or rejects.

No ``from __future__ import annotations``: FastAPI inside Serve then answers 422.
"""

from fastapi import Query, Request, Response

from raymem.serve import http
from raymem.serve.api import app
from raymem.serve.routes.base import IngressBase
from raymem.types import Proposal, ProposalList, ProposalState, ReviewMode, ReviewModeRequest

PROPOSAL = "/v1/profiles/{profile}/proposals/{proposal_id}"
MAX_PROPOSALS = 1_000  # proposals one listing returns at most


class ReviewRoutes(IngressBase):
    @app.get(
        "/v1/profiles/{profile}/review", tags=["review"], responses=http.response_schema(ReviewMode)
    )
    async def review_mode(self, profile: str, request: Request) -> Response:
        return await self._answer(request, profile, lambda calls: calls.review_mode(), write=False)

    @app.put(
        "/v1/profiles/{profile}/review",
        tags=["review"],
        **http.write_docs(
            ReviewModeRequest, ReviewMode, 200, "apply, or review under a confidence"
        ),
    )
    async def set_review_mode(self, profile: str, request: Request) -> Response:
        """``review``: supersessions and merges under ``below`` confidence wait as proposals."""
        principal = self._profile(request, profile, write=True)
        body = await self._body(request, ReviewModeRequest)
        with self._calls(principal, profile) as calls:
            mode = await calls.set_review_mode(body.mode, below=body.below)
        return http.json_response(mode)

    @app.get(
        "/v1/profiles/{profile}/proposals",
        tags=["review"],
        responses=http.response_schema(ProposalList),
    )
    async def list_proposals(
        self,
        profile: str,
        request: Request,
        state: ProposalState | None = Query(None),
        limit: int = Query(100, ge=1, le=MAX_PROPOSALS),
    ) -> Response:
        return await self._answer(
            request,
            profile,
            lambda calls: calls.list_proposals(state=state, limit=limit),
            write=False,
        )

    @app.post(f"{PROPOSAL}/approve", tags=["review"], responses=http.response_schema(Proposal))
    async def approve_proposal(self, profile: str, proposal_id: str, request: Request) -> Response:
        """Make the change (409 when decided already, or its memories changed since)."""
        return await self._answer(
            request, profile, lambda calls: calls.approve_proposal(proposal_id), write=True
        )

    @app.post(f"{PROPOSAL}/reject", tags=["review"], responses=http.response_schema(Proposal))
    async def reject_proposal(self, profile: str, proposal_id: str, request: Request) -> Response:
        """Leave both memories as they are."""
        return await self._answer(
            request, profile, lambda calls: calls.reject_proposal(proposal_id), write=True
        )
