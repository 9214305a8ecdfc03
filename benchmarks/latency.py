"""Recall latency, ingest throughput, wakes and host memory at growing profile sizes.

    python benchmarks/latency.py --sizes 1000,10000,100000 --queries 200

Starts a private local Ray with the raymem Serve app on a free loopback port.

1. Ingest throughput: ``--ingest`` synthetic turns (one fact each) through HTTP
   into one profile, with the real pipeline and embedder, then the time until
   background vectorisation has caught up.
2. Scale: one profile per size, built directly in its SQLite file (the rules
   pipeline without the embedder, then random unit vectors for every memory and
   turn: embedding 200K texts on 2 CPU cores would take longer than the rest of
   the run, and recall latency does not depend on what the vectors mean). Then
   recall is measured through the actor with a precomputed query vector (no
   model stages), through the actor with the query embedded by the model pool,
   and through HTTP; plus the wake of the hibernated profile (its first call, in a
   warm profile host) and the resident memory of the host it is open in.
3. Memory: the profile hosts' summed PSS over the profiles open in them (PSS per
   open profile) and per host; a profile is no longer a process of its own.

Prints a table and writes JSON to benchmarks/results/latency.json.
"""

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import sys
import time
from pathlib import Path
from tempfile import mkdtemp
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import msgspec

from raymem import Client
from raymem.actors.calls import ProfileCalls, run_blocking
from raymem.config import Settings, load_settings

COLOURS = ["red", "blue", "green", "amber", "violet", "silver", "teal", "ochre", "coral", "ivory"]
THINGS = [
    "bicycle",
    "kayak",
    "piano",
    "telescope",
    "notebook",
    "camera",
    "guitar",
    "lamp",
    "tent",
    "drone",
]
CITIES = [
    "Vienna",
    "Lisbon",
    "Osaka",
    "Quito",
    "Tallinn",
    "Accra",
    "Perth",
    "Bergen",
    "Cusco",
    "Leeds",
]


def fact(index: int) -> str:
    rng = random.Random(index)
    return (
        f"Member {index} keeps a {rng.choice(COLOURS)} {rng.choice(THINGS)} in "
        f"{rng.choice(CITIES)} and its serial code is SN{index:06d}."
    )


