"""HTTP plumbing shared by the routes: bodies, limits, names, errors and JSON responses."""

import logging
from datetime import UTC, datetime
from typing import Any, TypeVar

import msgspec
from fastapi import Request, Response
from ray.exceptions import RayActorError, RayTaskError

from raymem.config import LimitSettings
from raymem.errors import InvalidRequest, PayloadTooLarge, RaymemError
from raymem.types import (
    ErrorBody,
    ErrorDetail,
    IngestRequest,
    RecallRequest,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
JSON = "application/json"
MIN_YEAR, MAX_YEAR = 2, 9998  # a year of margin each way: "last week" must stay a valid date

_decoders: dict[type, msgspec.json.Decoder[Any]] = {}


def json_response(body: Any, status: int = 200) -> Response:
    return Response(content=msgspec.json.encode(body), status_code=status, media_type=JSON)


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> Response:
    body = ErrorBody(error=ErrorDetail(code=code, message=message))
    return Response(msgspec.json.encode(body), status_code=status, media_type=JSON, headers=headers)


def _cause(exc: BaseException) -> BaseException:
    return exc.cause if isinstance(exc, RayTaskError) and exc.cause is not None else exc


def status_for(exc: BaseException) -> int:
    """The status ``response_for`` answers ``exc`` with."""
    cause = _cause(exc)
    if isinstance(cause, RaymemError):
        return cause.status
    return 503 if isinstance(cause, RayActorError) else 500


def response_for(exc: BaseException) -> Response:
    """The error response for any exception: ours keep their status, others are a logged 500."""
    cause = _cause(exc)
    if isinstance(cause, RaymemError):
        headers = {"Retry-After": "1"} if cause.status in (429, 503) else None
        if cause.status == 401:
            headers = {"WWW-Authenticate": "Bearer"}
        return error_response(cause.status, cause.code, str(cause), headers)
    if isinstance(cause, RayActorError):
        log.warning("profile actor unavailable: %s", cause)
        return error_response(
            503, "unavailable", "The profile is restarting; retry", {"Retry-After": "1"}
        )
    log.error("internal error", exc_info=cause)
    return error_response(500, "internal", "Internal error")


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing more than ``limit`` bytes without reading it all."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(
            f"Request body of {declared} bytes exceeds the limit of {limit} bytes"
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"Request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def decode(body: bytes, kind: type[T]) -> T:
    """Decode and validate a JSON body; a malformed or invalid one is a 400 naming the field."""
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    if not body.strip():
        raise InvalidRequest("Request body is empty: send a JSON object")
    try:
        return decoder.decode(body)  # type: ignore[no-any-return]
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"Invalid request body: {exc}") from None
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"Malformed JSON: {exc}") from None


def check_time(moment: datetime | None, path: str) -> None:
    """Message times must be representable in UTC with room for date arithmetic."""
    if moment is None:
        return
    try:
        utc = moment.astimezone(UTC) if moment.tzinfo else moment
    except OverflowError:
        utc = None
    if utc is None or not MIN_YEAR <= utc.year <= MAX_YEAR:
        raise InvalidRequest(
            f"Time {moment.isoformat()} is out of range ({MIN_YEAR}-{MAX_YEAR}) - at `{path}`"
        )


def check_ingest_limits(body: IngestRequest, limits: LimitSettings) -> None:
    if len(body.messages) > limits.max_messages_per_ingest:
        raise PayloadTooLarge(
            f"{len(body.messages)} messages exceed the limit of"
            f" {limits.max_messages_per_ingest} per ingest"
        )
    if not body.messages:
        raise InvalidRequest("Invalid request body: `messages` must not be empty - at `$.messages`")
    for index, message in enumerate(body.messages):
        check_content(message.content, limits, f"$.messages[{index}].content")
        check_time(message.created_at, f"$.messages[{index}].created_at")


def check_content(content: str, limits: LimitSettings, path: str = "$.content") -> None:
    if len(content) > limits.max_content_chars:
        raise PayloadTooLarge(
            f"Content of {len(content)} characters exceeds the limit of"
            f" {limits.max_content_chars} - at `{path}`"
        )
    if not content.strip():
        raise InvalidRequest(f"Content must not be blank - at `{path}`")


def check_recall_limits(body: RecallRequest, limits: LimitSettings) -> None:
    if len(body.query) > limits.max_query_chars:
        raise InvalidRequest(
            f"Query of {len(body.query)} characters exceeds the limit of {limits.max_query_chars}"
            " - at `$.query`"
        )
    if not body.query.strip():
        raise InvalidRequest("Query must not be blank - at `$.query`")
    check_limit(body.limit, limits)
    check_time(body.as_of, "$.as_of")


def check_limit(limit: int, limits: LimitSettings) -> None:
    if limit > limits.max_limit:
        raise InvalidRequest(f"limit {limit} exceeds the maximum of {limits.max_limit}")


def write_docs(
    body: type, result: type, status: int = 200, description: str = "", *, also: int | None = None
) -> dict[str, Any]:
    """Route arguments documenting a msgspec request body and its response; ``also``: a
    second success status with the same body (201 for a PUT that created)."""
    responses = response_schema(result, status)
    if also is not None:
        responses[also] = {**responses[status]}
    return {"openapi_extra": body_schema(body, description), "responses": responses}


#: Every msgspec type a route's documentation refers to, in the order first referred to:
#: the OpenAPI document's components are made from these (see ``schema_components``).
DOCUMENTED_TYPES: dict[type, None] = {}


def schema_ref(kind: type) -> dict[str, str]:
    """A reference to ``kind``'s schema, which the OpenAPI document then carries."""
    DOCUMENTED_TYPES[kind] = None
    return {"$ref": f"#/components/schemas/{kind.__name__}"}


def body_schema(kind: type, description: str = "") -> dict[str, Any]:
    """``openapi_extra`` documenting a msgspec request body (bodies are decoded by hand)."""
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {JSON: {"schema": schema_ref(kind)}},
        }
    }


def response_schema(kind: type, status: int = 200) -> dict[int | str, dict[str, Any]]:
    return {
        status: {
            "description": kind.__name__,
            "content": {JSON: {"schema": schema_ref(kind)}},
        },
        **_client_errors(),
    }


def deleted_responses() -> dict[int | str, dict[str, Any]]:
    return {204: {"description": "Deleted"}, **_client_errors()}


def _client_errors() -> dict[int | str, dict[str, Any]]:
    return {
        "4XX": {
            "description": "Client error",
            "content": {JSON: {"schema": schema_ref(ErrorBody)}},
        }
    }


NDJSON = {"application/x-ndjson": {"schema": {"type": "string", "format": "binary"}}}


def export_responses() -> dict[int | str, dict[str, Any]]:
    return {
        200: {"description": "The profile as JSON Lines", "content": NDJSON},
        **_client_errors(),
    }


def archive_body() -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "description": "An archive from GET …/export (gzip allowed)",
            "content": NDJSON,
        }
    }


def schema_components(kinds: list[type]) -> dict[str, Any]:
    _, components = msgspec.json.schema_components(
        kinds, ref_template="#/components/schemas/{name}"
    )
    return components
