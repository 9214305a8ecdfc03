"""Mixed ingest/remember/recall load over many profiles, with hibernation active.

    python benchmarks/load.py --clients 32 --profiles 50 --seconds 60 --idle-timeout 5

Starts a private local Ray with the raymem Serve app on a free loopback port and a
short ``profiles.idle_timeout_s``, so profiles hibernate and re-activate during the
run: clients draw most profiles from a "hot" window that slides over the profiles
every ``--shift-s`` seconds (longer than the idle timeout), and the rest uniformly.
A sampler records the open profiles and the profile hosts' summed RSS and PSS once a
second (sampling never counts as use, so it never keeps a profile awake); PSS per
open profile is the hosts' summed PSS over the profiles open in them.
Afterwards every acknowledged ingest (its session and turns) and remember (its
memory id) is read back over HTTP: lost writes must be 0.
Prints a table and writes JSON to benchmarks/results/load.json.
"""

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from tempfile import mkdtemp
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import httpx
import msgspec

from raymem.config import Settings, load_settings

OPS = ("ingest", "remember", "recall")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0, "p50": 0.0, "p95": 0.0, "p99": 0.0, "mean": 0.0}
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {
        "n": len(ordered),
        "p50": pick(0.50),
        "p95": pick(0.95),
        "p99": pick(0.99),
        "mean": round(statistics.fmean(ordered), 1),
    }


class Run:
    """Everything the clients and the sampler record."""

    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.statuses: Counter[str] = Counter()
        self.sessions: dict[str, dict[str, list[str]]] = defaultdict(dict)
        self.memories: dict[str, set[str]] = defaultdict(set)
        self.samples: list[dict[str, Any]] = []
        self.errors: list[str] = []  # the first few error responses, for the report


# ------------------------------------------------------------------ clients


