"""Schemathesis against the served OpenAPI schema: no 5xx, and every response as documented.

Two runs over every operation of the keyless ``serve_app`` on 127.0.0.1:
- ``random names``: the schema as served, so path parameters are arbitrary strings;
- ``real profile``: the profile, session and memory path parameters pinned to a
  profile created first (plus a missing memory and session), so the generated
  bodies and queries reach a live profile actor and its store.
Both are bounded (``max_examples`` per operation) to keep the file near two minutes here.
"""

import copy
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.failures import FailureGroup

# Archives (import bodies, export responses) are JSON Lines: give schemathesis bytes to send
# (a tiny valid-looking archive, or noise) and a way to read what comes back.
schemathesis.openapi.media_type(
    "application/x-ndjson",
    st.one_of(
        st.just(
            b'{"kind":"header","format":1,"profile":"x","ledger_seq":0,'
            b'"counts":{"sessions":0,"messages":0,"memories":0}}\n'
        ),
        st.binary(max_size=256),
    ),
)


@schemathesis.deserializer("application/x-ndjson")
def _read_ndjson(ctx: Any, response: Any) -> str:
    return response.content.decode("utf-8", errors="replace")


REAL_PROFILE = "fuzz-real"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
FUZZ_SETTINGS = settings(
    max_examples=6,
    deadline=None,
    derandomize=True,  # the same cases every run: a failure here is reproducible
    suppress_health_check=list(HealthCheck),
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: the first failing case is reported
)


@pytest.fixture(scope="module")
def served_schema(serve_app: str) -> dict[str, Any]:
    response = httpx.get(f"{serve_app}/openapi.json", timeout=30)
    assert response.status_code == 200
    return dict(response.json())


@pytest.fixture(scope="module")
def real_profile(serve_app: str) -> Iterator[dict[str, str]]:
    """A profile with a session and a memory, for the pinned run; re-created after each case."""
    with httpx.Client(base_url=serve_app, timeout=60) as client:
        yield _ensure_profile(client)


def _ensure_profile(client: httpx.Client) -> dict[str, str]:
    base = f"/v1/profiles/{REAL_PROFILE}"
    body = {
        "session_id": "s1",
        "messages": [
            {"role": "user", "content": "I moved to Lisbon in March and I use pnpm."},
            {"role": "assistant", "content": "Noted: Lisbon since March, pnpm."},
        ],
    }
    assert client.post(f"{base}/ingest", json=body).status_code == 200
    memory = client.post(f"{base}/memories", json={"content": "The office wifi is Bluebird."})
    assert memory.status_code == 201, memory.text
    return {"memory_id": memory.json()["id"], "session_id": "s1"}


@pytest.fixture(scope="module")
def random_names(serve_app: str, served_schema: dict[str, Any]) -> Any:
    schema = schemathesis.openapi.from_dict(copy.deepcopy(served_schema))
    schema.config.update(base_url=serve_app)
    return schema


@pytest.fixture(scope="module")
def real_names(serve_app: str, served_schema: dict[str, Any], real_profile: dict[str, str]) -> Any:
    raw = copy.deepcopy(served_schema)
    pinned = {
        "profile": [REAL_PROFILE],
        "session_id": [real_profile["session_id"], "never-started"],
        "memory_id": [real_profile["memory_id"], "0" * 32],
    }
    for operations in raw["paths"].values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path" and parameter["name"] in pinned:
                    parameter["schema"] = {"type": "string", "enum": pinned[parameter["name"]]}
    schema = schemathesis.openapi.from_dict(raw)
    schema.config.update(base_url=serve_app)
    return schema


def fuzz(schema: Any, after: Any = None) -> list[str]:
    """Run every operation in positive and negative mode; the failures, one line each."""
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @FUZZ_SETTINGS
            def run(case: Any) -> None:
                try:
                    case.call_and_validate(checks=CHECKS, timeout=60)
                finally:
                    if after is not None:
                        after(case)

            try:
                run()
            except FailureGroup as group:
                for failure in group.exceptions:
                    detail = " ".join(str(getattr(failure, "message", failure)).split())[:300]
                    title = getattr(failure, "title", type(failure).__name__)
                    failures.append(f"{operation.label} [{mode.value}] {title}: {detail}")
    return failures


