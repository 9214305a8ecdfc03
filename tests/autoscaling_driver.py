"""Profile hosts on demand on Ray's fake multi-node autoscaler (run by test_autoscaling.py).

Starts a head node (one ``raymem_profile_hosts``) with an autoscaling config whose
worker type declares one more, deploys the app with hosts on demand (at most one
host per node's resource, two open profiles per host), and then, through the
in-cluster API:

1. opens profiles until the first host is full: the catalog starts a second host,
   which waits for a node; the autoscaler launches one and the host starts there;
2. opens more profiles: they go to the new host, on the new node;
3. lets every profile hibernate: the new host is idle, the catalog stops it, the
   node goes idle and the autoscaler removes it.

Prints one JSON object with what happened and when. Ray's ``AutoscalingCluster``
is not used: it runs ``ray stop --force`` (every Ray of the machine's user) and
reads a file the wheel does not ship. The head is a ``Cluster`` node with the same
kind of config, on free ports, and only this cluster's processes are killed.
"""

import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import msgspec

HOST_RESOURCE = "raymem_profile_hosts"
IDLE_TIMEOUT_S = 10  # the autoscaler removes a node idle this long
OPEN_PER_HOST = 2
TIMEOUT_S = 240.0

BASE_CONFIG = {
    "cluster_name": "raymem-autoscaling-test",
    "max_workers": 1,
    "provider": {
        "type": "fake_multinode",
        "use_node_id_as_ip": True,
        "disable_node_updaters": True,
        "disable_launch_config_check": True,
    },
    "head_node_type": "ray.head.default",
    "available_node_types": {
        # The head does hold one host (head_node_args below), but the fake provider does not
        # match the head with its resource reports (their node ids differ), so it would
        # count that host's resource as free and never launch a node for a second host.
        "ray.head.default": {
            "resources": {"CPU": 2},
            "node_config": {},
            "max_workers": 0,
        },
        "profile_node": {
            "resources": {"CPU": 1, HOST_RESOURCE: 1, "object_store_memory": 80 * 2**20},
            "node_config": {},
            "min_workers": 0,
            "max_workers": 1,
        },
    },
    "auth": {},
    "upscaling_speed": 1.0,
    "idle_timeout_minutes": IDLE_TIMEOUT_S / 60,
    "docker": {},
    "initialization_commands": [],
    "setup_commands": [],
    "head_setup_commands": [],
    "worker_setup_commands": [],
    "head_start_ray_commands": [],
    "worker_start_ray_commands": [],
    "file_mounts": {},
    "cluster_synced_files": [],
    "file_mounts_sync_continuously": False,
    "rsync_exclude": [],
    "rsync_filter": [],
}


def kill_cluster_processes(gcs_address: str) -> None:
    """SIGKILL the processes whose command line names this cluster's GCS address."""
    port = gcs_address.rsplit(":", 1)[1]
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if gcs_address in command or f"--gcs_server_port={port}" in command:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def wait_for(predicate, what: str, timeout: float = TIMEOUT_S):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise TimeoutError(f"{what}: not within {timeout} s")


