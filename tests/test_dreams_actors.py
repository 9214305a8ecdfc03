"""A running dream and its profile's lifecycle, in real profile hosts on a real local Ray.

The dream is held at its last step by a model (``openai_server.ChatServer``, the
one fake: a hosted model cannot run here) that keeps its answer to the insights
prompt until the test releases it, so each test acts while the dream runs.
"""

import asyncio
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest
import ray
from conftest import wait_until
from openai_server import ChatServer
from test_actors import live_actor_id
from test_dreams import EMMA
from test_dreams_http import seeded_archive

from raymem.actors.calls import ProfileCalls, run_blocking
from raymem.actors.layout import profile_path
from raymem.actors.registry import ProfileRouter
from raymem.config import Settings
from raymem.errors import ProfileNotFound
from raymem.store.dreams import candidate_path
from raymem.types import DreamRequest

MERGE_PROMPT = "say the same thing"  # in the system prompt of a merge rewrite
# Checks of a profile asked to hibernate: its idle timer looks 4 times per timeout.
IDLE_TIMEOUT_S = 0.5
WATCHED_TIMEOUTS = 8


class HeldInsights:
    """Rewrites a merge at once; answers the insights prompt only once released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any]) -> tuple[int, str]:
        if MERGE_PROMPT in body["messages"][0]["content"]:
            return 200, json.dumps({"statement": EMMA[0]})  # keeps every value
        self.release.wait(timeout=120)
        return 200, json.dumps({"insights": []})


def prompts(server: ChatServer) -> tuple[int, int]:
    """How many merge rewrites and insight prompts the model was sent."""
    merges = sum(MERGE_PROMPT in body["messages"][0]["content"] for _, _, body in server.requests)
    return merges, len(server.requests) - merges


def with_model(settings: Settings, base_url: str, **profiles: Any) -> Settings:
    models = msgspec.structs.replace(
        settings.models,
        generator="openai",
        openai_base_url=base_url,
        openai_model="m",
        generator_timeout_s=120.0,  # the held answer is not a timeout
        generator_attempts=1,
    )
    return msgspec.structs.replace(
        settings, models=models, profiles=msgspec.structs.replace(settings.profiles, **profiles)
    )


def gone(pid: int) -> bool:
    """Whether the process has exited (a zombie has: it runs nothing)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except FileNotFoundError:
        return True


def contents(calls: ProfileCalls) -> set[str]:
    return {memory.content for memory in run_blocking(calls.list_memories(limit=100)).memories}


@pytest.fixture
def held():
    model = HeldInsights()
    with ChatServer(model).running() as server:
        yield model, server
        model.release.set()


def start_held_dream(calls: ProfileCalls, server: ChatServer, tmp_path) -> str:
    """Seed the profile and start a dream; return its id once it waits on the insights."""
    run_blocking(calls.import_archive(asyncio.run(seeded_archive(tmp_path))))
    started = run_blocking(calls.start_dream(DreamRequest()))
    wait_until(lambda: prompts(server)[1] == 1, timeout=120)
    assert run_blocking(calls.dream_status(started.id)).state == "running"
    return started.id


def test_a_dream_resumes_after_its_host_dies_mid_dream(serve_app, server_settings, held, tmp_path):
    model, server = held
    settings = with_model(server_settings, server.base_url)
    router = ProfileRouter(settings)
    calls = ProfileCalls(router, "default", f"dream-host-{uuid.uuid4().hex[:8]}")
    dream_id = start_held_dream(calls, server, tmp_path)
    before = contents(calls)
    assert prompts(server) == (1, 1)

    host = run_blocking(router.live_host("default", calls.profile))
    stats = run_blocking(calls.process_stats())
    assert stats is not None
    ray.kill(host)  # the profile stops without a say, mid-dream
    wait_until(lambda: gone(stats.pid), timeout=60)  # Ray says dead before the process is
    model.release.set()
    done = run_blocking(calls.wait_dream(dream_id))  # re-activates the profile elsewhere

    assert done.state == "ready" and done.error is None
    assert done.progress.done == done.progress.total
    # It went on after its last completed step: the merge was not redone, the
    # insights were asked again.
    assert prompts(server) == (1, 2)
    assert contents(calls) == before  # the profile is untouched until adopt
    diff = run_blocking(calls.dream_diff(dream_id))
    assert len(diff.changes) == done.counts["changes"]
    merge = next(change for change in diff.changes if change.action == "merge")
    assert merge.content == EMMA[0] and len(merge.memory_ids) == len(EMMA)
    adopted = run_blocking(calls.adopt_dream(dream_id))
    assert adopted.applied == done.counts["changes"] and not adopted.skipped
    after = contents(calls)
    assert EMMA[0] in after and not {EMMA[1], EMMA[2]} & after
    run_blocking(calls.delete())


def test_a_profile_asked_to_hibernate_dreams_on_then_sleeps(
    serve_app, server_settings, held, tmp_path
):
    model, server = held
    settings = with_model(server_settings, server.base_url, idle_timeout_s=IDLE_TIMEOUT_S)
    router = ProfileRouter(settings)
    calls = ProfileCalls(router, "default", f"dream-sleep-{uuid.uuid4().hex[:8]}")
    dream_id = start_held_dream(calls, server, tmp_path)
    opening = live_actor_id(settings, calls.profile)
    host = run_blocking(router.live_host("default", calls.profile))
    ray.get(host.hibernate.remote("default", calls.profile))  # as under memory pressure

    # A negative needs a window: for 8 idle timeouts (32 looks of its idle timer)
    # the profile stays open in the same opening while its dream runs.
    watched_until = time.monotonic() + WATCHED_TIMEOUTS * IDLE_TIMEOUT_S
    while time.monotonic() < watched_until:
        assert live_actor_id(settings, calls.profile) == opening
        time.sleep(0.05)
    model.release.set()
    wait_until(lambda: live_actor_id(settings, calls.profile) is None, timeout=60)

    woken = run_blocking(calls.dream_status(dream_id))  # re-activates the profile
    assert woken.state == "ready" and woken.progress.done == woken.progress.total
    assert prompts(server) == (1, 1) and server.hung_up == 0  # never stopped, never redone
    assert run_blocking(calls.adopt_dream(dream_id)).applied == woken.counts["changes"]
    run_blocking(calls.delete())


def test_deleting_a_profile_mid_dream_stops_the_dream_and_leaves_no_candidate(
    serve_app, server_settings, held, tmp_path
):
    model, server = held
    settings = with_model(server_settings, server.base_url)
    name = f"dream-gone-{uuid.uuid4().hex[:8]}"
    calls = ProfileCalls(ProfileRouter(settings), "default", name)
    dream_id = start_held_dream(calls, server, tmp_path)
    path = profile_path(settings, "default", name)
    assert candidate_path(path, dream_id).exists()

    run_blocking(calls.delete())
    assert not path.parent.exists()
    model.release.set()
    # The dream stopped with the profile: nobody waits for the model's answer any more.
    wait_until(lambda: server.hung_up == 1, timeout=60)
    assert not path.parent.exists()  # nothing came back to write a candidate
    with pytest.raises(ProfileNotFound):
        run_blocking(calls.info())

    # The name is free: a new profile of it has no dream of the old one.
    run_blocking(calls.import_archive(asyncio.run(seeded_archive(tmp_path / "again"))))
    assert run_blocking(calls.list_dreams()).dreams == []
    assert not candidate_path(path, dream_id).exists()
    assert prompts(server) == (1, 1)
    run_blocking(calls.delete())
