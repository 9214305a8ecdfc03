"""Tenancy and isolation through real Ray Serve with API keys.

A second Serve application ("raymem-auth", route prefix ``/auth``) runs in the
same cluster as the keyless ``serve_app``, with its own data directory,
namespace and keys: alice, bob, a read-only key of alice and a key of alice
limited to the profile ``p1``.
"""

import concurrent.futures
import http.client
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec
import pytest
from conftest import wait_until

from raymem.actors.catalog import CATALOG_FILE
from raymem.actors.layout import DISK_FILE
from raymem.config import ApiKey, AuthSettings, ConfigError, Settings, hash_key, load_settings
from raymem.serve.auth import check_listen_address, is_loopback
from raymem.types import NAME_PATTERN

KEY_A = "alice-key-5b1d0e"
KEY_B = "bob-key-9c2f7a"
KEY_RO = "alice-read-only-key-31d4"
KEY_P1 = "alice-p1-only-key-77e0"
MAX_CONCURRENT = 4  # per key, low so the 429 test can reach it

_counter = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_counter)}"


@pytest.fixture(scope="module")
def auth_app(serve_app: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A second raymem app with API keys, under ``/auth`` on the same Serve proxy."""
    from ray import serve

    from raymem.serve.app import build_app

    data_dir = tmp_path_factory.mktemp("auth-data")
    settings = load_settings(
        environ={"RAYMEM_DATA_DIR": str(data_dir), "RAYMEM_API_KEYS": f"alice={KEY_A},bob={KEY_B}"}
    )
    keys = [
        *settings.auth.keys,
        ApiKey(tenant="alice", key_sha256=hash_key(KEY_RO), read_only=True),
        ApiKey(tenant="alice", key_sha256=hash_key(KEY_P1), profiles=["p1"]),
    ]
    settings = msgspec.structs.replace(
        settings,
        app_name="raymem-auth",
        namespace="raymem-auth",
        auth=AuthSettings(keys=keys),
        server=msgspec.structs.replace(settings.server, max_concurrent_per_key=MAX_CONCURRENT),
    )
    serve.run(build_app(settings), name="raymem-auth", route_prefix="/auth", blocking=False)

    def healthy() -> bool:
        try:
            return httpx.get(f"{serve_app}/auth/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(healthy, timeout=120)
    yield settings
    serve.delete("raymem-auth")


@pytest.fixture(scope="module")
def auth_url(serve_app: str, auth_app: Settings) -> str:
    return f"{serve_app}/auth"


@pytest.fixture
def anon(auth_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=auth_url, timeout=60) as client:
        yield client


def _client(url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {key}"})


@pytest.fixture
def alice(auth_url: str) -> Iterator[httpx.Client]:
    with _client(auth_url, KEY_A) as client:
        yield client


@pytest.fixture
def bob(auth_url: str) -> Iterator[httpx.Client]:
    with _client(auth_url, KEY_B) as client:
        yield client


@pytest.fixture
def read_only(auth_url: str) -> Iterator[httpx.Client]:
    with _client(auth_url, KEY_RO) as client:
        yield client


@pytest.fixture
def p1_only(auth_url: str) -> Iterator[httpx.Client]:
    with _client(auth_url, KEY_P1) as client:
        yield client


# --------------------------------------------------------------- helpers


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, str]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"code", "message"} and error["message"]
    assert "Traceback" not in error["message"]
    if code is not None:
        assert error["code"] == code, error
    return error


def ingest_body(content: str, session: str = "s1") -> dict[str, Any]:
    return {"session_id": session, "messages": [{"role": "user", "content": content}]}


def seed(client: httpx.Client, profile: str, secret: str) -> str:
    """A profile with a session s1 (two turns) and a remembered memory; returns that memory's id."""
    base = f"/v1/profiles/{profile}"
    response = client.post(f"{base}/ingest", json=ingest_body(f"My locker code is {secret}."))
    assert response.status_code == 200, response.text
    response = client.post(
        f"{base}/sessions/s1/messages", json={"role": "user", "content": f"Remind me: {secret}."}
    )
    assert response.status_code == 201, response.text
    response = client.post(f"{base}/memories", json={"content": f"The vault word is {secret}."})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def fingerprint(client: httpx.Client, profile: str) -> dict[str, Any]:
    """What a profile holds, read by its owner: counts, memories and the turns of s1."""
    base = f"/v1/profiles/{profile}"
    [info] = [p for p in client.get("/v1/profiles").json()["profiles"] if p["name"] == profile]
    memories = client.get(f"{base}/memories", params={"include_superseded": "true"}).json()
    messages = client.get(f"{base}/sessions/s1/messages").json()
    return {
        "info": info,
        "memories": sorted(
            (m["id"], m["content"], m["forgotten_at"]) for m in memories["memories"]
        ),
        "messages": [(m["id"], m["content"]) for m in messages["messages"]],
    }


# (method, path, body): {p} profile, {s} session, {m} memory id. Every route naming a profile.
READS = [
    ("POST", "/v1/profiles/{p}/recall", {"query": "What is the locker code?"}),
    ("GET", "/v1/profiles/{p}/memories", None),
    ("GET", "/v1/profiles/{p}/memories/{m}", None),
    ("GET", "/v1/profiles/{p}/sessions", None),
    ("GET", "/v1/profiles/{p}/sessions/{s}/messages", None),
    ("POST", "/v1/profiles/{p}/context", {"query": "What is the locker code?"}),
    ("GET", "/v1/profiles/{p}/blocks", None),
    ("GET", "/v1/profiles/{p}/working-memory", None),
    ("GET", "/v1/profiles/{p}/work-items", None),
    ("GET", "/v1/profiles/{p}/episodes", None),
    ("GET", "/v1/profiles/{p}/refs/mem_{m}", None),
    ("GET", "/v1/profiles/{p}/export", None),  # last: tests read the archive as READS[-1]
]
WRITES = [  # writes that never create a profile
    ("DELETE", "/v1/profiles/{p}/memories/{m}", None),
    ("POST", "/v1/profiles/{p}/sessions/{s}/end", None),
    ("DELETE", "/v1/profiles/{p}/sessions/{s}", None),
    ("POST", "/v1/profiles/{p}/snapshot", None),
    ("DELETE", "/v1/profiles/{p}/blocks/style", None),
    ("PUT", "/v1/profiles/{p}/blocks/user/entries", {"old": "Tea.", "new": "Coffee."}),
    ("DELETE", "/v1/profiles/{p}/blocks/user/entries", {"content": "Tea."}),
    ("PATCH", "/v1/profiles/{p}/work-items/{m}", {"add_todos": ["Call back"]}),
    ("POST", "/v1/profiles/{p}/work-items/{m}/close", {}),
    ("DELETE", "/v1/profiles/{p}", None),
]
CREATING_WRITES = [
    ("POST", "/v1/profiles/{p}/ingest", ingest_body("I prefer green tea in the morning.")),
    ("POST", "/v1/profiles/{p}/memories", {"content": "Green tea in the morning."}),
    ("POST", "/v1/profiles/{p}/sessions/{s}/messages", {"role": "user", "content": "Hi there."}),
    ("POST", "/v1/profiles/{p}/import", b'{"kind": "header"}\n'),
    ("PUT", "/v1/profiles/{p}/blocks/style", {"limit": 200}),
    ("POST", "/v1/profiles/{p}/blocks/user/entries", {"content": "Green tea."}),
    ("POST", "/v1/profiles/{p}/work-items", {"objective": "Buy green tea."}),
    ("POST", "/v1/profiles/{p}/flush", ingest_body("I prefer green tea.")),
]
PROFILE_ROUTES = READS + WRITES + CREATING_WRITES


def send(
    client: httpx.Client,
    route: tuple[str, str, Any],
    profile: str,
    memory_id: str = "0" * 32,
    session: str = "s1",
) -> httpx.Response:
    method, template, body = route
    path = template.format(p=profile, m=memory_id, s=session)
    if isinstance(body, bytes):
        return client.request(method, path, content=body)
    return client.request(method, path, json=body)


def data_dirs(settings: Settings) -> set[str]:
    """Every profile directory under the data directory, as ``tenant/profile``."""
    root = Path(settings.data_dir)
    return {str(p.parent.relative_to(root)) for p in root.rglob("profile.db")}


# ------------------------------------------------------------------ tests


def test_routes_work_under_a_route_prefix_beside_the_keyless_app(serve_app, auth_url, alice):
    assert httpx.get(f"{auth_url}/healthz", timeout=60).json()["status"] == "ok"
    assert alice.get("/v1/profiles").status_code == 200
    # the keyless app at "/" still needs no key; the keyed one under /auth does
    assert httpx.get(f"{serve_app}/v1/profiles", timeout=60).status_code == 200
    assert_error(httpx.get(f"{auth_url}/v1/profiles", timeout=60), 401, "unauthorized")


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        f"Basic {KEY_A}",
        KEY_A,
        "Bearer wrong-key",
        f"Bearer {KEY_A}x",
        f"Bearer {KEY_A[:-1]}",
        f"Bearer {hash_key(KEY_A)}",  # the stored hash is not a key
    ],
    ids=[
        "absent",
        "empty",
        "scheme-only",
        "basic",
        "no-scheme",
        "unknown",
        "suffix",
        "prefix",
        "hash",
    ],
)
def test_missing_or_invalid_key_is_401_on_every_route(anon, auth_app, authorization):
    headers = {} if authorization is None else {"Authorization": authorization}
    name = unique("nokey")
    for route in [*PROFILE_ROUTES, ("GET", "/v1/profiles", None)]:
        method, template, body = route
        path = template.format(p=name, m="0" * 32, s="s1")
        kwargs = {"content": body} if isinstance(body, bytes) else {"json": body}
        response = anon.request(method, path, headers=headers, **kwargs)
        error = assert_error(response, 401, "unauthorized")
        scheme, _, token = (authorization or "").partition(" ")
        expected = "Invalid API key" if scheme == "Bearer" and token.strip() else "Bearer <key>"
        assert expected in error["message"], (route, error)
    assert not [d for d in data_dirs(auth_app) if d.endswith(name)]