def test_random_names(random_names: Any) -> None:
    failures = fuzz(random_names)
    assert not failures, "\n".join(sorted(set(failures)))


def test_real_profile(real_names: Any, serve_app: str) -> None:
    client = httpx.Client(base_url=serve_app, timeout=60)

    def recreate(case: Any) -> None:
        if case.method == "DELETE" and case.path == "/v1/profiles/{profile}":
            _ensure_profile(client)  # keep exercising a live profile after a deletion

    with client:
        failures = fuzz(real_names, recreate)
    assert not failures, "\n".join(sorted(set(failures)))


# ------------------------------------------- cases the fuzzer and probing found
# Each is a client mistake that must be a 4xx naming the field, never a 500.


def _error(response: httpx.Response, status: int, fragment: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"code", "message"} and fragment in error["message"], error


@pytest.fixture
def http_client(serve_app: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=serve_app, timeout=60) as client:
        yield client


@pytest.mark.parametrize("cursor", ["9223372036854775808", "9" * 40, "\u00b2", "\u00b9\u00b2"])
def test_a_cursor_beyond_any_page_is_400(http_client, profile_name, cursor):
    http_client.post(f"/v1/profiles/{profile_name}/memories", json={"content": "Cursor test."})
    response = http_client.get(f"/v1/profiles/{profile_name}/memories", params={"cursor": cursor})
    _error(response, 400, "cursor")


@pytest.mark.parametrize(
    ("content", "created_at"),
    [
        ("Plain words about tea.", "0001-01-01T00:00:00+01:00"),
        ("Plain words about tea.", "9999-12-31T23:59:59-01:00"),
        ("Tomorrow I fly to Rome.", "9999-12-31T23:59:59Z"),
        ("Yesterday I bought a car, last week a bike.", "0001-01-01T00:00:00Z"),
    ],
)
def test_message_times_at_the_edge_of_the_calendar_are_not_500(
    http_client, profile_name, content, created_at
):
    base = f"/v1/profiles/{profile_name}"
    message = {"role": "user", "content": content, "created_at": created_at}
    ingested = http_client.post(f"{base}/ingest", json={"session_id": "s1", "messages": [message]})
    assert ingested.status_code in (200, 400), ingested.text
    if ingested.status_code == 400:
        _error(ingested, 400, "created_at")
    appended = http_client.post(f"{base}/sessions/s2/messages", json=message)
    assert appended.status_code in (201, 400), appended.text
    if appended.status_code == 201:
        ended = http_client.post(f"{base}/sessions/s2/end")
        assert ended.status_code == 200, ended.text
    else:
        _error(appended, 400, "created_at")


def test_a_rejected_import_leaves_no_profile_behind(http_client, profile_name):
    response = http_client.post(f"/v1/profiles/{profile_name}/import", content=b"not an archive\n")
    _error(response, 400, "archive")
    names = [p["name"] for p in http_client.get("/v1/profiles").json()["profiles"]]
    assert profile_name not in names
    recall = http_client.post(f"/v1/profiles/{profile_name}/recall", json={"query": "anything"})
    _error(recall, 404, profile_name)


def test_an_archive_cannot_smuggle_in_an_invalid_session_name(http_client, profile_name):
    source = f"{profile_name}-src"
    body = {"session_id": "s1", "messages": [{"role": "user", "content": "I drink green tea."}]}
    assert http_client.post(f"/v1/profiles/{source}/ingest", json=body).status_code == 200
    archive = http_client.get(f"/v1/profiles/{source}/export").text
    evil = archive.replace('"session_id":"s1"', '"session_id":"../../evil"').replace(
        '"id":"s1"', '"id":"../../evil"'
    )
    assert evil != archive
    response = http_client.post(f"/v1/profiles/{profile_name}/import", content=evil.encode())
    _error(response, 400, "session")