def question(index: int) -> str:
    rng = random.Random(index)
    return f"Where does member {index} keep the {(rng.choice(COLOURS), rng.choice(THINGS))[1]}?"


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {
        "p50": pick(0.50),
        "p95": pick(0.95),
        "p99": pick(0.99),
        "mean": round(statistics.fmean(ordered), 2),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ingest_throughput(client: Client, router: Any, count: int, batch: int) -> dict[str, float]:
    """Ingest ``count`` facts through HTTP; throughput, then the wait for their vectors."""
    target = client.get_profile("ingest-bench")
    began = time.perf_counter()
    memories = 0
    for first in range(0, count, batch):
        stop = min(count, first + batch)
        turns = [{"role": "user", "content": fact(i)} for i in range(first, stop)]
        memories += target.ingest(turns, session_id=f"s{first}").memories.added
    seconds = time.perf_counter() - began
    run_blocking(ProfileCalls(router, "default", "ingest-bench").wait_vectorised())
    total = time.perf_counter() - began
    return {
        "turns": count,
        "messages_per_s": round(count / seconds, 1),
        "memories_per_s": round(memories / seconds, 1),
        "with_vectors_messages_per_s": round(count / total, 1),
    }


def build_profile(settings: Settings, profile: str, size: int, dim: int, embedder: str) -> float:
    """Write ``size`` turns and their memories, with random unit vectors, into a new file.

    The vectors are recorded under the pool's embedder name: under another name the
    actor would take them for another model's and embed every row again.
    """
    import numpy as np

    from raymem.actors.profile import profile_path
    from raymem.pipelines.ingest import ingest
    from raymem.store import ProfileStore
    from raymem.types import MessageIn

    async def build() -> None:
        path = profile_path(settings, "default", profile)
        store = await ProfileStore.open(path, dim=dim, embedder=embedder)
        rng = np.random.default_rng(size)
        try:
            for first in range(0, size, 1000):
                stop = min(size, first + 1000)
                turns = [MessageIn(role="user", content=fact(i)) for i in range(first, stop)]
                await ingest(store, f"s{first // 10_000}", turns)
            for table in ("memory_vectors", "message_vectors"):
                while pending := await store.reads.pending_vectors(table, limit=5000):
                    vectors = rng.standard_normal((len(pending), dim)).astype(np.float32)
                    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                    rows = [(seq, vectors[i]) for i, (seq, _) in enumerate(pending)]
                    async with store.write() as writer:
                        await writer.set_vectors(table, rows)
        finally:
            await store.close()

    began = time.perf_counter()
    asyncio.run(build())
    return round(time.perf_counter() - began, 1)


async def actor_latency(
    router: Any, profile: str, size: int, queries: int, embedder: Any
) -> dict[str, Any]:
    from raymem.types import RecallRequest

    rng = random.Random(size)
    picks = [rng.randrange(size) for _ in range(queries)]
    texts = [question(i) for i in picks]
    vectors = await embedder.embed.remote(texts)
    calls = ProfileCalls(router, "default", profile)
    without_model, with_model, hits = [], [], 0
    inside: list[float] = []  # the recall pipeline's own time, inside the actor
    for text, vector in zip(texts[:3], vectors[:3], strict=True):  # activation and index reads
        warm = RecallRequest(query=text, limit=10, synthesize=False)
        await calls.recall(warm, vector)
    for text, vector, index in zip(texts, vectors, picks, strict=True):
        request = RecallRequest(query=text, limit=10, synthesize=False)
        began = time.perf_counter()
        result = await calls.recall(request, vector)
        without_model.append((time.perf_counter() - began) * 1000)
        inside.append(result.latency_ms["total"])
        hits += any(f"SN{index:06d}" in m.content for m in result.memories)
        began = time.perf_counter()
        await calls.recall(request)
        with_model.append((time.perf_counter() - began) * 1000)
    return {
        "actor_no_model_ms": percentiles(without_model),
        "pipeline_in_actor_ms": percentiles(inside),
        "actor_with_embedding_ms": percentiles(with_model),
        "hit_at_10": round(hits / queries, 3),
    }


def http_latency(client: Client, profile: str, size: int, queries: int) -> dict[str, float]:
    rng = random.Random(size + 1)
    target = client.get_profile(profile)
    samples = []
    for _ in range(queries):
        began = time.perf_counter()
        target.recall(question(rng.randrange(size)), limit=10, synthesize=False)
        samples.append((time.perf_counter() - began) * 1000)
    return percentiles(samples)


def wake(settings: Settings, profile: str, repeats: int = 5) -> dict[str, float]:
    """Hibernate the (idle, flushed) profile, then time the first call that wakes it."""
    from raymem.actors.registry import ProfileRouter

    samples = []
    for _ in range(repeats):
        calls = ProfileCalls(ProfileRouter(settings), "default", profile)
        run_blocking(calls.hibernate())
        while run_blocking(calls.process_stats()) is not None:
            time.sleep(0.01)
        began = time.perf_counter()
        run_blocking(calls.info())
        samples.append((time.perf_counter() - began) * 1000)
    return percentiles(samples)


def host_rss_bytes(router: Any, profile: str) -> int:
    """The resident memory of the host process the profile is open in."""
    stats = run_blocking(ProfileCalls(router, "default", profile).process_stats())
    assert stats is not None, f"profile {profile} is not open"
    return stats.rss_bytes


def host_memory(settings: Settings) -> dict[str, Any]:
    """PSS per profile host and per open profile (the hosts' sum over their open profiles)."""
    from raymem.actors.host import hosts_usage

    usages = run_blocking(hosts_usage(settings))
    pss = sum(u.pss_bytes for u in usages)
    open_profiles = sum(len(u.open_profiles) for u in usages)
    return {
        "hosts": len(usages),
        "open_profiles": open_profiles,
        "pss_mb_per_host": [round(u.pss_bytes / 2**20, 1) for u in usages],
        "pss_mb_per_open_profile": round(pss / 2**20 / max(open_profiles, 1), 1),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    import ray
    from ray import serve

    from raymem.actors.pools import EMBEDDER_DEPLOYMENT
    from raymem.actors.profile import profile_path
    from raymem.actors.registry import ProfileRouter
    from raymem.serve import server

    data_dir = Path(args.data_dir or mkdtemp(prefix="raymem-bench-"))
    settings = load_settings(environ={"RAYMEM_DATA_DIR": str(data_dir)})
    settings = msgspec.structs.replace(
        settings, server=msgspec.structs.replace(settings.server, port=free_port())
    )
    server.start(settings)
    url = f"http://127.0.0.1:{settings.server.port}"
    client = Client(url, timeout=600)
    while True:
        try:
            client.health()
            break
        except Exception:
            time.sleep(0.5)
    router = ProfileRouter(settings)
    embedder = serve.get_deployment_handle(EMBEDDER_DEPLOYMENT, app_name=settings.app_name)
    rows: list[dict[str, Any]] = []
    model = embedder.info.remote().result()
    dim = int(model["dim"])
    try:
        ingest = ingest_throughput(client, router, args.ingest, args.batch)
        print(f"ingest through HTTP: {ingest}", flush=True)
        for size in args.sizes:
            profile = f"bench-{size}"
            built = profile_path(settings, "default", profile).exists() and args.reuse
            row: dict[str, Any] = {
                "memories": size,
                "build_s": 0.0
                if built
                else build_profile(settings, profile, size, dim, model["name"]),
            }
            row.update(asyncio.run(actor_latency(router, profile, size, args.queries, embedder)))
            row["http_ms"] = http_latency(client, profile, size, args.queries)
            row["host_rss_mb"] = round(host_rss_bytes(router, profile) / 2**20, 1)
            row["wake_ms"] = wake(settings, profile)
            row["file_mb"] = round(
                sum(f.stat().st_size for f in (data_dir / "default" / profile).iterdir()) / 2**20, 1
            )
            rows.append(row)
            print_row(row)
        run_blocking(ProfileCalls(router, "default", "idle-profile").activate())
        memory = host_memory(settings)
    finally:
        client.close()
        server.stop()
        del ray
    return {
        "rows": rows,
        "host_memory": memory,
        "cpus": os.cpu_count(),
    }


HEADER = (
    f"{'memories':>9} {'build s':>8} {'actor p50/p95/p99 (no model)':>29} "
    f"{'actor+embed p50/p99':>20} {'HTTP p50/p95/p99':>20} {'hit@10':>7} {'wake ms p50':>12} {'host RSS MB':>11} {'file MB':>8}"
)


def print_row(row: dict[str, Any]) -> None:
    if not getattr(print_row, "header_done", False):
        print(HEADER)
        print_row.header_done = True  # type: ignore[attr-defined]
    a, e, h = row["actor_no_model_ms"], row["actor_with_embedding_ms"], row["http_ms"]
    print(
        f"{row['memories']:>9} {row['build_s']:>8} "
        f"{a['p50']:>9}/{a['p95']}/{a['p99']:<9} {e['p50']:>9}/{e['p99']:<10} "
        f"{h['p50']:>7}/{h['p95']}/{h['p99']:<7} {row['hit_at_10']:>7} "
        f"{row['wake_ms']['p50']:>12} {row['host_rss_mb']:>11} {row['file_mb']:>8}",
        flush=True,
    )
    inside = row["pipeline_in_actor_ms"]
    print(
        f"{'':>9} {'':>8} of which the pipeline inside the actor: p50 {inside['p50']} ms,"
        f" p99 {inside['p99']} ms",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", default="1000,10000,100000", type=lambda s: [int(x) for x in s.split(",")]
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument(
        "--ingest", type=int, default=2000, help="turns for the ingest throughput run"
    )
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="measure the profiles already built under --data-dir instead of building them",
    )
    parser.add_argument("--out", default="benchmarks/results/latency.json")
    args = parser.parse_args()
    result = run(args)
    print(f"profile hosts: {result['host_memory']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"saved {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