def test_a_valid_key_is_accepted_with_any_scheme_case(auth_url):
    with httpx.Client(base_url=auth_url, headers={"Authorization": f"bearer {KEY_A}"}) as client:
        assert client.get("/v1/profiles").status_code == 200


def test_another_tenants_profile_is_indistinguishable_from_a_missing_one(alice, bob):
    bobs = unique("bob-profile")
    missing = unique("zz-missing")  # same length as bobs, never created by anyone
    memory_id = seed(bob, bobs, "OSPREY-4471")
    before = fingerprint(bob, bobs)
    for route in READS + WRITES:
        leaked = send(alice, route, bobs, memory_id)
        absent = send(alice, route, missing, memory_id)
        assert_error(leaked, 404, "profile_not_found")
        assert leaked.status_code == absent.status_code, route
        assert leaked.text.replace(bobs, "NAME") == absent.text.replace(missing, "NAME"), route
        assert "OSPREY" not in leaked.text
        assert set(leaked.headers) - {"date", "x-request-id"} == set(absent.headers) - {
            "date",
            "x-request-id",
        }
    # bob still reads all of it, and nothing of his changed
    for route in READS:
        assert send(bob, route, bobs, memory_id).status_code == 200, route
    assert fingerprint(bob, bobs) == before
    assert bobs not in [p["name"] for p in alice.get("/v1/profiles").json()["profiles"]]


