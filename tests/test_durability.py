"""Durability end to end: profile actors with object storage, crashes, export and import."""

import gzip
import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid

import httpx
import msgspec
from conftest import wait_until
from s3_fixtures import REGION, make_bucket

from raymem.actors.calls import ProfileCalls, run_blocking
from raymem.actors.registry import ProfileRouter
from raymem.config import Settings
from raymem.types import IngestRequest, MessageIn, RecallRequest, RememberRequest


def s3_settings(base: Settings, tmp_path, endpoint: str, *, mode: str = "shipped") -> Settings:
    """Settings whose actors keep their profiles in moto's S3 (credentials travel in them)."""
    store = msgspec.structs.replace(
        base.object_store,
        bucket=make_bucket(endpoint),
        endpoint_url=endpoint,
        region=REGION,
        access_key_id="testing",
        secret_access_key="testing",
    )
    durability = msgspec.structs.replace(base.durability, mode=mode, ship_interval_s=0.2)
    return msgspec.structs.replace(
        base, data_dir=str(tmp_path / "data"), object_store=store, durability=durability
    )


def turn(text: str, session: str = "s1") -> IngestRequest:
    return IngestRequest(session_id=session, messages=[MessageIn(role="user", content=text)])


def on(router: ProfileRouter, profile: str) -> ProfileCalls:
    return ProfileCalls(router, "default", profile)


def kill_actor(settings: Settings, profile: str) -> None:
    """Kill the process of the profile's host at once (SIGKILL), as a crash would."""
    stats = run_blocking(on(ProfileRouter(settings), profile).process_stats())
    assert stats is not None
    os.kill(stats.pid, signal.SIGKILL)
    wait_until(lambda: not _live(settings, profile), timeout=30)


def _live(settings: Settings, profile: str) -> bool:
    return run_blocking(on(ProfileRouter(settings), profile).process_stats()) is not None


def contents(router: ProfileRouter, profile: str) -> set[str]:
    page = run_blocking(on(router, profile).list_memories(include_superseded=True, limit=100))
    return {m.content for m in page.memories}


def test_losing_the_local_disk_restores_from_snapshot_and_ledger(
    serve_app, server_settings, s3_endpoint, tmp_path
):
    settings = s3_settings(server_settings, tmp_path, s3_endpoint)
    router = ProfileRouter(settings)
    name = f"disk-{uuid.uuid4().hex[:6]}"
    run_blocking(on(router, name).ingest(turn("I live in Budapest and I love paprika.")))
    snapshot = run_blocking(on(router, name).snapshot())
    assert snapshot.key.endswith(f"{snapshot.ledger_seq:020d}") and snapshot.ledger_seq > 0
    run_blocking(on(router, name).ingest(turn("My sister Anna is a cellist in Graz.", "s2")))
    wait_until(lambda: _shipped_past(settings, name, snapshot.ledger_seq), timeout=30)

    kill_actor(settings, name)
    shutil.rmtree(tmp_path / "data")  # the machine's disk is gone

    fresh = ProfileRouter(settings)
    # full-text search answers at once; replayed rows get their vectors in the background
    words = run_blocking(on(fresh, name).recall(RecallRequest(query="Anna cellist")))
    assert "cellist" in words.memories[0].content
    run_blocking(on(fresh, name).wait_vectorised())
    result = run_blocking(on(fresh, name).recall(RecallRequest(query="Who plays the cello?")))
    assert any("cellist" in hit.content for hit in result.memories)
    assert contents(fresh, name) == {
        "I live in Budapest and I love paprika.",
        "My sister Anna is a cellist in Graz.",
    }
    info = run_blocking(on(fresh, name).info())
    assert (info.messages, info.sessions) == (2, 2)


def _shipped_past(settings: Settings, profile: str, seq: int) -> bool:
    import asyncio

    from raymem.export import ObjectStore, list_segments

    store = ObjectStore.from_settings(settings.object_store)
    segments = asyncio.run(list_segments(store, "default", profile))
    return bool(segments) and segments[-1].last_seq > seq


def test_replicated_mode_survives_losing_the_file_right_after_the_ack(
    serve_app, server_settings, s3_endpoint, tmp_path
):
    settings = s3_settings(server_settings, tmp_path, s3_endpoint, mode="replicated")
    router = ProfileRouter(settings)
    name = f"repl-{uuid.uuid4().hex[:6]}"
    for index in range(3):
        run_blocking(on(router, name).ingest(turn(f"Deployment note number {index} was filed.")))
    remembered = run_blocking(
        on(router, name).remember(RememberRequest(content="My locker code is 4711."), "m-locker")
    )
    kill_actor(settings, name)
    shutil.rmtree(tmp_path / "data")  # no snapshot was ever taken: the ledger alone must do

    fresh = ProfileRouter(settings)
    assert (
        run_blocking(on(fresh, name).get_memory(remembered.id)).content == "My locker code is 4711."
    )
    assert len(contents(fresh, name)) == 4
    assert run_blocking(on(fresh, name).info()).messages == 3


