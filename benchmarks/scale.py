"""Profiles at scale: many profiles in few host processes, wakes, a moving hot set, no loss.

    python benchmarks/scale.py --profiles 1000 --wakes 40 --seconds 60

Starts a private local Ray (``--cpus``) with the raymem Serve app on a free loopback
port (``--nodes`` > 1: a local cluster of that many raylets, each with a ``data_dir``
of its own and its own profile hosts), then, all over HTTP:

1. Creates ``--profiles`` profiles (one remembered fact each, ``--concurrency`` at a
   time) and samples the profile hosts: open profiles, PSS per host, and PSS per
   open profile (the hosts' summed PSS over the profiles open in them; a profile is
   no longer a process of its own, so this is what an open profile costs).
2. Wakes: ``--rounds`` times, ``--wakes`` profiles are hibernated and then all asked
   a recall at once (request to answer); then ``--singles`` hibernated profiles are
   woken one at a time.
3. A moving hot set: ``--clients`` clients for ``--seconds``, each request to a
   profile of a window of ``--hot`` profiles that moves every ``--shift-s`` seconds
   (80%) or to any profile (20%); 30% remember, 70% recall. ``--max-live`` bounds the
   open profiles per node (0: the bound derived from memory), so with a small bound
   the hot set keeps waking hibernated profiles.
4. Every acknowledged remember is read back: lost writes must be 0. Host processes
   that died during the run (a crash or Ray's memory monitor) are counted.

Prints a table and writes JSON to benchmarks/results/scale-<time>.json.
"""

import argparse
import asyncio
import os
import random
import shutil
import tempfile
import threading
import time
from collections import Counter
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import httpx
import msgspec
from _common import free_port, percentiles, save_json

from raymem.actors.calls import ProfileCalls, run_blocking
from raymem.actors.host import HostUsage, hosts_usage
from raymem.actors.registry import ProfileRouter
from raymem.config import Settings, load_settings

MB = 2**20
HOT_SHARE = 0.8
REMEMBER_SHARE = 0.3
SAMPLE_EVERY_S = 2.0
HEALTH_TIMEOUT_S = 180.0


def name_of(index: int) -> str:
    return f"scale-{index:05d}"


class Acks:
    """What the server acknowledged, to be read back, and how each request ended."""

    def __init__(self) -> None:
        self.memories: dict[str, set[str]] = {}
        self.statuses: Counter[int] = Counter()
        self.latency_ms: dict[str, list[float]] = {"remember": [], "recall": []}

    async def remember(self, http: httpx.AsyncClient, profile: str, text: str) -> None:
        began = time.perf_counter()
        response = await http.post(f"/v1/profiles/{profile}/memories", json={"content": text})
        self.latency_ms["remember"].append((time.perf_counter() - began) * 1000)
        self.statuses[response.status_code] += 1
        if response.status_code in (200, 201):
            self.memories.setdefault(profile, set()).add(response.json()["id"])

    async def recall(self, http: httpx.AsyncClient, profile: str) -> float:
        began = time.perf_counter()
        response = await http.post(
            f"/v1/profiles/{profile}/recall",
            json={"query": "What does this profile hold?", "synthesize": False},
        )
        elapsed = (time.perf_counter() - began) * 1000
        self.latency_ms["recall"].append(elapsed)
        self.statuses[response.status_code] += 1
        return elapsed


# ------------------------------------------------------------------ sampling


def usage_summary(usages: list[HostUsage]) -> dict[str, Any]:
    open_profiles = sum(len(u.open_profiles) for u in usages)
    pss = sum(u.pss_bytes for u in usages)
    return {
        "hosts": len(usages),
        "open_profiles": open_profiles,
        "max_live_per_host": [u.max_live for u in usages],
        "pss_mb_per_host": [round(u.pss_bytes / MB, 1) for u in usages],
        "pss_mb_total": round(pss / MB, 1),
        "pss_mb_per_open_profile": round(pss / MB / open_profiles, 2) if open_profiles else None,
        "pids": sorted(u.pid for u in usages),
    }


