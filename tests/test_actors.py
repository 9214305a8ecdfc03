"""Profiles in hosts on a real local Ray: one opening per name, hibernation, in-cluster access."""

import concurrent.futures
import uuid
from pathlib import Path

import msgspec
import pytest
from conftest import wait_until

import raymem
from raymem.actors.calls import ProfileCalls, run_blocking
from raymem.actors.local import AppNotRunning
from raymem.actors.registry import ProfileRouter
from raymem.errors import ProfileNotFound
from raymem.types import IngestRequest, MessageIn, RecallRequest


@pytest.fixture
def router(serve_app, server_settings):
    return ProfileRouter(server_settings)


def live_actor_id(settings, name: str) -> str | None:
    """The id of the profile's current opening in a host; None when it is not open."""
    stats = run_blocking(ProfileCalls(ProfileRouter(settings), "default", name).process_stats())
    return None if stats is None else stats.opening


def test_twenty_concurrent_first_calls_open_one_copy(serve_app, server_settings):
    name = f"burst-{uuid.uuid4().hex[:8]}"

    def first_call(index: int) -> str:
        router = ProfileRouter(server_settings)  # each caller activates on its own
        request = IngestRequest(
            session_id="s1",
            messages=[MessageIn(role="user", content=f"Caller {index} says hello world.")],
        )
        run_blocking(ProfileCalls(router, "default", name).ingest(request))
        return live_actor_id(server_settings, name)

    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        actor_ids = list(pool.map(first_call, range(20)))
    assert len(set(actor_ids)) == 1
    info = run_blocking(ProfileCalls(ProfileRouter(server_settings), "default", name).info())
    assert info.messages == 20 and info.sessions == 1


def test_idle_profile_hibernates_and_reactivates_with_its_data(serve_app, server_settings):
    quick = msgspec.structs.replace(
        server_settings,
        profiles=msgspec.structs.replace(server_settings.profiles, idle_timeout_s=0.5),
    )
    name = f"sleepy-{uuid.uuid4().hex[:8]}"
    request = IngestRequest(
        session_id="s1", messages=[MessageIn(role="user", content="I live in Lisbon now.")]
    )
    calls = ProfileCalls(ProfileRouter(quick), "default", name)
    run_blocking(calls.ingest(request))
    first = live_actor_id(quick, name)
    assert first is not None
    wait_until(lambda: live_actor_id(quick, name) is None, timeout=30)
    # the next call re-activates transparently, with everything still there
    result = run_blocking(calls.recall(RecallRequest(query="Where does the user live?")))
    assert any("Lisbon" in hit.content for hit in result.memories)
    second = live_actor_id(quick, name)
    assert second is not None and second != first


def test_reads_of_an_unknown_profile_raise_not_found(router):
    with pytest.raises(ProfileNotFound):
        run_blocking(
            ProfileCalls(router, "default", "no-such-profile").recall(RecallRequest(query="x"))
        )
    assert live_actor_id(router.settings, "no-such-profile") is None


def test_get_profile_calls_the_actor_without_http(serve_app, server_settings):
    name = f"local-{uuid.uuid4().hex[:8]}"
    profile = raymem.get_profile(name, settings=server_settings)
    result = profile.ingest(
        [{"role": "user", "content": "Use tabs, not spaces, in Go files."}], session_id="s1"
    )
    assert result.memories.added == 1
    remembered = profile.remember("My favourite editor is Neovim.")
    assert profile.get(remembered.id).content == "My favourite editor is Neovim."
    hits = profile.recall("tabs or spaces?").memories
    assert "tabs" in hits[0].content
    assert {m.content for m in profile.list().memories} == {
        "Use tabs, not spaces, in Go files.",
        "My favourite editor is Neovim.",
    }
    profile.forget(remembered.id)
    assert len(profile.list().memories) == 1
    with pytest.raises(Exception, match="Invalid profile name"):
        raymem.get_profile("../escape", settings=server_settings)


def test_get_profile_uses_the_servers_settings_from_any_directory(
    serve_app, server_settings, tmp_path, monkeypatch
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # a caller with its own directory and its own settings
    monkeypatch.setenv("RAYMEM_DATA_DIR", str(elsewhere / "data"))
    name = f"published-{uuid.uuid4().hex[:8]}"
    profile = raymem.get_profile(name)
    profile.remember("The spare key is under the blue pot.")
    assert (Path(server_settings.data_dir) / "default" / name / "profile.db").exists()
    assert not any(elsewhere.iterdir())
    assert profile.list().memories[0].content == "The spare key is under the blue pot."
    with pytest.raises(AppNotRunning, match="no-such-namespace"):
        raymem.get_profile(name, namespace="no-such-namespace")


def test_live_profiles_per_node_are_bounded_least_recently_used_first(
    serve_app, server_settings, tmp_path
):
    settings = msgspec.structs.replace(
        server_settings,
        namespace="raymem-lru",
        data_dir=str(tmp_path),
        profiles=msgspec.structs.replace(server_settings.profiles, max_live=2, hosts_per_node=1),
    )
    router = ProfileRouter(settings)
    names = [f"lru-{index}" for index in range(3)]
    for name in names:
        request = IngestRequest(
            session_id="s1", messages=[MessageIn(role="user", content=f"{name} holds a fact.")]
        )
        run_blocking(ProfileCalls(router, "default", name).ingest(request))
    # the least recently used (the first) makes room for the third
    wait_until(lambda: live_actor_id(settings, names[0]) is None, timeout=30)
    assert (
        live_actor_id(settings, names[1]) is not None
        and live_actor_id(settings, names[2]) is not None
    )
    # and comes back with its data when used again
    result = run_blocking(
        ProfileCalls(router, "default", names[0]).recall(RecallRequest(query="fact"))
    )
    assert any("lru-0" in hit.content for hit in result.memories)
