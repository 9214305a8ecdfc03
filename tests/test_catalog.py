"""The profile catalog: listing without opening files, across hibernation, deletion and restarts."""

import shutil
import signal
import subprocess
import sys
import uuid

import httpx
import msgspec
from conftest import free_port, wait_until

from raymem.actors.calls import ProfileCalls, run_blocking
from raymem.actors.catalog import CATALOG_FILE, CatalogClient
from raymem.actors.layout import profile_path
from raymem.actors.registry import ProfileRouter
from raymem.types import IngestRequest, MessageIn, ProfileInfo

RAYMEM = [sys.executable, "-m", "raymem.cli"]


def listed(http: httpx.Client, name: str) -> dict[str, int] | None:
    for info in http.get("/v1/profiles").json()["profiles"]:
        if info["name"] == name:
            return {k: info[k] for k in ("messages", "memories", "sessions")}
    return None


def ingest(calls: ProfileCalls, *texts: str, session: str = "s1") -> None:
    turns = [MessageIn(role="user", content=text) for text in texts]
    run_blocking(calls.ingest(IngestRequest(session_id=session, messages=turns)))


def test_a_hibernated_profile_is_listed_with_its_counts_and_stays_asleep(
    serve_app, server_settings, http
):
    quick = msgspec.structs.replace(
        server_settings,
        profiles=msgspec.structs.replace(server_settings.profiles, idle_timeout_s=0.5),
    )
    router = ProfileRouter(quick)
    name = f"sleeper-{uuid.uuid4().hex[:8]}"
    calls = ProfileCalls(router, "default", name)
    ingest(calls, "I keep bees on the roof.", "My dog is called Pixel.")
    wait_until(lambda: run_blocking(router.live_host("default", name)) is None, timeout=30)

    assert listed(http, name) == {"messages": 2, "memories": 2, "sessions": 1}
    assert run_blocking(router.live_host("default", name)) is None  # listing never wakes a profile


def test_a_listing_right_after_a_write_shows_it(serve_app, server_settings, http):
    calls = ProfileCalls(ProfileRouter(server_settings), "default", f"fresh-{uuid.uuid4().hex[:8]}")
    ingest(calls, "The kettle is in the left cupboard.")
    assert listed(http, calls.profile) == {"messages": 1, "memories": 1, "sessions": 1}
    ingest(calls, "The mugs are above the sink.", session="s2")  # within the report delay
    assert listed(http, calls.profile) == {"messages": 2, "memories": 2, "sessions": 2}


def test_a_deleted_hibernated_profile_leaves_the_listing(serve_app, server_settings, http):
    quick = msgspec.structs.replace(
        server_settings,
        profiles=msgspec.structs.replace(server_settings.profiles, idle_timeout_s=0.5),
    )
    router = ProfileRouter(quick)
    name = f"gone-{uuid.uuid4().hex[:8]}"
    ingest(ProfileCalls(router, "default", name), "Delete me later.")
    wait_until(lambda: run_blocking(router.live_host("default", name)) is None, timeout=30)
    assert listed(http, name) is not None

    assert http.delete(f"/v1/profiles/{name}").status_code == 204
    assert listed(http, name) is None
    assert not run_blocking(router.exists("default", name))
    missing = http.post(f"/v1/profiles/{name}/recall", json={"query": "anything"})
    assert missing.status_code == 404


def test_a_profile_copied_into_the_data_dir_is_found(serve_app, server_settings, http):
    quick = msgspec.structs.replace(
        server_settings,
        profiles=msgspec.structs.replace(server_settings.profiles, idle_timeout_s=0.5),
    )
    router = ProfileRouter(quick)
    original, copy = f"original-{uuid.uuid4().hex[:8]}", f"restored-{uuid.uuid4().hex[:8]}"
    ingest(ProfileCalls(router, "default", original), "The wifi password is on the fridge.")
    wait_until(lambda: run_blocking(router.live_host("default", original)) is None, timeout=30)
    tenant_dir = profile_path(server_settings, "default", original).parent.parent
    shutil.copytree(tenant_dir / original, tenant_dir / copy)  # a backup put back by hand

    memories = http.get(f"/v1/profiles/{copy}/memories")
    assert memories.status_code == 200, memories.text
    assert [m["content"] for m in memories.json()["memories"]] == [
        "The wifi password is on the fridge."
    ]
    assert listed(http, copy) == {"messages": 1, "memories": 1, "sessions": 1}