class Sampler:
    """Samples the hosts every few seconds on a thread; notes host processes that died."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.samples: list[dict[str, Any]] = []
        self.pids_seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> dict[str, Any]:
        summary = usage_summary(run_blocking(hosts_usage(self.settings)))
        self.pids_seen.update(summary["pids"])
        return summary

    def _loop(self) -> None:
        began = time.monotonic()
        while not self._stop.is_set():
            self.samples.append({"t": round(time.monotonic() - began, 1), **self.sample()})
            self._stop.wait(SAMPLE_EVERY_S)

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


# -------------------------------------------------------------------- phases


async def create(url: str, args: argparse.Namespace, acks: Acks) -> float:
    began = time.monotonic()
    gate = asyncio.Semaphore(args.concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=300) as http:

        async def one(index: int) -> None:
            async with gate:
                await acks.remember(http, name_of(index), f"Profile {index} keeps fact zero.")

        await asyncio.gather(*(one(i) for i in range(args.profiles)))
    return time.monotonic() - began


def hibernate_all(settings: Settings, profiles: list[str]) -> None:
    """Ask each profile to hibernate and wait until none is open."""

    async def run() -> None:
        router = ProfileRouter(settings)
        calls = [ProfileCalls(router, "default", p) for p in profiles]
        await asyncio.gather(*(c.hibernate() for c in calls))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            stats = await asyncio.gather(*(c.process_stats() for c in calls))
            if all(s is None for s in stats):
                return
            await asyncio.sleep(0.1)
        raise RuntimeError("profiles did not hibernate within 120 s")

    run_blocking(run())


async def wake_burst(url: str, profiles: list[str], acks: Acks) -> list[float]:
    async with httpx.AsyncClient(base_url=url, timeout=300) as http:
        return list(await asyncio.gather(*(acks.recall(http, p) for p in profiles)))


async def hot_set(url: str, args: argparse.Namespace, acks: Acks) -> tuple[float, int]:
    began = time.monotonic()
    requests = 0

    async def client(seed: int) -> None:
        nonlocal requests
        rng = random.Random(seed)
        async with httpx.AsyncClient(base_url=url, timeout=300) as http:
            while (elapsed := time.monotonic() - began) < args.seconds:
                window = int(elapsed / args.shift_s) * args.hot
                if rng.random() < HOT_SHARE:
                    index = (window + rng.randrange(args.hot)) % args.profiles
                else:
                    index = rng.randrange(args.profiles)
                profile = name_of(index)
                if rng.random() < REMEMBER_SHARE:
                    await acks.remember(http, profile, f"Fact {rng.randrange(10**9)} of {profile}.")
                else:
                    await acks.recall(http, profile)
                requests += 1

    await asyncio.gather(*(client(i) for i in range(args.clients)))
    return time.monotonic() - began, requests


async def lost_writes(url: str, acks: Acks) -> int:
    lost = 0
    gate = asyncio.Semaphore(8)
    async with httpx.AsyncClient(base_url=url, timeout=300) as http:

        async def check(profile: str, memory_id: str) -> None:
            nonlocal lost
            async with gate:
                response = await http.get(f"/v1/profiles/{profile}/memories/{memory_id}")
                lost += response.status_code != 200

        await asyncio.gather(*(check(p, m) for p, ids in acks.memories.items() for m in ids))
    return lost


# ---------------------------------------------------------------------- main


def start(args: argparse.Namespace) -> tuple[str, Settings, Any]:
    """The app's URL and settings, and the local cluster it runs on (None: one node)."""
    from raymem.serve import server

    port = free_port()
    settings = load_settings(
        environ={
            "RAYMEM_DATA_DIR": args.data_dir,
            "RAYMEM_SERVER_PORT": str(port),
            "RAYMEM_NAMESPACE": f"raymem-scale-{port}",
            "RAYMEM_MODELS_EMBEDDER_THREADS": "1",
        }
    )
    settings = msgspec.structs.replace(
        settings,
        profiles=msgspec.structs.replace(
            settings.profiles, idle_timeout_s=3600.0, max_live=args.max_live
        ),
    )
    cluster = start_cluster(args, settings) if args.nodes > 1 else None
    server.start(settings, num_cpus=args.cpus)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return url, settings, cluster
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("the server did not become healthy")
        time.sleep(0.5)


def start_cluster(args: argparse.Namespace, settings: Settings) -> Any:
    """A head and ``--nodes - 1`` workers (one CPU each) on this machine, connected to."""
    import ray
    from ray.cluster_utils import Cluster

    from raymem.actors.layout import NODE_DATA_DIR_ENV

    def node(index: int, cpus: int) -> dict[str, Any]:
        disk = os.path.join(args.data_dir, f"node-{index}")
        return {
            "num_cpus": cpus,
            "object_store_memory": 100 * MB,
            "env_vars": {NODE_DATA_DIR_ENV: disk},
        }

    cluster = Cluster(
        initialize_head=True, head_node_args={**node(0, args.cpus), "include_dashboard": False}
    )
    for index in range(1, args.nodes):
        cluster.add_node(**node(index, 1))
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace=settings.namespace, log_to_driver=False)
    return cluster


