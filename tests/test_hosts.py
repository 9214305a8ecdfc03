"""Profile hosts: bounds from the node's memory, hibernation before memory runs short."""

import time
import uuid
from typing import Any

import msgspec
import pytest
import ray
from conftest import wait_until

from raymem.actors.calls import ProfileCalls, run_blocking
from raymem.actors.host import MB, hosts_stacks, live_bound, node_memory
from raymem.actors.registry import ProfileRouter
from raymem.config import ProfileSettings, Settings
from raymem.errors import ProfileMoved
from raymem.types import IngestRequest, MessageIn, RecallRequest

GB = 2**30


def own_hosts(server_settings: Settings, tmp_path, **profiles: Any) -> Settings:
    """The session app's settings with a catalog and hosts of their own (a namespace and
    data directory of the test's), the profile settings changed as given."""
    return msgspec.structs.replace(
        server_settings,
        namespace=f"raymem-test-{uuid.uuid4().hex[:6]}",
        data_dir=str(tmp_path),
        profiles=msgspec.structs.replace(server_settings.profiles, **profiles),
    )


def test_the_live_bound_follows_the_nodes_memory_unless_configured():
    derived = ProfileSettings(max_live=0, memory_fraction=0.8, open_profile_mb=4.0)
    # 24 GB, 8 GB in use: 0.8 x 24 - 8 = 11.2 GB for profiles, 2,867 of 4 MB, over 2 hosts
    assert live_bound(derived, 2, 24 * GB, 16 * GB) == int(11.2 * GB / (4 * MB)) // 2
    # a node already past its fraction still lets each host open one profile
    assert live_bound(derived, 2, 24 * GB, 2 * GB) == 1
    assert live_bound(ProfileSettings(max_live=200), 4, 24 * GB, 16 * GB) == 50
    total, available = node_memory()
    assert 0 < available <= total


def test_hosts_hibernate_least_recently_used_profiles_under_memory_pressure(
    serve_app, server_settings, tmp_path
):
    # A pressure fraction below what the node uses now: every check finds memory short.
    settings = own_hosts(server_settings, tmp_path, hosts_per_node=1, pressure_fraction=0.0)
    router = ProfileRouter(settings)
    names = [f"pressed-{index}" for index in range(3)]
    for name in names:
        request = IngestRequest(
            session_id="s1", messages=[MessageIn(role="user", content=f"{name} keeps a fact.")]
        )
        run_blocking(ProfileCalls(router, "default", name).ingest(request))

    def all_asleep() -> bool:
        calls = [ProfileCalls(router, "default", name) for name in names]
        return all(run_blocking(call.process_stats()) is None for call in calls)

    wait_until(all_asleep, timeout=30)
    # a hibernated profile answers again, with its data
    result = run_blocking(
        ProfileCalls(router, "default", names[0]).recall(RecallRequest(query="fact"))
    )
    assert any("pressed-0" in hit.content for hit in result.memories)


def test_a_host_never_opens_a_profile_that_another_host_holds(serve_app, server_settings):
    router = ProfileRouter(server_settings)
    name = f"held-{uuid.uuid4().hex[:8]}"
    run_blocking(ProfileCalls(router, "default", name).activate())
    held = run_blocking(router.catalog.holder("default", name))
    assert held is not None
    others = [h for host, h in run_blocking(router.catalog.hosts()) if host != held[0]]
    assert others, "the session's app starts one host per CPU"
    with pytest.raises(ProfileMoved):
        ray.get(others[0].run.remote("default", name, server_settings, lambda p: p.info()))
    stats = run_blocking(ProfileCalls(router, "default", name).process_stats())
    assert stats is not None and stats.host == held[0]


def test_a_host_whose_event_loop_is_blocked_still_says_what_blocks_it(
    serve_app, server_settings, tmp_path
):
    settings = own_hosts(server_settings, tmp_path, hosts_per_node=1)
    router = ProfileRouter(settings)
    run_blocking(ProfileCalls(router, "default", "blocked").activate())
    [(host_name, host)] = run_blocking(router.catalog.hosts())
    # An operation that holds the host's event loop (as a stuck synchronous call would).
    blocking = host.run.remote(
        "default", "blocked", settings, lambda p: (time.sleep(4), p.info())[1]
    )
    wait_until(lambda: "<lambda>" in run_blocking(hosts_stacks(settings))[host_name], timeout=3)
    started = time.monotonic()
    stacks = run_blocking(hosts_stacks(settings))
    assert time.monotonic() - started < 2  # answered while the main loop is still blocked
    assert "in <lambda>" in stacks[host_name] and "test_hosts.py" in stacks[host_name]
    assert "tasks on the main event loop" in stacks[host_name]
    assert ray.get(blocking).name == "blocked"  # the blocked call itself completes
    after = run_blocking(hosts_stacks(settings))[host_name]
    assert "<lambda>" not in after


def test_a_host_that_stops_answering_keeps_its_profiles_and_gets_no_new_ones(
    serve_app, server_settings, tmp_path
):
    settings = own_hosts(server_settings, tmp_path, hosts_per_node=2, host_answer_timeout_s=1.0)
    router = ProfileRouter(settings)
    run_blocking(ProfileCalls(router, "default", "held").activate())
    busy, _ = run_blocking(router.catalog.holder("default", "held"))
    hosts = dict(run_blocking(router.catalog.hosts()))
    assert len(hosts) == 2
    [other] = set(hosts) - {busy}
    # The held profile's host stops answering (its event loop blocked) for a while.
    blocking = hosts[busy].run.remote(
        "default", "held", settings, lambda p: (time.sleep(8), p.info())[1]
    )

    def lease(name: str) -> str:
        return run_blocking(router.catalog.lease("default", name))[0]

    time.sleep(4)  # a ping and its 1 s timeout, at most 2 s apart
    assert [lease(f"new-{index}") for index in range(4)] == [other] * 4
    assert lease("held") == busy  # never two writers: it keeps what it holds
    assert ray.get(blocking).name == "held"
    # Answering again, it is the least loaded host once more.
    wait_until(lambda: lease(f"later-{uuid.uuid4().hex[:6]}") == busy, timeout=10, interval=0.5)