def test_writes_to_a_name_bob_uses_go_to_alices_own_profile(alice, bob, auth_app):
    shared = unique("shared")
    bob_memory = seed(bob, shared, "HERON-9012")
    before = fingerprint(bob, shared)
    for route in CREATING_WRITES[:3]:
        response = send(alice, route, shared)
        assert response.status_code in (200, 201), (route, response.text)
    # alice's profile of that name is hers: it lacks bob's memory and secret
    assert_error(alice.get(f"/v1/profiles/{shared}/memories/{bob_memory}"), 404, "memory_not_found")
    mine = alice.get(f"/v1/profiles/{shared}/memories", params={"include_superseded": "true"})
    assert mine.status_code == 200 and "HERON" not in mine.text
    assert mine.json()["memories"]
    recall = alice.post(
        f"/v1/profiles/{shared}/recall", json={"query": "What is the locker code HERON-9012?"}
    )
    assert recall.status_code == 200 and "HERON" not in recall.text
    export = alice.get(f"/v1/profiles/{shared}/export")
    assert export.status_code == 200 and "HERON" not in export.text
    # and alice's deleting her profile leaves bob's alone
    assert alice.delete(f"/v1/profiles/{shared}").status_code == 204
    assert fingerprint(bob, shared) == before
    dirs = data_dirs(auth_app)
    assert f"bob/{shared}" in dirs and f"alice/{shared}" not in dirs


