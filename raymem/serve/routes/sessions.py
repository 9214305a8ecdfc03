"""Session routes: append a turn, read the last turns, list, end and delete sessions.

No ``from __future__ import annotations``: FastAPI inside Serve then answers 422.
"""

from fastapi import Query, Request, Response

from raymem import metrics
from raymem.names import validate_name
from raymem.serve import http
from raymem.serve.api import app
from raymem.serve.routes.base import IngressBase
from raymem.types import (
    AppendRequest,
    MessageList,
    SessionDeleted,
    SessionEnded,
    SessionList,
    StoredMessage,
)

MAX_LAST = 10_000  # turns one read of a session's last messages returns at most


class SessionRoutes(IngressBase):
    @app.post(
        "/v1/profiles/{profile}/sessions/{session_id}/messages",
        status_code=201,
        tags=["sessions"],
        **http.write_docs(AppendRequest, StoredMessage, 201, "One turn"),
    )
    async def append_message(self, profile: str, session_id: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        validate_name(session_id, "session")
        body = await self._body(request, AppendRequest)
        http.check_content(body.content, self.limits)
        http.check_time(body.created_at, "$.created_at")
        with self._calls(principal, profile) as calls:
            message = await calls.append_message(session_id, body)
        return http.json_response(message, 201)

    @app.get(
        "/v1/profiles/{profile}/sessions/{session_id}/messages",
        tags=["sessions"],
        responses=http.response_schema(MessageList),
    )
    async def last_messages(
        self,
        profile: str,
        session_id: str,
        request: Request,
        last: int | None = Query(None, ge=1, le=MAX_LAST),
    ) -> Response:
        principal = self._profile(request, profile, write=False)
        validate_name(session_id, "session")
        with self._calls(principal, profile) as calls:
            messages = await calls.last_messages(session_id, last)
        return http.json_response(messages)

    @app.get(
        "/v1/profiles/{profile}/sessions",
        tags=["sessions"],
        responses=http.response_schema(SessionList),
    )
    async def list_sessions(self, profile: str, request: Request) -> Response:
        return await self._answer(
            request, profile, lambda calls: calls.list_sessions(), write=False
        )

    @app.post(
        "/v1/profiles/{profile}/sessions/{session_id}/end",
        tags=["sessions"],
        responses=http.response_schema(SessionEnded),
    )
    async def end_session(self, profile: str, session_id: str, request: Request) -> Response:
        principal = self._profile(request, profile, write=True)
        validate_name(session_id, "session")
        with self._calls(principal, profile) as calls:
            ended = await calls.end_session(session_id)
        metrics.record_stages("consolidate", ended.latency_ms)
        metrics.MEMORIES_ADDED.inc(ended.memories.added, source="consolidate")
        return http.json_response(ended)

    @app.delete(
        "/v1/profiles/{profile}/sessions/{session_id}",
        tags=["sessions"],
        responses=http.response_schema(SessionDeleted),
    )
    async def delete_session(self, profile: str, session_id: str, request: Request) -> Response:
        """Erase a session: its turns, its memories and every memory drawn from its turns,
        its work items, episodes and captured actions, and ends an open dream.

        Answers once no copy holds their text; a 503 ``erasure_incomplete``: the same
        call again finishes removing older copies (then answers 404: the session is gone).
        """
        principal = self._profile(request, profile, write=True)
        validate_name(session_id, "session")
        with self._calls(principal, profile) as calls:
            deleted = await calls.delete_session(session_id)
        return http.json_response(deleted)
