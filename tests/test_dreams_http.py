"""Dreams and the review queue over real HTTP (Serve), the Python clients and get_profile."""

import asyncio
import io
import json
import subprocess
import sys
import uuid

import msgspec
import pytest
from conftest import wait_until
from test_actors import live_actor_id
from test_dreams import EMMA, OTHERS, STALE, STANDUP_NEW, STANDUP_OLD, seed

import raymem
from raymem.actors.calls import ProfileCalls, run_blocking
from raymem.actors.layout import profile_path
from raymem.actors.registry import ProfileRouter
from raymem.client import AsyncClient, Client, RaymemHTTPError
from raymem.export.archive import export_archive
from raymem.store import ProfileStore
from raymem.store.connection import open_sync
from raymem.store.dreams import candidate_path
from raymem.types import DreamRequest, RecallRequest

DIM = 384
CHANGE_FIELDS = {"action", "memory_ids", "content", "reason"}


def assert_error(response, status, code=None):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"code", "message"} and error["message"]
    assert "Traceback" not in error["message"]
    if code is not None:
        assert error["code"] == code
    return error


async def seeded_archive(tmp_path) -> bytes:
    """An archive of a profile with three phrasings of one fact, a contradiction the
    per-fact path missed and a stale memory (``test_dreams.seed``)."""
    store = await ProfileStore.open(tmp_path / "seed" / "profile.db", dim=DIM)
    try:
        await seed(store)
        archive = io.BytesIO()
        await export_archive(store, archive, profile="seed")
    finally:
        await store.close()
    return archive.getvalue()


