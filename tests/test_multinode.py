"""Several nodes: the shipped Serve config deployed onto a local three-node Ray cluster.

Each node is a raylet of its own on this machine with its own ``data_dir``
(``RAYMEM_NODE_DATA_DIR``) and one profile host (``raymem_profile_hosts``). The
app is deployed by Ray's own ``serve run`` from ``cluster/serve-config.yaml``,
adapted only where this machine differs (no GPU, one proxy, loopback, a free
port, a TOML without object storage), and every check goes through real HTTP.

Without object storage a profile's file exists on one node only: the profile is
pinned there, answers 503 ``profile_unavailable`` while that node is gone (never
an empty profile opened elsewhere), and answers again, with its data, once a node
with that disk is back.
"""

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import free_port, wait_until
from ray.cluster_utils import Cluster

from raymem.actors.catalog import HOST_RESOURCE
from raymem.actors.layout import NODE_DATA_DIR_ENV, PROFILE_FILE

REPO = Path(__file__).resolve().parent.parent
SERVE_CONFIG = REPO / "cluster" / "serve-config.yaml"
TENANT = "default"  # no API keys configured
NODE_MEMORY = {"object_store_memory": 80 * 2**20}
# A node killed without a goodbye is declared dead within a few seconds, not 30.
HEALTH_CHECKS = {
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 1000,
    "health_check_failure_threshold": 5,
}
START_TIMEOUT_S = 300  # three raylets, Serve and the model on a loaded 2-core machine


def _node_args(disk: Path) -> dict[str, Any]:
    return {
        "num_cpus": 0,  # the model pool and the ingress stay on the head
        "resources": {HOST_RESOURCE: 1},
        "env_vars": {NODE_DATA_DIR_ENV: str(disk)},
        **NODE_MEMORY,
    }


def _deployable_config(tmp: Path, port: int, toml: Path) -> Path:
    """The shipped Serve config with what this machine lacks changed, nothing else."""
    config = yaml.safe_load(SERVE_CONFIG.read_text())
    config["proxy_location"] = "HeadOnly"  # every node is this machine: one port
    config["http_options"] = {**config["http_options"], "host": "127.0.0.1", "port": port}
    (app,) = config["applications"]
    app["args"]["config"] = str(toml)
    app["runtime_env"]["env_vars"]["HF_HUB_OFFLINE"] = "1"  # no model hub here
    for deployment in app["deployments"]:
        scaling = deployment.get("autoscaling_config", {})
        scaling.update(min_replicas=1, initial_replicas=1, max_replicas=1)
        options = deployment.get("ray_actor_options", {})
        if "num_gpus" in options:
            options["num_gpus"] = 0  # no GPU on this machine
    path = tmp / "serve-config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class MultiNode:
    """A head (disk a) and two workers (disks b, c) running the app; ``settings`` is TOML
    added to the app's configuration; ``head_hosts``: whether the head hosts profiles."""

    def __init__(self, tmp: Path, settings: str = "", *, head_hosts: bool = True) -> None:
        self.disks = {name: tmp / f"disk-{name}" for name in ("a", "b", "c")}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 2,
                "include_dashboard": False,
                # where some node declares the resource, only such nodes host profiles
                "resources": {HOST_RESOURCE: 1} if head_hosts else {},
                "env_vars": {NODE_DATA_DIR_ENV: str(self.disks["a"])},
                "_system_config": HEALTH_CHECKS,
                **NODE_MEMORY,
            },
        )
        self.workers = {
            name: self.cluster.add_node(**_node_args(self.disks[name])) for name in "bc"
        }
        self.cluster.wait_for_nodes(timeout=START_TIMEOUT_S)
        toml = tmp / "raymem.toml"
        toml.write_text(
            f'data_dir = "{self.disks["a"]}"\n'
            "[profiles]\nidle_timeout_s = 600\n"
            "[models]\nnum_gpus = 0\n" + settings
        )
        config = _deployable_config(tmp, self.port, toml)
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        subprocess.run(
            [Path(sys.executable).parent / "serve", "run", str(config), "--non-blocking",
             "--address", self.cluster.address],
            check=True, env=env, capture_output=True, text=True, timeout=START_TIMEOUT_S,
        )  # fmt: skip
        self.http = httpx.Client(base_url=self.url, timeout=60)
        wait_until(self._healthy, timeout=START_TIMEOUT_S, interval=0.5)

    def _healthy(self) -> bool:
        try:
            return self.http.get("/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def disk_of(self, profile: str) -> list[str]:
        """The disks holding a file of ``profile``."""
        return [
            name
            for name, disk in self.disks.items()
            if (disk / TENANT / profile / PROFILE_FILE).exists()
        ]

    def close(self) -> None:
        self.http.close()
        self.cluster.shutdown()


@pytest.fixture(scope="module")
def multinode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiNode]:
    nodes = MultiNode(tmp_path_factory.mktemp("multinode"))
    try:
        yield nodes
    finally:
        nodes.close()