def run(args: argparse.Namespace) -> dict[str, Any]:
    from raymem.serve import server

    url, settings, cluster = start(args)
    acks = Acks()
    rng = random.Random(17)
    result: dict[str, Any] = {"config": vars(args), "cpus": os.cpu_count(), "load": []}
    try:
        with Sampler(settings) as sampler:
            result["load"].append(os.getloadavg()[0])
            created_s = asyncio.run(create(url, args, acks))
            result["create"] = {
                "seconds": round(created_s, 1),
                "profiles_per_s": round(args.profiles / created_s, 1),
                "remember_ms": percentiles(acks.latency_ms["remember"]),
            }
            result["after_create"] = sampler.sample()

            wakes: list[dict[str, Any]] = []
            for _ in range(args.rounds):
                burst = rng.sample(range(args.profiles), args.wakes)
                profiles = [name_of(i) for i in burst]
                hibernate_all(settings, profiles)
                load = os.getloadavg()[0]
                latencies = asyncio.run(wake_burst(url, profiles, acks))
                wakes.append(
                    {"load": round(load, 1), **percentiles(latencies), "max": max(latencies)}
                )
            result["burst_wakes_ms"] = wakes

            singles = []
            for index in rng.sample(range(args.profiles), args.singles):
                hibernate_all(settings, [name_of(index)])
                singles.extend(asyncio.run(wake_burst(url, [name_of(index)], acks)))
            result["single_wake_ms"] = percentiles(singles)

            acks.latency_ms = {"remember": [], "recall": []}
            elapsed, requests = asyncio.run(hot_set(url, args, acks))
            result["hot_set"] = {
                "seconds": round(elapsed, 1),
                "requests": requests,
                "requests_per_s": round(requests / elapsed, 1),
                "latency_ms": {op: percentiles(v) for op, v in acks.latency_ms.items()},
            }
            result["after_hot_set"] = sampler.sample()
        result["lost_writes"] = asyncio.run(lost_writes(url, acks))
        result["acknowledged_remembers"] = sum(len(ids) for ids in acks.memories.values())
        result["statuses"] = dict(acks.statuses)
        result["server_errors"] = sum(n for status, n in acks.statuses.items() if status >= 500)
        final = sampler.sample()
        result["host_processes_lost"] = len(sampler.pids_seen - set(final["pids"]))
        open_max = max(s["open_profiles"] for s in sampler.samples)
        result["open_profiles_max"] = open_max
        result["timeline"] = [
            {k: s[k] for k in ("t", "open_profiles", "pss_mb_total")} for s in sampler.samples
        ]
    finally:
        server.stop()
        if cluster is not None:
            cluster.shutdown()
    return result


def print_report(result: dict[str, Any]) -> None:
    c = result["config"]
    a = result["after_create"]
    print(
        f"\n{c['profiles']} profiles, {c['cpus']} Ray CPUs, max_live {c['max_live'] or 'derived'}"
    )
    print(f"create: {result['create']}")
    print(
        f"after create: {a['open_profiles']} open in {a['hosts']} hosts;"
        f" PSS per host MB {a['pss_mb_per_host']}; PSS per open profile"
        f" {a['pss_mb_per_open_profile']} MB (bound per host {a['max_live_per_host']})"
    )
    for i, w in enumerate(result["burst_wakes_ms"]):
        print(
            f"{c['wakes']} wakes at once, round {i}: p50 {w['p50']:.0f} ms  p99 {w['p99']:.0f} ms"
            f"  max {w['max']:.0f} ms  (load {w['load']})"
        )
    s = result["single_wake_ms"]
    print(f"single wakes: p50 {s['p50']:.0f} ms  p99 {s['p99']:.0f} ms  (n {s['n']})")
    h = result["hot_set"]
    print(f"hot set: {h['requests_per_s']} requests/s; latency {h['latency_ms']}")
    print(
        f"lost writes {result['lost_writes']} of {result['acknowledged_remembers']};"
        f" 5xx {result['server_errors']}; host processes lost {result['host_processes_lost']};"
        f" open profiles max {result['open_profiles_max']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--wakes", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--singles", type=int, default=20)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--hot", type=int, default=50)
    parser.add_argument("--shift-s", type=float, default=10.0)
    parser.add_argument("--max-live", type=int, default=0)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--nodes", type=int, default=1, help="raylets on this machine")
    parser.add_argument("--data-dir", default="")
    args = parser.parse_args()
    own_dir = not args.data_dir
    args.data_dir = args.data_dir or tempfile.mkdtemp(prefix="raymem-scale-")
    try:
        result = run(args)
    finally:
        if own_dir:
            shutil.rmtree(args.data_dir, ignore_errors=True)
    print_report(result)
    print(f"saved {save_json('scale', result)}")


if __name__ == "__main__":
    main()