@pytest.fixture
def seeded(http, profile_name, tmp_path):
    """A profile on the server holding ``seed``'s memories; yields its name."""
    archive = asyncio.run(seeded_archive(tmp_path))
    response = http.post(
        f"/v1/profiles/{profile_name}/import",
        content=archive,
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert response.status_code == 200, response.text
    return profile_name


@pytest.fixture
def candidate_of(server_settings, profile_name):
    """Where the server keeps a dream's candidate for the test's profile."""

    def path(dream_id: str):
        return candidate_path(profile_path(server_settings, "default", profile_name), dream_id)

    return path


def current(http, profile) -> dict[str, str]:
    page = http.get(f"/v1/profiles/{profile}/memories", params={"limit": 100}).json()
    return {memory["content"]: memory["id"] for memory in page["memories"]}


def test_a_dream_is_started_followed_reviewed_and_adopted(http, serve_app, seeded, candidate_of):
    before = current(http, seeded)
    client = Client(serve_app)
    profile = client.get_profile(seeded)
    forgotten = before[EMMA[1]]
    profile.forget(forgotten)  # forgotten before the dream: it must stay out of it

    started = http.post(f"/v1/profiles/{seeded}/dreams", json={"instructions": "family first"})
    assert started.status_code == 202, started.text
    assert {"id", "state"} <= set(started.json()) and started.json()["state"] == "running"
    dream_id = started.json()["id"]
    ready = profile.wait_dream(dream_id, timeout_s=120)
    assert ready.state == "ready", ready.error
    status = http.get(f"/v1/profiles/{seeded}/dreams/{dream_id}").json()
    assert {"id", "state", "progress", "counts"} <= set(status)
    assert status["progress"]["done"] == status["progress"]["total"]
    assert status["instructions"] == "family first"
    assert status["counts"]["memories"] == len(before) - 1

    # The candidate is reviewed while the profile serves, unchanged.
    diff = http.get(f"/v1/profiles/{seeded}/dreams/{dream_id}/diff").json()
    assert all(set(change) >= CHANGE_FIELDS for change in diff["changes"])
    actions = {change["action"] for change in diff["changes"]}
    assert actions == {"merge", "replace", "retire"}
    assert all(forgotten not in change["memory_ids"] for change in diff["changes"])
    assert candidate_of(dream_id).exists()
    assert set(current(http, seeded)) == set(before) - {EMMA[1]}
    again = http.post(f"/v1/profiles/{seeded}/dreams", json={})
    assert_error(again, 409, "dream_already_open")

    # A write while the dream waits for review stays after adopting.
    added = profile.remember("The office plant is a monstera called Doris.")

    adopted = http.post(f"/v1/profiles/{seeded}/dreams/{dream_id}/adopt")
    assert adopted.status_code == 200, adopted.text
    assert adopted.json()["dream"]["state"] == "adopted"
    assert adopted.json()["applied"] == len(diff["changes"]) and not adopted.json()["skipped"]
    after = current(http, seeded)
    assert sum(content in after for content in EMMA) == 1  # one statement per fact
    assert STANDUP_NEW in after and STANDUP_OLD not in after
    assert STALE not in after and all(content in after for content in OTHERS)
    assert added.content in after
    assert not candidate_of(dream_id).exists()

    # Chains kept: the merged statement's history holds what it replaced, and the
    # memory forgotten before the dream is still forgotten, outside every chain.
    (kept,) = [after[content] for content in EMMA if content in after]
    history = profile.get(kept).history
    assert len(history) == 2 and history[-1].id == kept
    assert all(memory.superseded_by == kept for memory in history[:-1])
    assert forgotten not in {memory.id for memory in history}
    assert profile.get(forgotten).forgotten_at is not None
    hits = profile.recall("What instrument does Emma play?", include_messages=False).memories
    assert forgotten not in {hit.id for hit in hits}
    assert [d.state for d in profile.dreams().dreams] == ["adopted"]
    # The adopted dream's diff stays readable: what it applied.
    assert [c.content for c in profile.dream_diff(dream_id).changes] == [
        c["content"] for c in diff["changes"]
    ]
    client.close()


def test_discard_and_cancel_leave_the_profile_as_it_was(http, serve_app, seeded, candidate_of):
    before = current(http, seeded)

    async def dream_and_discard() -> tuple[str, str]:
        async with AsyncClient(serve_app) as client:
            profile = client.get_profile(seeded)
            started = await profile.start_dream(max_sessions=2)
            assert started.max_sessions == 2
            ready = await profile.wait_dream(started.id, timeout_s=120)
            assert ready.state == "ready", ready.error
            discarded = await profile.discard_dream(started.id)
            with pytest.raises(RaymemHTTPError) as refused:
                await profile.adopt_dream(started.id)
            assert refused.value.status == 409
            return discarded.state, started.id

    state, dream_id = asyncio.run(dream_and_discard())
    assert state == "discarded"
    assert not candidate_of(dream_id).exists()
    assert_error(http.get(f"/v1/profiles/{seeded}/dreams/{dream_id}/diff"), 409)
    assert current(http, seeded) == before

    # Cancel: right after starting; the dream may have finished already on a fast
    # machine, so either it is cancelled, or it is ready and refused (409), then discarded.
    started = http.post(f"/v1/profiles/{seeded}/dreams", json={}).json()
    cancelled = http.post(f"/v1/profiles/{seeded}/dreams/{started['id']}/cancel")
    if cancelled.status_code == 409:
        state = http.get(f"/v1/profiles/{seeded}/dreams/{started['id']}").json()["state"]
        assert state == "ready"
        http.post(f"/v1/profiles/{seeded}/dreams/{started['id']}/discard")
    else:
        assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    assert not candidate_of(started["id"]).exists()
    assert current(http, seeded) == before


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"max_sessions": 0}, "max_sessions"),
        ({"max_sessions": 101}, "max_sessions"),
        ({"max_sessions": "ten"}, "max_sessions"),
        ({"instructions": 7}, "instructions"),
        ({"instructions": "x" * 4001}, "instructions"),
        ({"focus": "coding"}, "focus"),
        ([], "object"),
    ],
)
def test_bad_dream_requests_are_400_and_harmless(http, seeded, body, fragment):
    before = current(http, seeded)
    response = http.post(f"/v1/profiles/{seeded}/dreams", json=body)
    error = assert_error(response, 400, "invalid_request")
    assert fragment in error["message"]
    assert http.get(f"/v1/profiles/{seeded}/dreams").json() == {"dreams": []}
    assert current(http, seeded) == before