CRAFTED = [
    "..%2F{bob}",
    "..%2Fbob%2F{bob}",
    "..%2F..%2Fbob%2F{bob}",
    "%2E%2E%2Fbob%2F{bob}",
    "%2e%2e%2fbob%2f{bob}",
    "%2E%2E",
    "..",
    "%2E",
    "bob%2F{bob}",
    "bob%5C{bob}",
    "..%5Cbob%5C{bob}",
    "{bob}%00",
    "{bob}%20",
    "%20{bob}",
    "{bob}%0A",
    ".{bob}",
    "~bob",
    "%2A",  # "*": the wildcard of key scopes
    "{bob}%E2%80%8B",  # zero-width space
    "{bob_cyrillic}",  # "о" (U+043E) for "o"
    "{bob_fullwidth}",
    "a" * 129,
    "{bob}" + "a" * 129,
]


def _craft(template: str, bobs: str) -> str:
    cyrillic = bobs.replace("o", "\u043e", 1).encode()
    fullwidth = "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in bobs).encode()
    return template.format(
        bob=bobs,
        bob_cyrillic="".join(f"%{b:02X}" if b > 127 else chr(b) for b in cyrillic),
        bob_fullwidth="".join(f"%{b:02X}" if b > 127 else chr(b) for b in fullwidth),
    )