def test_tenants_never_see_each_others_profiles(serve_app, server_settings, tmp_path):
    settings = msgspec.structs.replace(
        server_settings, namespace=f"raymem-catalog-{uuid.uuid4().hex[:6]}", data_dir=str(tmp_path)
    )
    catalog = CatalogClient(settings)

    def counts(name: str, messages: int) -> ProfileInfo:
        return ProfileInfo(name=name, messages=messages, memories=0, sessions=1)

    run_blocking(catalog.report("alice", "notes", counts("notes", 3), None))
    run_blocking(catalog.report("bob", "notes", counts("notes", 7), None))
    run_blocking(catalog.report("bob", "diary", counts("diary", 1), None))

    assert run_blocking(catalog.profiles("alice")) == [counts("notes", 3)]
    assert run_blocking(catalog.profiles("bob")) == [counts("diary", 1), counts("notes", 7)]
    assert run_blocking(catalog.profiles("bob", only=["notes", "other"])) == [counts("notes", 7)]
    assert run_blocking(catalog.exists("bob", "diary"))
    assert not run_blocking(catalog.exists("alice", "diary"))
    assert run_blocking(catalog.profiles("carol")) == []
    run_blocking(catalog.forget("bob", "notes"))
    assert run_blocking(catalog.profiles("bob")) == [counts("diary", 1)]
    assert run_blocking(catalog.profiles("alice")) == [counts("notes", 3)]
    assert (tmp_path / CATALOG_FILE).exists()  # beside the tenants, under a name none can take


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_listing_survives_restarts_and_finds_profiles_of_an_older_version(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    data = tmp_path / "data"
    config = tmp_path / "raymem.toml"
    config.write_text(f'data_dir = "{data}"\n[server]\nport = {port}\n')

    def start() -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [*RAYMEM, "--config", str(config), "serve"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wait_until(lambda: _healthy(url) or process.poll() is not None, timeout=180, interval=0.5)
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        return process

    def stop(process: subprocess.Popen[str]) -> None:
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 0, output

    expected = {
        "attic": {"messages": 2, "memories": 2, "sessions": 1},
        "barn": {"messages": 1, "memories": 1, "sessions": 1},
    }
    server = start()
    try:
        with httpx.Client(base_url=url, timeout=120) as http:
            turns = ["The ladder is in the attic.", "The attic window sticks."]
            for profile, texts in (("attic", turns), ("barn", ["The barn roof leaks."])):
                body = {
                    "session_id": "s1",
                    "messages": [{"role": "user", "content": t} for t in texts],
                }
                assert http.post(f"/v1/profiles/{profile}/ingest", json=body).status_code == 200
    finally:
        stop(server)

    server = start()  # a new Ray: no live actor; the catalog's file remembers
    try:
        with httpx.Client(base_url=url, timeout=120) as http:
            assert {p["name"]: listed(http, p["name"]) for p in _profiles(http)} == expected
    finally:
        stop(server)

    shutil.rmtree(data / CATALOG_FILE.parent)  # as if written by a version without a catalog
    server = start()
    try:
        with httpx.Client(base_url=url, timeout=120) as http:
            wait_until(
                lambda: {p["name"]: listed(http, p["name"]) for p in _profiles(http)} == expected,
                timeout=120,
                interval=0.5,
            )
    finally:
        stop(server)


def _profiles(http: httpx.Client) -> list[dict[str, object]]:
    return list(http.get("/v1/profiles").json()["profiles"])