def main(data_dir: str) -> dict[str, object]:
    import ray
    from ray import serve
    from ray.cluster_utils import Cluster

    from raymem.actors.calls import ProfileCalls, run_blocking
    from raymem.actors.registry import ProfileRouter
    from raymem.config import load_settings
    from raymem.serve.app import build_app

    port = _free_port()
    gcs = f"{ray._private.services.get_node_ip_address()}:{port}"
    config = json.loads(json.dumps(BASE_CONFIG))
    config["provider"]["gcs_address"] = gcs
    config_file = Path(tempfile.mkstemp(suffix=".json")[1])
    config_file.write_text(json.dumps(config))
    os.environ.update({"AUTOSCALER_UPDATE_INTERVAL_S": "1", "RAY_FAKE_CLUSTER": "1"})
    report: dict[str, object] = {}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "resources": {HOST_RESOURCE: 1},
            "gcs_server_port": port,
            "autoscaling_config": str(config_file),
            "include_dashboard": False,
            "object_store_memory": 80 * 2**20,
        },
    )
    try:
        settings = load_settings(
            environ={
                "RAYMEM_DATA_DIR": data_dir,
                "RAYMEM_NAMESPACE": "raymem-autoscaling",
                "RAYMEM_PROFILES_MAX_HOSTS": "2",
                "RAYMEM_PROFILES_MIN_HOSTS": "1",
                "RAYMEM_PROFILES_HOST_IDLE_S": "3",
                "RAYMEM_PROFILES_MAX_LIVE": str(OPEN_PER_HOST),
                "RAYMEM_PROFILES_IDLE_TIMEOUT_S": "600",
            }
        )
        ray.init(address=cluster.address, namespace=settings.namespace, log_to_driver=False)
        serve.start(http_options={"host": "127.0.0.1", "port": _free_port()})
        serve.run(build_app(settings), name=settings.app_name, route_prefix="/", blocking=False)
        router = ProfileRouter(settings)

        def alive_nodes() -> int:
            return sum(1 for node in ray.nodes() if node["Alive"])

        def open_in(name: str) -> str:
            stats = run_blocking(ProfileCalls(router, "default", name).process_stats())
            assert stats is not None
            return stats.host

        report["nodes_at_start"] = alive_nodes()
        first = [f"first-{index}" for index in range(OPEN_PER_HOST)]
        for name in first:
            run_blocking(ProfileCalls(router, "default", name).activate())
        started = time.monotonic()
        first_hosts = {open_in(name) for name in first}
        report["first_hosts"] = len(first_hosts)
        # One more profile: the first host is full, so a second host is wanted.
        run_blocking(ProfileCalls(router, "default", "overflow").activate())
        wait_for(lambda: alive_nodes() == 2, "a node for the second host")
        report["node_added_after_s"] = round(time.monotonic() - started, 1)
        hosts_now = wait_for(
            lambda: (
                len(run_blocking(router.catalog.hosts())) == 2
                and run_blocking(router.catalog.hosts())
            ),
            "the second host",
        )
        wait_for(lambda: all(_answers(handle) for _, handle in hosts_now), "hosts answering")
        time.sleep(1)  # the catalog asks each new host where it is as it starts
        second = [f"second-{index}" for index in range(OPEN_PER_HOST)]
        for name in second:
            run_blocking(ProfileCalls(router, "default", name).activate())
        report["second_on_new_host"] = all(open_in(name) not in first_hosts for name in second)
        report["hosts"] = len(hosts_now)

        # Everything hibernates: the second host stops, then its node goes.
        for name in [*first, "overflow", *second]:
            run_blocking(ProfileCalls(router, "default", name).hibernate())
        quiet = time.monotonic()
        wait_for(lambda: len(run_blocking(router.catalog.hosts())) == 1, "the idle host to stop")
        report["host_stopped_after_s"] = round(time.monotonic() - quiet, 1)
        wait_for(lambda: alive_nodes() == 1, "the idle node to go")
        report["node_removed_after_s"] = round(time.monotonic() - quiet, 1)
        # The profiles answer again, from the host that stayed.
        info = run_blocking(ProfileCalls(router, "default", second[0]).info())
        report["answers_after_scale_down"] = info.name == second[0]
    finally:
        try:
            serve.shutdown()
            ray.shutdown()
        finally:
            cluster.shutdown()
            kill_cluster_processes(gcs)
            config_file.unlink(missing_ok=True)
    return report


def _answers(handle: object) -> bool:
    import ray

    try:
        ray.get(handle.ping.remote(), timeout=1)  # type: ignore[attr-defined]
    except ray.exceptions.GetTimeoutError:
        return False
    return True


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


if __name__ == "__main__":
    print(msgspec.json.encode(main(sys.argv[1])).decode())