def _remember(http: httpx.Client, profile: str, content: str) -> None:
    response = http.post(f"/v1/profiles/{profile}/memories", json={"content": content})
    assert response.status_code == 201, response.text


def _contents(http: httpx.Client, profile: str) -> set[str]:
    response = http.get(f"/v1/profiles/{profile}/memories")
    assert response.status_code == 200, response.text
    return {memory["content"] for memory in response.json()["memories"]}


def test_profiles_spread_over_the_nodes_and_every_node_lists_them_all(multinode):
    names = [f"spread-{index}" for index in range(6)]
    for name in names:
        _remember(multinode.http, name, f"{name} keeps the number {len(name)}.")
    placed = {name: multinode.disk_of(name) for name in names}
    assert all(len(disks) == 1 for disks in placed.values()), placed  # never split
    assert len({disks[0] for disks in placed.values()}) == 3, placed  # every node holds some
    listed = multinode.http.get("/v1/profiles").json()["profiles"]
    assert {profile["name"] for profile in listed} >= set(names)
    for name in names:
        assert _contents(multinode.http, name) == {f"{name} keeps the number {len(name)}."}


def test_without_object_storage_a_profile_waits_for_its_node_and_is_never_opened_empty(
    multinode,
):
    names = [f"pinned-{index}" for index in range(6)]
    for name in names:
        _remember(multinode.http, name, f"{name} was written before the node went away.")
    on_b = [name for name in names if multinode.disk_of(name) == ["b"]]
    elsewhere = [name for name in names if multinode.disk_of(name) != ["b"]]
    assert on_b and elsewhere

    multinode.cluster.remove_node(multinode.workers["b"], allow_graceful=False)
    started = time.monotonic()

    def unavailable() -> httpx.Response | None:
        response = multinode.http.get(f"/v1/profiles/{on_b[0]}/memories")
        return response if response.status_code == 503 else None

    refused = wait_until(unavailable, timeout=120, interval=0.5)
    assert refused.json()["error"]["code"] == "profile_unavailable"
    assert refused.headers["retry-after"]
    write = multinode.http.post(f"/v1/profiles/{on_b[0]}/memories", json={"content": "lost?"})
    assert write.status_code == 503
    assert multinode.disk_of(on_b[0]) == ["b"]  # no empty copy anywhere else
    for name in elsewhere:  # the other nodes' profiles answer meanwhile
        assert _contents(multinode.http, name) == {f"{name} was written before the node went away."}

    # The node comes back (a new raylet on the same disk): its profiles answer again.
    multinode.workers["b"] = multinode.cluster.add_node(**_node_args(multinode.disks["b"]))

    def answered() -> set[str] | None:
        response = multinode.http.get(f"/v1/profiles/{on_b[0]}/memories")
        if response.status_code != 200:
            return None
        return {memory["content"] for memory in response.json()["memories"]}

    back = wait_until(answered, timeout=180, interval=0.5)
    print(f"node b back after {time.monotonic() - started:.1f} s")
    assert back == {f"{on_b[0]} was written before the node went away."}
    assert multinode.disk_of(on_b[0]) == ["b"]