def test_kill_9_during_ingests_loses_no_acknowledged_write(serve_app, server_settings, tmp_path):
    settings = msgspec.structs.replace(server_settings, data_dir=str(tmp_path / "data"))
    router = ProfileRouter(settings)
    name = f"crash-{uuid.uuid4().hex[:6]}"
    run_blocking(on(router, name).activate())
    acknowledged: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        index = 0
        while not stop.is_set() and index < 400:
            text = f"Acknowledged fact number {index} about the orchard."
            try:
                run_blocking(on(router, name).ingest(turn(text)))
                acknowledged.append(text)
            except Exception:  # the call in flight at the crash may fail; it was not acknowledged
                pass
            index += 1

    thread = threading.Thread(target=writer)
    thread.start()
    wait_until(lambda: len(acknowledged) >= 20, timeout=60)
    kill_actor(settings, name)
    wait_until(
        lambda: len(acknowledged) >= 40, timeout=60
    )  # the writer goes on after re-activation
    stop.set()
    thread.join(timeout=120)

    info = run_blocking(on(router, name).info())
    stored = contents(router, name)
    assert set(acknowledged) <= stored  # nothing acknowledged is lost
    assert info.messages == len(stored)  # and nothing is duplicated (one memory per turn)


def test_export_import_round_trip_over_http(http, profile_name):
    base = f"/v1/profiles/{profile_name}"
    http.post(f"{base}/memories", json={"content": "I live in Budapest."})
    http.post(f"{base}/memories", json={"content": "I moved to Vienna in May 2026."})
    http.post(
        f"{base}/ingest",
        json={"session_id": "s1", "messages": [{"role": "user", "content": "Use pnpm, not npm."}]},
    )
    first = http.get(f"{base}/export")
    assert first.status_code == 200 and first.headers["content-type"].startswith(
        "application/x-ndjson"
    )
    copy = f"{profile_name}-copy"
    imported = http.post(f"/v1/profiles/{copy}/import", content=gzip.compress(first.content))
    assert imported.status_code == 200, imported.text
    assert imported.json()["counts"] == {"sessions": 1, "messages": 1, "memories": 3}
    second = http.get(f"/v1/profiles/{copy}/export")
    assert _without_header(first.content) == _without_header(second.content)
    vienna = next(
        m
        for m in http.get(f"/v1/profiles/{copy}/memories").json()["memories"]
        if "Vienna" in m["content"]
    )
    chain = http.get(f"/v1/profiles/{copy}/memories/{vienna['id']}").json()["history"]
    assert [m["content"] for m in chain] == [
        "I live in Budapest.",
        "I moved to Vienna in May 2026.",
    ]
    # a profile that holds data refuses an import, and keeps its data
    again = http.post(f"/v1/profiles/{copy}/import", content=first.content)
    assert again.status_code == 409 and again.json()["error"]["message"]
    assert len(http.get(f"/v1/profiles/{copy}/memories").json()["memories"]) == 2


def _without_header(archive: bytes) -> bytes:
    return b"\n".join(archive.splitlines()[1:])


def test_bad_archives_and_unknown_profiles(http, profile_name):
    bad = http.post(f"/v1/profiles/{profile_name}/import", content=b'{"kind": "nonsense"}\n')
    assert bad.status_code == 400 and "error" in bad.json()
    assert http.post(f"/v1/profiles/{profile_name}/import", content=b"").status_code == 400
    assert http.get("/v1/profiles/never-there/export").status_code == 404


def test_snapshot_without_object_storage_is_a_clear_409(http, profile_name):
    http.post(f"/v1/profiles/{profile_name}/memories", json={"content": "Something worth keeping."})
    response = http.post(f"/v1/profiles/{profile_name}/snapshot")
    assert response.status_code == 409
    assert "object storage" in response.json()["error"]["message"]


def test_cli_export_and_import(serve_app, profile_name, tmp_path):
    cli = [sys.executable, "-m", "raymem.cli"]
    url = ["--url", serve_app]
    httpx.post(
        f"{serve_app}/v1/profiles/{profile_name}/memories",
        json={"content": "My dog is called Pixel."},
        timeout=60,
    )
    archive = tmp_path / "backup.jsonl.gz"
    out = subprocess.run(
        [*cli, "export", profile_name, str(archive), *url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert archive.exists() and gzip.decompress(archive.read_bytes()).count(b"\n") == 2
    assert f"({archive.stat().st_size} bytes)" in out.stdout  # the compressed size on disk
    restored = f"{profile_name}-r"
    out = subprocess.run(
        [*cli, "import", restored, str(archive), *url], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "1 memories" in out.stdout
    memories = httpx.get(f"{serve_app}/v1/profiles/{restored}/memories", timeout=60).json()[
        "memories"
    ]
    assert [m["content"] for m in memories] == ["My dog is called Pixel."]