def pick_profile(rng: random.Random, args: argparse.Namespace, elapsed: float) -> str:
    if rng.random() < args.cold_fraction:
        index = rng.randrange(args.profiles)
    else:
        start = int(elapsed // args.shift_s) * args.hot
        index = (start + rng.randrange(args.hot)) % args.profiles
    return f"load-{index:03d}"


async def client_loop(
    client: httpx.AsyncClient,
    index: int,
    args: argparse.Namespace,
    began: float,
    run: Run,
) -> None:
    rng = random.Random(index)
    weights = (args.ingest_weight, args.remember_weight, args.recall_weight)
    for n in range(args.max_ops_per_client):
        elapsed = time.monotonic() - began
        if elapsed >= args.seconds:
            return
        profile = pick_profile(rng, args, elapsed)
        op = rng.choices(OPS, weights)[0]
        tag = f"c{index}n{n}"
        path = f"/v1/profiles/{profile}"
        if op == "ingest":
            turns = [
                f"Shipment {tag} carries {rng.randint(1, 99)} crates of "
                f"{rng.choice(['tea', 'rice', 'steel', 'cotton'])} to port P{rng.randint(1, 40)}.",
                f"Logged shipment {tag}.",
            ]
            body: dict[str, Any] = {
                "session_id": f"s-{tag}",
                "messages": [
                    {"role": "user", "content": turns[0]},
                    {"role": "assistant", "content": turns[1]},
                ],
            }
            request = client.post(f"{path}/ingest", json=body)
        elif op == "remember":
            body = {"content": f"Locker {tag} holds {rng.choice(['maps', 'keys', 'radios'])}."}
            request = client.post(f"{path}/memories", json=body)
        else:
            other = f"c{rng.randrange(args.clients)}n{rng.randrange(max(n, 1))}"
            body = {"query": f"Where does shipment {other} go?", "limit": 5}
            body["synthesize"] = not args.no_synthesis
            request = client.post(f"{path}/recall", json=body)
        start = time.perf_counter()
        try:
            response = await request
        except httpx.TransportError as exc:
            run.statuses[f"{op} {type(exc).__name__}"] += 1
            continue
        run.latency[op].append((time.perf_counter() - start) * 1000)
        run.statuses[f"{op} {response.status_code}"] += 1
        if response.status_code >= 400 and len(run.errors) < 10:
            run.errors.append(f"{op} {path}: {response.status_code} {response.text[:300]}")
        if op == "ingest" and response.status_code == 200:
            run.sessions[profile][body["session_id"]] = turns
        elif op == "remember" and response.status_code == 201:
            run.memories[profile].add(response.json()["id"])


async def drive(url: str, args: argparse.Namespace, run: Run) -> float:
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        began = time.monotonic()
        await asyncio.wait_for(
            asyncio.gather(
                *(client_loop(client, i, args, began, run) for i in range(args.clients))
            ),
            timeout=args.seconds + 180,
        )
        return time.monotonic() - began


async def seed_profiles(url: str, args: argparse.Namespace) -> float:
    """One memory per profile before the run, so recalls never meet a missing profile."""
    began = time.monotonic()
    gate = asyncio.Semaphore(4)
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:

        async def one(index: int) -> None:
            async with gate:
                response = await client.post(
                    f"/v1/profiles/load-{index:03d}/memories",
                    json={"content": f"Profile {index} belongs to the load benchmark."},
                )
                response.raise_for_status()

        await asyncio.gather(*(one(i) for i in range(args.profiles)))
    return time.monotonic() - began


# ------------------------------------------------------------------ sampler


def sample(settings: Settings, began: float) -> dict[str, Any]:
    """The open profiles, by the pid of the host they are open in, and the hosts' memory."""
    from raymem.actors.calls import run_blocking
    from raymem.actors.host import hosts_usage

    usages = run_blocking(hosts_usage(settings))
    pids = {name: u.pid for u in usages for name in u.open_profiles}
    return {
        "t": round(time.monotonic() - began, 1),
        "live": len(pids),
        "hosts": len(usages),
        "rss_mb": round(sum(u.rss_bytes for u in usages) / 2**20, 1),
        "pss_mb": round(sum(u.pss_bytes for u in usages) / 2**20, 1),
        "pids": pids,
    }


def sampler(settings: Settings, run: Run, stop: threading.Event, began: float) -> None:
    while not stop.is_set():
        run.samples.append(sample(settings, began))
        stop.wait(1.0)


def transitions(samples: list[dict[str, Any]]) -> tuple[int, int]:
    """Hibernations (an open profile gone by the next sample) and re-activations (a profile
    open again after it was seen closed)."""
    hibernated = reactivated = 0
    seen: set[str] = set()
    previous: set[str] = set()
    for s in samples:
        names = set(s["pids"])
        hibernated += len(previous - names)
        reactivated += len((names - previous) & seen)
        seen |= names
        previous = names
    return hibernated, reactivated


# ----------------------------------------------------------------- checking


def lost_writes(url: str, run: Run) -> dict[str, int]:
    lost = {"sessions": 0, "turns": 0, "memories": 0}
    with httpx.Client(base_url=url, timeout=120) as http:
        for profile in sorted(set(run.sessions) | set(run.memories)):
            base = f"/v1/profiles/{profile}"
            sessions = http.get(f"{base}/sessions").json()["sessions"]
            counts = {s["id"]: s["message_count"] for s in sessions}
            for session, turns in run.sessions[profile].items():
                if session not in counts:
                    lost["sessions"] += 1
                    lost["turns"] += len(turns)
                elif counts[session] < len(turns):
                    lost["turns"] += len(turns) - counts[session]
            ids: set[str] = set()
            cursor = None
            while True:
                params: dict[str, Any] = {"limit": 100, "include_superseded": "true"}
                if cursor:
                    params["cursor"] = cursor
                page = http.get(f"{base}/memories", params=params).json()
                ids.update(m["id"] for m in page["memories"])
                cursor = page["next_cursor"]
                if cursor is None:
                    break
            lost["memories"] += len(run.memories[profile] - ids)
    return lost


# --------------------------------------------------------------------- main


def main_run(args: argparse.Namespace) -> dict[str, Any]:
    from raymem.serve import server

    data_dir = Path(args.data_dir or mkdtemp(prefix="raymem-load-"))
    settings = load_settings(environ={"RAYMEM_DATA_DIR": str(data_dir)})
    settings = msgspec.structs.replace(
        settings,
        server=msgspec.structs.replace(settings.server, port=free_port()),
        profiles=msgspec.structs.replace(settings.profiles, idle_timeout_s=args.idle_timeout),
    )
    server.start(settings)
    url = f"http://127.0.0.1:{settings.server.port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("server did not become healthy within 180 s")
        time.sleep(0.5)
    seeded = asyncio.run(seed_profiles(url, args))
    run = Run()
    stop = threading.Event()
    try:
        began = time.monotonic()
        watcher = threading.Thread(target=sampler, args=(settings, run, stop, began), daemon=True)
        watcher.start()
        elapsed = asyncio.run(drive(url, args, run))
        stop.set()
        watcher.join(timeout=30)
        lost = lost_writes(url, run)
        after = sample(settings, began)
    finally:
        stop.set()
        server.stop()
    total = sum(run.statuses.values())
    hibernated, activated = transitions(run.samples)
    live = [s["live"] for s in run.samples] or [0]
    rss = [s["rss_mb"] for s in run.samples] or [0.0]
    pss = [s["pss_mb"] for s in run.samples] or [0.0]
    return {
        "config": {
            k: getattr(args, k)
            for k in ("clients", "profiles", "seconds", "idle_timeout", "hot", "shift_s")
        },
        "cpus": os.cpu_count(),
        "seed_s": round(seeded, 1),
        "elapsed_s": round(elapsed, 1),
        "requests": total,
        "requests_per_s": round(total / elapsed, 1),
        "latency_ms": {op: percentiles(run.latency[op]) for op in OPS},
        "all_latency_ms": percentiles([x for op in OPS for x in run.latency[op]]),
        "statuses": dict(run.statuses),
        "errors": run.errors,
        "acknowledged": {
            "ingests": sum(len(s) for s in run.sessions.values()),
            "remembers": sum(len(m) for m in run.memories.values()),
        },
        "lost_writes": lost,
        "live_actors": {
            "min": min(live),
            "max": max(live),
            "mean": round(statistics.fmean(live), 1),
        },
        "rss_mb": {"min": min(rss), "max": max(rss), "mean": round(statistics.fmean(rss), 1)},
        "pss_mb": {"min": min(pss), "max": max(pss), "mean": round(statistics.fmean(pss), 1)},
        "pss_mb_per_open_profile": round(max(pss) / max(max(live), 1), 1),
        "hosts": max((s["hosts"] for s in run.samples), default=0),
        "hibernations_seen": hibernated,
        "reactivations_seen": activated,
        "live_after_check": after["live"],
        "timeline": [{k: s[k] for k in ("t", "live", "hosts", "pss_mb")} for s in run.samples],
    }


def print_report(result: dict[str, Any]) -> None:
    c = result["config"]
    print(
        f"\n{c['clients']} clients, {c['profiles']} profiles, {result['elapsed_s']} s, "
        f"idle timeout {c['idle_timeout']} s, {result['cpus']} CPUs"
        f" (profiles seeded in {result['seed_s']} s)"
    )
    print(f"{'op':<9} {'n':>6} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    rows = [*((op, result["latency_ms"][op]) for op in OPS), ("all", result["all_latency_ms"])]
    for op, stats in rows:
        rate = stats["n"] / result["elapsed_s"]
        print(
            f"{op:<9} {stats['n']:>6} {rate:>7.1f} {stats['p50']:>8} {stats['p95']:>8} {stats['p99']:>8}"
        )
    print(f"statuses: {result['statuses']}")
    for error in result["errors"]:
        print(f"  error: {error}")
    print(
        f"open profiles: min {result['live_actors']['min']}, max {result['live_actors']['max']},"
        f" mean {result['live_actors']['mean']} in {result['hosts']} hosts; hosts' PSS MB:"
        f" min {result['pss_mb']['min']}, max {result['pss_mb']['max']},"
        f" mean {result['pss_mb']['mean']} (~{result['pss_mb_per_open_profile']} MB per open"
        " profile)"
    )
    print(
        f"hibernations seen: {result['hibernations_seen']}, re-activations seen:"
        f" {result['reactivations_seen']}"
    )
    print(f"acknowledged: {result['acknowledged']}; lost writes: {result['lost_writes']}")
    step = max(1, len(result["timeline"]) // 12)
    print("t s:      " + " ".join(f"{s['t']:>6}" for s in result["timeline"][::step]))
    print("live:     " + " ".join(f"{s['live']:>6}" for s in result["timeline"][::step]))
    print("hosts:    " + " ".join(f"{s['hosts']:>6}" for s in result["timeline"][::step]))
    print("PSS MB:   " + " ".join(f"{s['pss_mb']:>6.0f}" for s in result["timeline"][::step]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--profiles", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--idle-timeout", type=float, default=5.0)
    parser.add_argument("--hot", type=int, default=8, help="profiles in the sliding hot window")
    parser.add_argument("--shift-s", type=float, default=8.0, help="seconds per window position")
    parser.add_argument("--cold-fraction", type=float, default=0.1)
    parser.add_argument("--ingest-weight", type=float, default=0.4)
    parser.add_argument("--remember-weight", type=float, default=0.2)
    parser.add_argument("--recall-weight", type=float, default=0.4)
    parser.add_argument("--no-synthesis", action="store_true", help="recall without synthesis")
    parser.add_argument("--max-ops-per-client", type=int, default=100_000)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default="benchmarks/results/load.json")
    args = parser.parse_args()
    args.hot = min(args.hot, args.profiles)
    result = main_run(args)
    print_report(result)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"saved {args.out}", file=sys.stderr)
    lost = sum(result["lost_writes"].values())
    if lost:
        raise SystemExit(f"{lost} acknowledged writes lost")


if __name__ == "__main__":
    main()