def raw_request(
    url: str, method: str, path: str, key: str, body: Any = None
) -> tuple[int, dict[str, Any] | None, str]:
    """Send ``path`` byte for byte (httpx would normalise dot segments); status, JSON, text."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        payload = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        conn.request(method, parts.path + path, body=payload, headers=headers)
        response = conn.getresponse()
        text = response.read().decode()
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = None
        return response.status, parsed, text
    finally:
        conn.close()


def test_crafted_names_never_reach_another_tenant(auth_url, alice, bob, auth_app):
    bobs = unique("bob-crafted")
    memory_id = seed(bob, bobs, "MARTEN-5530")
    before = fingerprint(bob, bobs)
    dirs_before = data_dirs(auth_app)
    for template in CRAFTED:
        name = _craft(template, bobs)
        for method, route_template, body in PROFILE_ROUTES:
            path = route_template.format(p=name, m=memory_id, s="s1")
            status, parsed, text = raw_request(auth_url, method, path, KEY_A, body)
            assert status in (400, 404, 405), (name, method, path, status, text)
            assert parsed is not None and set(parsed) == {"error"}, (path, text)
            assert "MARTEN" not in text
            if status == 404:
                assert parsed["error"]["code"] in ("not_found", "profile_not_found"), (path, text)
    assert fingerprint(bob, bobs) == before
    new_dirs = data_dirs(auth_app) - dirs_before
    assert not new_dirs, new_dirs
    for entry in Path(auth_app.data_dir).iterdir():
        if entry.name == DISK_FILE:  # the service's own: which disk this data_dir is
            continue
        if entry.name == CATALOG_FILE.parent.name:  # the service's own: the profile catalog
            catalog = CATALOG_FILE.name
            assert {f.name for f in entry.iterdir()} <= {
                catalog,
                f"{catalog}-wal",
                f"{catalog}-shm",
            }
            continue
        assert entry.name in ("alice", "bob"), entry
    for relative in data_dirs(auth_app):
        tenant, profile = relative.split("/")
        assert tenant in ("alice", "bob") and re.fullmatch(NAME_PATTERN, profile), relative


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("ingest", {**ingest_body("Bob's budget is 40k."), "tenant": "bob"}),
        ("ingest", {**ingest_body("Bob's budget is 40k."), "profile": "{bob}"}),
        ("memories", {"content": "Bob's budget is 40k.", "tenant": "bob"}),
        ("memories", {"content": "Bob's budget is 40k.", "owner": "bob"}),
        ("recall", {"query": "budget", "tenant": "bob"}),
        ("recall", {"query": "budget", "profile": "{bob}"}),
        ("sessions/s1/messages", {"role": "user", "content": "budget", "tenant": "bob"}),
        (
            "ingest",
            {"session_id": "s1", "messages": [{"role": "user", "content": "x", "tenant": "bob"}]},
        ),
    ],
)
def test_identity_fields_in_bodies_are_rejected_and_write_nothing(
    alice, bob, auth_app, route, body
):
    bobs = unique("bob-body")
    seed(bob, bobs, "ZEBU-1188")
    before = fingerprint(bob, bobs)
    target = unique("alice-body")
    text = json.dumps(body).replace("{bob}", bobs)
    response = alice.post(
        f"/v1/profiles/{target}/{route}",
        content=text,
        headers={"Content-Type": "application/json"},
    )
    error = assert_error(response, 400, "invalid_request")
    field = next(k for k in ("tenant", "profile", "owner") if k in text)
    assert field in error["message"]
    assert fingerprint(bob, bobs) == before
    assert not [d for d in data_dirs(auth_app) if d.endswith(target)]
    # the same body aimed at bob's own name, from alice, fails the same way
    response = alice.post(
        f"/v1/profiles/{bobs}/{route}", content=text, headers={"Content-Type": "application/json"}
    )
    assert response.status_code in (400, 404), response.text
    assert fingerprint(bob, bobs) == before


def test_identity_in_the_query_string_is_ignored(alice, bob):
    shared = unique("shared-q")
    seed(bob, shared, "IBEX-2204")
    seed(alice, shared, "OTTER-6615")
    for params in ({"tenant": "bob"}, {"api_key": KEY_B}, {"profile": shared, "tenant": "bob"}):
        listed = alice.get(f"/v1/profiles/{shared}/memories", params=params)
        assert listed.status_code == 200, listed.text
        assert "OTTER" in listed.text and "IBEX" not in listed.text
        profiles = alice.get("/v1/profiles", params=params).json()["profiles"]
        assert shared in [p["name"] for p in profiles]


def test_list_profiles_shows_only_the_callers_profiles(alice, bob, auth_app):
    bobs, alices = unique("bob-only"), unique("alice-only")
    seed(bob, bobs, "KUDU-3301")
    seed(alice, alices, "LYNX-8842")
    alice_names = {p["name"] for p in alice.get("/v1/profiles").json()["profiles"]}
    bob_names = {p["name"] for p in bob.get("/v1/profiles").json()["profiles"]}
    assert alices in alice_names and bobs not in alice_names
    assert bobs in bob_names and alices not in bob_names
    dirs = data_dirs(auth_app)
    assert {f"alice/{n}" for n in alice_names} <= dirs
    assert {f"bob/{n}" for n in bob_names} <= dirs
    assert (Path(auth_app.data_dir) / "alice" / alices / "profile.db").is_file()
    assert (Path(auth_app.data_dir) / "bob" / bobs / "profile.db").is_file()


def test_read_only_key_reads_but_every_write_is_403(alice, read_only, auth_app):
    mine = unique("alice-ro")
    memory_id = seed(alice, mine, "TAPIR-7720")
    before = fingerprint(alice, mine)
    for route in READS:
        response = send(read_only, route, mine, memory_id)
        assert response.status_code == 200, (route, response.text)
    assert "TAPIR" in send(read_only, READS[0], mine).text  # recall finds it
    assert "TAPIR" in send(read_only, READS[-1], mine).text  # export carries it
    listed = read_only.get("/v1/profiles").json()["profiles"]
    assert mine in [p["name"] for p in listed]
    never = unique("ro-never")
    for route in WRITES + CREATING_WRITES:
        for name in (mine, never):
            error = assert_error(send(read_only, route, name, memory_id), 403, "forbidden")
            assert "read-only" in error["message"]
    assert fingerprint(alice, mine) == before
    assert not [d for d in data_dirs(auth_app) if d.endswith(never)]


def test_key_limited_to_p1_sees_other_profiles_as_missing(alice, p1_only, auth_app):
    other = unique("p2")
    missing = unique("zz")  # same length as other
    memory_id = seed(alice, other, "GECKO-4410")
    before = fingerprint(alice, other)
    first = p1_only.post("/v1/profiles/p1/ingest", json=ingest_body("The p1 key works here."))
    assert first.status_code == 200, first.text
    assert p1_only.post("/v1/profiles/p1/recall", json={"query": "p1 key"}).status_code == 200
    for route in READS + WRITES + CREATING_WRITES:
        hidden = send(p1_only, route, other, memory_id)
        absent = send(p1_only, route, missing, memory_id)
        assert_error(hidden, 404, "profile_not_found")
        assert hidden.text.replace(other, "NAME") == absent.text.replace(missing, "NAME"), route
    assert [p["name"] for p in p1_only.get("/v1/profiles").json()["profiles"]] == ["p1"]
    assert fingerprint(alice, other) == before
    assert not [d for d in data_dirs(auth_app) if d.endswith(missing)]
    assert (Path(auth_app.data_dir) / "alice" / "p1" / "profile.db").is_file()


def test_concurrent_requests_beyond_the_per_key_cap_are_429(auth_url, alice, bob):
    name = unique("burst")
    turns = [
        {"role": "user", "content": f"Burst fact {i}: item {i} costs {i} euros."}
        for i in range(150)
    ]

    def one(index: int) -> httpx.Response:
        with _client(auth_url, KEY_A) as client:
            return client.post(
                f"/v1/profiles/{name}/ingest", json={"session_id": f"b{index}", "messages": turns}
            )

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        responses = list(pool.map(one, range(16)))
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 429}, statuses
    limited = [r for r in responses if r.status_code == 429]
    assert limited, statuses
    for response in limited:
        assert_error(response, 429, "too_many_requests")
        assert response.headers["retry-after"] == "1"
    # every acknowledged ingest is there; the refused ones wrote nothing
    sessions = {s["id"]: s for s in alice.get(f"/v1/profiles/{name}/sessions").json()["sessions"]}
    accepted = {f"b{i}" for i, r in enumerate(responses) if r.status_code == 200}
    assert set(sessions) == accepted
    # the cap counts requests in flight, not forever: the key works again, bob was never capped
    assert alice.get("/v1/profiles").status_code == 200
    assert alice.post(f"/v1/profiles/{name}/recall", json={"query": "item 3"}).status_code == 200
    assert bob.get("/v1/profiles").status_code == 200


# --------------------------------------------------------- listen address


def _with(settings: Settings, host: str, keys: list[ApiKey] | None = None) -> Settings:
    return msgspec.structs.replace(
        settings,
        server=msgspec.structs.replace(settings.server, host=host),
        auth=AuthSettings(keys=keys or []),
    )


@pytest.mark.parametrize(
    "host", ["0.0.0.0", "::", "192.168.1.20", "10.0.0.1", "example.com", "", "127.0.0.1.nip.io"]
)
def test_refuses_to_listen_beyond_loopback_without_keys(tmp_path, host):
    settings = _with(load_settings(environ={"RAYMEM_DATA_DIR": str(tmp_path)}), host)
    assert not is_loopback(host)
    with pytest.raises(ValueError, match="without API keys") as info:
        check_listen_address(settings)
    assert "RAYMEM_API_KEYS" in str(info.value) and "127.0.0.1" in str(info.value)
    # the server refuses before it starts anything
    from raymem.serve import server

    with pytest.raises(ValueError, match="without API keys"):
        server.start(settings)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_is_allowed_without_keys(tmp_path, host):
    settings = _with(load_settings(environ={"RAYMEM_DATA_DIR": str(tmp_path)}), host)
    check_listen_address(settings)


def test_any_address_is_allowed_with_keys(tmp_path):
    settings = load_settings(
        environ={"RAYMEM_DATA_DIR": str(tmp_path), "RAYMEM_API_KEYS": "alice=k1"}
    )
    check_listen_address(_with(settings, "0.0.0.0", settings.auth.keys))


# ----------------------------------------------------- key configuration


def test_keys_are_stored_as_hashes(tmp_path):
    settings = load_settings(
        environ={"RAYMEM_DATA_DIR": str(tmp_path), "RAYMEM_API_KEYS": f"alice={KEY_A}"}
    )
    [key] = settings.auth.keys
    assert key.tenant == "alice" and key.key_sha256 == hash_key(KEY_A)
    assert KEY_A not in msgspec.json.encode(settings).decode()


@pytest.mark.parametrize("tenant", ["../escape", "a/b", ".hidden", "", "a" * 129, "t\u0435st"])
def test_unsafe_tenant_names_are_a_configuration_error(tmp_path, tenant):
    # A tenant becomes a directory under data_dir and the prefix of actor names: tenant
    # "a/b" would keep its profile "c" inside tenant "a"'s profile "b".
    with pytest.raises(ConfigError):
        load_settings(
            environ={"RAYMEM_DATA_DIR": str(tmp_path), "RAYMEM_API_KEYS": f"{tenant}=some-key"}
        )


def test_one_key_for_two_tenants_is_a_configuration_error(tmp_path):
    # Otherwise the key silently authenticates as whichever tenant is listed last.
    with pytest.raises(ConfigError):
        load_settings(
            environ={"RAYMEM_DATA_DIR": str(tmp_path), "RAYMEM_API_KEYS": "alice=same,bob=same"}
        )
