"""Erasure through the running service: HTTP routes, clients, in-cluster profiles, the CLI.

Each test plants a unique marker, erases it, then greps every artefact the service
keeps for it (the profile's SQLite file and its -wal and -shm, a fresh export,
recall, full-text search, object storage where configured), and checks that what
was not erased is all still there.
"""

import asyncio
import gzip
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from botocore.exceptions import ClientError
from conftest import wait_until
from s3_fixtures import REGION, make_bucket

import raymem
from raymem.actors.calls import ProfileCalls, run_blocking
from raymem.actors.layout import profile_path
from raymem.actors.registry import ProfileRouter
from raymem.client import AsyncClient, Client, RaymemHTTPError
from raymem.config import Settings
from raymem.types import IngestRequest, MessageIn, RecallRequest

TENANT = "default"


def marker() -> str:
    """A word found nowhere else, that tokenizing and stemming leave as it is."""
    return "zqvx" + "".join(chr(ord("a") + int(c, 16) % 26) for c in uuid.uuid4().hex[:10])


def file_bytes(settings: Settings, profile: str) -> dict[str, bytes]:
    """The profile's SQLite file, its write-ahead log and shared-memory index."""
    path = profile_path(settings, TENANT, profile)
    return {
        suffix or "file": Path(f"{path}{suffix}").read_bytes()
        for suffix in ("", "-wal", "-shm")
        if Path(f"{path}{suffix}").exists()
    }


def holding(artefacts: dict[str, bytes], text: str) -> list[str]:
    return [name for name, data in artefacts.items() if text.encode() in data]


def ingest(http: httpx.Client, profile: str, session: str, *contents: str) -> None:
    turns = [{"role": "user", "content": content} for content in contents]
    response = http.post(
        f"/v1/profiles/{profile}/ingest", json={"session_id": session, "messages": turns}
    )
    assert response.status_code == 200, response.text


def memory_holding(http: httpx.Client, profile: str, text: str) -> dict[str, Any]:
    page = http.get(f"/v1/profiles/{profile}/memories", params={"limit": 100}).json()
    found = [m for m in page["memories"] if text in m["content"]]
    assert len(found) == 1, page
    return found[0]


def export_text(http: httpx.Client, profile: str) -> bytes:
    response = http.get(f"/v1/profiles/{profile}/export")
    assert response.status_code == 200
    data = response.content
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def recall_text(http: httpx.Client, profile: str, query: str) -> str:
    response = http.post(f"/v1/profiles/{profile}/recall", json={"query": query, "limit": 50})
    assert response.status_code == 200, response.text
    return response.text


def test_erasing_a_memory_removes_its_text_everywhere(
    http: httpx.Client, server_settings: Settings, profile_name: str
) -> None:
    secret, kept = marker(), marker()
    ingest(http, profile_name, "s1", f"My locker code is {secret}.", f"My cat is named {kept}.")
    ingest(http, profile_name, "s2", "I prefer green tea in the morning.")
    memory = memory_holding(http, profile_name, secret)
    assert secret in recall_text(http, profile_name, f"What is my locker code {secret}?")

    response = http.post(f"/v1/profiles/{profile_name}/memories/{memory['id']}/erase")

    assert response.status_code == 200, response.text
    erased = response.json()
    assert erased["memory_id"] == memory["id"] and memory["id"] in erased["erased_memory_ids"]
    assert erased["memories_erased"] == len(erased["erased_memory_ids"]) >= 1
    assert erased["messages_erased"] == 1  # the turn it was drawn from, whole
    # Nowhere: the file, its log and index, a fresh export, recall (every channel).
    assert holding(file_bytes(server_settings, profile_name), secret) == []
    assert secret.encode() not in export_text(http, profile_name)
    assert secret not in recall_text(http, profile_name, f"What is my locker code {secret}?")
    assert secret not in recall_text(http, profile_name, "locker code")
    # Read back: a tombstone without text, answered as gone.
    gone = http.get(f"/v1/profiles/{profile_name}/memories/{memory['id']}")
    assert gone.status_code == 410 and gone.json()["error"]["code"] == "memory_erased"
    listed = http.get(f"/v1/profiles/{profile_name}/memories", params={"limit": 100}).json()
    assert memory["id"] not in {m["id"] for m in listed["memories"]}
    turns = http.get(f"/v1/profiles/{profile_name}/sessions/s1/messages").json()["messages"]
    assert [t["content"] for t in turns] == [f"My cat is named {kept}."]
    # Everything else is still there, and still found.
    assert kept.encode() in export_text(http, profile_name)
    assert holding(file_bytes(server_settings, profile_name), kept)
    assert kept in recall_text(http, profile_name, f"What is my cat named {kept}?")
    assert "green tea" in recall_text(http, profile_name, "What do I drink in the morning?")