def test_unknown_and_invalid_dream_ids_and_profiles(http, seeded):
    before = current(http, seeded)
    malformed = http.post(f"/v1/profiles/{seeded}/dreams", content=b"{not json")
    assert_error(malformed, 400, "invalid_request")
    unknown = uuid.uuid4().hex
    for verb, suffix in [("get", ""), ("get", "/diff"), ("post", "/adopt"), ("post", "/cancel")]:
        response = getattr(http, verb)(f"/v1/profiles/{seeded}/dreams/{unknown}{suffix}")
        assert_error(response, 404, "dream_not_found")
        for bad in ("..%2Fprofile", "not-a-dream", unknown.upper()):
            response = getattr(http, verb)(f"/v1/profiles/{seeded}/dreams/{bad}{suffix}")
            assert response.status_code in (400, 404), response.text
            assert response.json()["error"]["code"] in ("invalid_request", "not_found")
    nobody = f"nobody-{uuid.uuid4().hex[:8]}"
    assert_error(http.post(f"/v1/profiles/{nobody}/dreams", json={}), 404, "profile_not_found")
    assert_error(http.get(f"/v1/profiles/{nobody}/dreams"), 404, "profile_not_found")
    assert_error(http.post("/v1/profiles/..bad/dreams", json={}), 400)
    assert http.get(f"/v1/profiles/{seeded}/dreams").json() == {"dreams": []}
    assert current(http, seeded) == before


def test_the_review_queue_over_http(http, serve_app, profile_name):
    profile = f"/v1/profiles/{profile_name}"

    def said(session: str, content: str) -> None:
        body = {"session_id": session, "messages": [{"role": "user", "content": content}]}
        assert http.post(f"{profile}/ingest", json=body).status_code == 200

    said("s1", "I live in Budapest.")
    assert http.get(f"{profile}/review").json() == {"mode": "apply", "below": 0.9}
    for bad in [{"mode": "sometimes"}, {"mode": "review", "below": 1.5}, {"below": 0.5}, {}]:
        assert_error(http.put(f"{profile}/review", json=bad), 400, "invalid_request")
    assert http.get(f"{profile}/review").json()["mode"] == "apply"
    switched = http.put(f"{profile}/review", json={"mode": "review", "below": 0.95})
    assert switched.json() == {"mode": "review", "below": 0.95}
    said("s2", "I moved to Vienna.")
    said("s3", "I moved to Graz.")
    assert {"I live in Budapest.", "I moved to Vienna.", "I moved to Graz."} <= set(
        current(http, profile_name)
    )  # held: nothing superseded yet

    client = Client(serve_app)
    queue = client.get_profile(profile_name)
    pending = queue.proposals(state="pending").proposals
    assert [p.action for p in pending] == ["supersede", "supersede"]
    assert all("below the review threshold 0.95" in p.reason for p in pending)
    first, second = pending
    approved = queue.approve_proposal(first.id)
    assert approved.state == "approved" and approved.decided_at
    assert queue.get(first.target_id).superseded_by == first.memory_id
    rejected = http.post(f"{profile}/proposals/{second.id}/reject")
    assert rejected.status_code == 200 and rejected.json()["state"] == "rejected"
    assert_error(http.post(f"{profile}/proposals/{first.id}/reject"), 409, "proposal_decided")
    assert_error(http.post(f"{profile}/proposals/{uuid.uuid4().hex}/approve"), 404)
    assert_error(http.post(f"{profile}/proposals/nope/approve"), 400, "invalid_request")
    assert_error(http.get(f"{profile}/proposals", params={"state": "maybe"}), 400)
    assert_error(http.get(f"{profile}/proposals", params={"limit": 0}), 400)
    assert queue.proposals(state="pending").proposals == []
    assert [p.state for p in queue.proposals().proposals] == ["approved", "rejected"]
    assert queue.set_review_mode("apply").below == 0.95  # the threshold is kept
    client.close()