def test_the_erase_route_is_documented(http: httpx.Client) -> None:
    schema = http.get("/openapi.json").json()
    route = schema["paths"]["/v1/profiles/{profile}/memories/{memory_id}/erase"]["post"]
    answer = route["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert answer == "#/components/schemas/MemoryErasure"
    fields = schema["components"]["schemas"]["MemoryErasure"]["properties"]
    assert set(fields) == {"memory_id", "memories_erased", "messages_erased", "erased_memory_ids"}


def test_erasing_twice_is_a_success_that_erases_nothing_more(
    http: httpx.Client, profile_name: str
) -> None:
    secret = marker()
    ingest(http, profile_name, "s1", f"My locker code is {secret}.", "I like tea.")
    memory = memory_holding(http, profile_name, secret)
    route = f"/v1/profiles/{profile_name}/memories/{memory['id']}/erase"
    assert http.post(route).status_code == 200
    again = http.post(route)
    assert again.status_code == 200
    assert again.json() == {
        "memory_id": memory["id"],
        "memories_erased": 0,
        "messages_erased": 0,
        "erased_memory_ids": [],
    }
    assert "I like tea." in export_text(http, profile_name).decode()


def test_a_forgotten_memory_can_still_be_erased(http: httpx.Client, profile_name: str) -> None:
    secret = marker()
    ingest(http, profile_name, "s1", f"My locker code is {secret}.")
    memory = memory_holding(http, profile_name, secret)
    assert http.delete(f"/v1/profiles/{profile_name}/memories/{memory['id']}").status_code == 204
    assert secret.encode() in export_text(http, profile_name)  # forgetting hides, keeps text
    erased = http.post(f"/v1/profiles/{profile_name}/memories/{memory['id']}/erase")
    assert erased.status_code == 200 and erased.json()["memories_erased"] == 1
    assert secret.encode() not in export_text(http, profile_name)


def test_bad_erase_requests_are_clear_4xx_and_harm_nothing(
    http: httpx.Client, profile_name: str
) -> None:
    ingest(http, profile_name, "s1", "I live in Vienna.", "My cat is named Tofu.")
    before = export_text(http, profile_name)
    base = f"/v1/profiles/{profile_name}"
    cases = [
        ("POST", f"{base}/memories/no-such-memory/erase", 404, "memory_not_found"),
        ("POST", f"{base}/memories/{'x' * 5000}/erase", 404, "memory_not_found"),
        ("POST", "/v1/profiles/no-such-profile-zz/memories/abc/erase", 404, "profile_not_found"),
        ("POST", "/v1/profiles/.hidden/memories/abc/erase", 400, "invalid_request"),
        ("DELETE", f"{base}/sessions/no-such-session", 404, "session_not_found"),
        ("DELETE", f"{base}/sessions/bad%20name", 400, "invalid_request"),
    ]
    for method, path, status, code in cases:
        response = http.request(method, path)
        assert response.status_code == status, (path, response.text)
        assert response.json()["error"]["code"] == code, path
    assert http.get(f"{base}/memories/abc/erase").status_code == 405
    assert export_text(http, profile_name).splitlines()[1:] == before.splitlines()[1:]


def test_deleting_a_session_erases_it_and_keeps_the_others(
    http: httpx.Client, server_settings: Settings, profile_name: str
) -> None:
    secret, kept = marker(), marker()
    ingest(http, profile_name, "s1", f"My locker code is {secret}.", "I like tea.")
    ingest(http, profile_name, "s2", f"My cat is named {kept}.")
    deleted = http.delete(f"/v1/profiles/{profile_name}/sessions/s1")
    assert deleted.status_code == 200, deleted.text
    body = deleted.json()
    assert body["session_id"] == "s1" and body["messages_deleted"] == 2
    assert body["memories_erased"] >= 1
    assert holding(file_bytes(server_settings, profile_name), secret) == []
    assert secret.encode() not in export_text(http, profile_name)
    assert secret not in recall_text(http, profile_name, f"locker code {secret}")
    sessions = http.get(f"/v1/profiles/{profile_name}/sessions").json()["sessions"]
    assert [s["id"] for s in sessions] == ["s2"]
    assert kept in recall_text(http, profile_name, f"What is my cat named {kept}?")
    again = http.delete(f"/v1/profiles/{profile_name}/sessions/s1")
    assert again.status_code == 404 and again.json()["error"]["code"] == "session_not_found"


def test_erase_then_grep_after_the_fact_was_updated(
    http: httpx.Client, server_settings: Settings, profile_name: str
) -> None:
    """The truth-suite scenario: a fact, its update, the update erased; no trace of it."""
    old, new = marker(), marker()
    ingest(http, profile_name, "s1", f"My phone number is {old}.")
    older = memory_holding(http, profile_name, old)
    ingest(http, profile_name, "s2", f"My new phone number is {new}.")
    current = memory_holding(http, profile_name, new)
    response = http.post(f"/v1/profiles/{profile_name}/memories/{current['id']}/erase")
    assert response.status_code == 200, response.text
    assert holding(file_bytes(server_settings, profile_name), new) == []
    assert new.encode() not in export_text(http, profile_name)
    assert new not in recall_text(http, profile_name, "What is my phone number?")
    assert old.encode() in export_text(http, profile_name)  # the older statement stays
    first = http.get(f"/v1/profiles/{profile_name}/memories/{older['id']}").json()
    if first["superseded_by"] == current["id"]:  # the chain keeps its shape, without the text
        tombstone = [m for m in first["history"] if m["id"] == current["id"]]
        assert [(m["content"], m["erased_at"] is not None) for m in tombstone] == [("", True)]


def test_clients_erase_sync_async_and_in_cluster(
    serve_app: str, server_settings: Settings, profile_name: str
) -> None:
    secrets = [marker() for _ in range(3)]
    with Client(serve_app) as client:
        profile = client.get_profile(profile_name)
        facts = ["My locker code is {}.", "My dog is named {}.", "I work at a company called {}."]
        for number, (fact, secret) in enumerate(zip(facts, secrets, strict=True)):
            profile.ingest(
                [MessageIn(role="user", content=fact.format(secret))], session_id=f"s{number}"
            )
        ids = {
            secret: next(
                m.id
                for m in profile.list(limit=100, include_superseded=True).memories
                if secret in m.content
            )
            for secret in secrets
        }
        erased = profile.erase(ids[secrets[0]])
        assert erased.memory_id == ids[secrets[0]] and erased.messages_erased == 1
        with pytest.raises(RaymemHTTPError) as gone:
            profile.get(ids[secrets[0]])
        assert (gone.value.status, gone.value.code) == (410, "memory_erased")
        with pytest.raises(RaymemHTTPError) as unknown:
            profile.erase("no-such-memory")
        assert (unknown.value.status, unknown.value.code) == (404, "memory_not_found")

    async def erase_async() -> int:
        async with AsyncClient(serve_app) as client:
            result = await client.get_profile(profile_name).erase(ids[secrets[1]])
            return result.messages_erased

    assert asyncio.run(erase_async()) == 1
    local = raymem.get_profile(profile_name, settings=server_settings)
    assert local.erase(ids[secrets[2]]).erased_memory_ids[0] == ids[secrets[2]]
    for secret in secrets:
        assert holding(file_bytes(server_settings, profile_name), secret) == []


def test_cli_erases_a_memory_after_asking(
    http: httpx.Client, serve_app: str, profile_name: str
) -> None:
    secret = marker()
    ingest(http, profile_name, "s1", f"My locker code is {secret}.", "I like tea.")
    memory = memory_holding(http, profile_name, secret)
    command = [sys.executable, "-m", "raymem.cli", "memory", "erase", memory["id"]]
    command += ["-p", profile_name, "--url", serve_app]

    declined = subprocess.run(command, input="n\n", capture_output=True, text=True, timeout=120)
    assert declined.returncode == 1 and "Aborted" in declined.stderr
    assert secret.encode() in export_text(http, profile_name)
    done = subprocess.run(
        [*command, "--yes", "--json"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["erased_memory_ids"] == [memory["id"]]
    assert secret.encode() not in export_text(http, profile_name)
    missing = subprocess.run(
        [*command[:5], "no-such-memory", *command[6:], "--yes"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 1 and "does not exist" in missing.stderr


# --------------------------------------------- object storage, through real actors


def s3_settings(base: Settings, tmp_path: Path, endpoint: str, **profiles: Any) -> Settings:
    """Settings whose actors keep their profiles in moto's S3, shipped as they change."""
    store = msgspec.structs.replace(
        base.object_store,
        bucket=make_bucket(endpoint),
        endpoint_url=endpoint,
        region=REGION,
        access_key_id="testing",
        secret_access_key="testing",
    )
    durability = msgspec.structs.replace(base.durability, ship_interval_s=0.2)
    return msgspec.structs.replace(
        base,
        data_dir=str(tmp_path / "data"),
        object_store=store,
        durability=durability,
        profiles=msgspec.structs.replace(base.profiles, **profiles),
    )


def bucket_bytes(s3_client: Any, settings: Settings) -> dict[str, bytes]:
    """Every version of every object in the settings' bucket, gunzipped where gzipped."""
    bucket = settings.object_store.bucket
    found = {}
    listing = s3_client.list_object_versions(Bucket=bucket)
    for item in listing.get("Versions", []):
        key, version = item["Key"], item["VersionId"]
        try:
            data = s3_client.get_object(Bucket=bucket, Key=key, VersionId=version)["Body"].read()
        except ClientError:  # removed since the listing (background work): no longer there
            continue
        found[f"{key}?{version}"] = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    return found


def turn(session: str, text: str) -> IngestRequest:
    return IngestRequest(session_id=session, messages=[MessageIn(role="user", content=text)])


def test_erasing_a_memory_removes_it_from_object_storage(
    serve_app: str, server_settings: Settings, s3_endpoint: str, s3_client: Any, tmp_path: Path
) -> None:
    settings = s3_settings(server_settings, tmp_path, s3_endpoint)
    name = f"erase-s3-{uuid.uuid4().hex[:6]}"
    calls = ProfileCalls(ProfileRouter(settings), TENANT, name)
    secret, kept = marker(), marker()
    run_blocking(calls.ingest(turn("s1", f"My locker code is {secret}.")))
    run_blocking(calls.snapshot())
    run_blocking(calls.ingest(turn("s2", f"My cat is named {kept}.")))
    wait_until(lambda: holding(bucket_bytes(s3_client, settings), kept), timeout=30)  # shipped
    assert holding(bucket_bytes(s3_client, settings), secret)
    page = run_blocking(calls.list_memories(limit=100))
    target = next(m.id for m in page.memories if secret in m.content)

    erased = run_blocking(calls.erase_memory(target))  # answers once old copies are gone

    assert erased.messages_erased == 1
    objects = bucket_bytes(s3_client, settings)
    assert holding(objects, secret) == [] and holding(objects, kept)
    assert holding(file_bytes(settings, name), secret) == []
    result = run_blocking(calls.recall(RecallRequest(query=f"locker code {secret}")))
    assert all(secret not in hit.content for hit in result.memories)
    run_blocking(calls.delete())
    assert bucket_bytes(s3_client, settings) == {}  # deleting the profile leaves nothing there


def test_retention_erases_old_turns_from_the_file_and_object_storage(
    serve_app: str, server_settings: Settings, s3_endpoint: str, s3_client: Any, tmp_path: Path
) -> None:
    # A retention of about 0.9 s, checked every 0.2 s: the turn goes shortly after it came.
    settings = s3_settings(
        server_settings, tmp_path, s3_endpoint, retention_days=1e-5, retention_check_s=0.2
    )
    name = f"retain-s3-{uuid.uuid4().hex[:6]}"
    calls = ProfileCalls(ProfileRouter(settings), TENANT, name)
    secret = marker()
    request = IngestRequest(
        session_id="s1",
        messages=[
            MessageIn(role="user", content="Tell me a word."),
            MessageIn(role="assistant", content=f"Here is one: {secret}."),
        ],
    )
    run_blocking(calls.ingest(request))
    page = run_blocking(calls.list_memories(limit=100))
    assert all(secret not in m.content for m in page.memories)  # only the turn holds it
    wait_until(lambda: run_blocking(calls.info()).messages == 0, timeout=60)
    wait_until(lambda: not holding(bucket_bytes(s3_client, settings), secret), timeout=60)
    assert holding(file_bytes(settings, name), secret) == []
    run_blocking(calls.delete())


def test_deleting_a_session_reaches_its_work_actions_and_an_open_dream(
    http: httpx.Client, serve_app: Any, server_settings: Settings, profile_name: str
) -> None:
    secret, kept = marker(), marker()
    base = f"/v1/profiles/{profile_name}"
    ingest(http, profile_name, "s1", f"My locker code is {secret}.", "I like tea.")
    ingest(http, profile_name, "s2", f"My cat is named {kept}.")
    assert http.put(f"{base}/procedural", json={"enabled": True}).status_code == 200
    for session, word in (("s1", secret), ("s2", kept)):
        action = {
            "session_id": session,
            "action_type": "update_node",
            "target_type": "node",
            "target_ids": [f"n-{word}"],
            "outcome": "success",
            "intent": f"rename {word}",
        }
        assert http.post(f"{base}/actions", json={"actions": [action]}).status_code == 200
        item = {"objective": f"Change the code {word}", "session_id": session}
        opened = http.post(f"{base}/work-items", json=item)
        assert opened.status_code < 300, opened.text
        closed = http.post(f"{base}/work-items/{opened.json()['id']}/close", json={"outcome": word})
        assert closed.status_code == 200, closed.text
    dream_id = http.post(f"{base}/dreams", json={}).json()["id"]
    with Client(serve_app) as client:
        ready = client.get_profile(profile_name).wait_dream(dream_id, timeout_s=120)
    assert ready.state == "ready", ready.error
    candidates = profile_path(server_settings, TENANT, profile_name).parent / "dreams"
    assert any(secret.encode() in path.read_bytes() for path in candidates.iterdir())

    assert http.delete(f"{base}/sessions/s1").status_code == 200

    dream = http.get(f"{base}/dreams/{dream_id}").json()
    assert dream["state"] == "discarded" and "erasure" in dream["error"]
    assert list(candidates.iterdir()) == []
    assert holding(file_bytes(server_settings, profile_name), secret) == []
    exported = export_text(http, profile_name)
    assert secret.encode() not in exported
    assert exported.count(kept.encode()) >= 4  # turn, action, work item, episode
    items = http.get(f"{base}/work-items").json()
    assert [item["session_id"] for item in items["work_items"]] == ["s2"]