def test_get_profile_dreams_and_reviews_in_cluster(serve_app, server_settings, seeded):
    profile = raymem.get_profile(seeded, settings=server_settings)
    started = profile.start_dream()
    ready = profile.wait_dream(started.id)
    assert ready.state == "ready", ready.error
    changes = profile.dream_diff(started.id).changes
    assert {change.action for change in changes} == {"merge", "replace", "retire"}
    adopted = profile.adopt_dream(started.id)
    assert adopted.applied == len(changes)
    assert profile.dream_status(started.id).state == "adopted"
    with pytest.raises(Exception, match="between 1 and 100"):
        profile.start_dream(max_sessions=500)
    with pytest.raises(Exception, match="32 hex digits"):
        profile.dream_status("../../etc")
    assert profile.review_mode().mode == "apply"
    assert profile.set_review_mode("review", below=0.5).below == 0.5
    assert profile.proposals().proposals == []
    assert [dream.state for dream in profile.dreams().dreams] == ["adopted"]


def cli(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raymem.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        input=input,
    )


def test_the_cli_dreams_and_reviews(http, serve_app, seeded):
    before = current(http, seeded)
    options = ["-p", seeded, "--url", serve_app]
    started = cli("dream", "start", *options, "-i", "tidy up", "--wait", "--json")
    assert started.returncode == 0, started.stderr
    dream = json.loads(started.stdout)
    assert dream["state"] == "ready" and dream["instructions"] == "tidy up"
    diff = cli("dream", "diff", dream["id"], *options)
    assert diff.returncode == 0, diff.stderr
    assert f"{dream['counts']['changes']} changes" in diff.stdout
    assert "merge" in diff.stdout and "replace" in diff.stdout and "retire" in diff.stdout
    listed = cli("dream", "ls", *options)
    assert dream["id"] in listed.stdout and "ready" in listed.stdout
    refused = cli("dream", "adopt", dream["id"], *options, input="n\n")
    assert refused.returncode == 1 and current(http, seeded) == before  # declined: nothing
    adopted = cli("dream", "adopt", dream["id"], *options, "--yes")
    assert adopted.returncode == 0 and "changes applied" in adopted.stdout
    assert len(current(http, seeded)) == dream["counts"]["memories_after"]
    again = cli("dream", "discard", dream["id"], *options)
    assert again.returncode == 1 and "409 dream_state_conflict" in again.stderr
    bad = cli("dream", "start", *options, "--max-sessions", "0")
    assert bad.returncode == 1 and "max_sessions" in bad.stderr

    mode = cli("review", "mode", "review", "--below", "0.95", *options)
    assert mode.returncode == 0 and mode.stdout.strip() == "review (below 0.95)"
    assert cli("review", "ls", *options).stdout == ""
    missing = cli("review", "approve", uuid.uuid4().hex, *options)
    assert missing.returncode == 1 and "proposal_not_found" in missing.stderr


def test_a_dream_keeps_its_profile_awake_and_survives_hibernation(
    serve_app, server_settings, tmp_path
):
    quick = msgspec.structs.replace(
        server_settings,
        profiles=msgspec.structs.replace(server_settings.profiles, idle_timeout_s=0.5),
    )
    name = f"dreamy-{uuid.uuid4().hex[:8]}"
    calls = ProfileCalls(ProfileRouter(quick), "default", name)
    run_blocking(calls.import_archive(asyncio.run(seeded_archive(tmp_path))))
    recalled = run_blocking(
        calls.recall(RecallRequest(query="standup time", include_messages=False))
    )
    assert recalled.memories
    started = run_blocking(calls.start_dream(DreamRequest()))
    # Idle at once, but a running dream keeps the actor: it sleeps once the dream is ready.
    wait_until(lambda: live_actor_id(quick, name) is None, timeout=60)
    path = profile_path(quick, "default", name)
    assert candidate_path(path, started.id).exists()
    conn = open_sync(path)
    try:  # hibernation wrote the memory use that recall noted
        used = dict(conn.execute("SELECT memory_id, recalled_count FROM memory_use").fetchall())
    finally:
        conn.close()
    assert used == {hit.id: 1 for hit in recalled.memories}
    woken = run_blocking(calls.dream_status(started.id))  # re-activates the profile
    assert woken.state == "ready" and woken.progress.done == woken.progress.total
    adopted = run_blocking(calls.adopt_dream(started.id))
    assert adopted.dream.state == "adopted" and adopted.applied == woken.counts["changes"]
    run_blocking(calls.delete())
