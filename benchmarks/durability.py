"""Snapshot and restore cost at growing profile sizes; ingest latency by durability mode.

    python benchmarks/durability.py --sizes 10000,100000 --ingests 200

Against moto's S3 server on 127.0.0.1 (a real S3 HTTP API on this machine):

1. For each size, a profile is built directly in its SQLite file (the rules
   pipeline; random unit vectors for every memory and turn), then a snapshot is
   taken (online copy, gzip, upload) and restored into an empty directory
   (download, checksum, unpack); times and sizes are reported.
2. Ingest latency p50/p99 of single-turn ingests through a profile actor, with
   ``shipped`` durability (ledger uploaded in the background) and with
   ``replicated`` (uploaded before the reply).

Prints a table and writes JSON to benchmarks/results/durability.json.
"""

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}.items():
    os.environ.setdefault(name, value)

import boto3  # noqa: E402
import msgspec  # noqa: E402
from latency import build_profile, free_port, percentiles  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

from raymem.config import Settings, load_settings  # noqa: E402
from raymem.export import ObjectStore, restore_latest, take_snapshot  # noqa: E402
from raymem.store import ProfileStore  # noqa: E402
from raymem.types import IngestRequest, MessageIn  # noqa: E402

REGION = "us-east-1"
DIM = 384


def s3_settings(base: Settings, endpoint: str, bucket: str, mode: str) -> Settings:
    store = msgspec.structs.replace(
        base.object_store,
        bucket=bucket,
        endpoint_url=endpoint,
        region=REGION,
        access_key_id="bench",
        secret_access_key="bench",
    )
    durability = msgspec.structs.replace(base.durability, mode=mode)
    return msgspec.structs.replace(base, object_store=store, durability=durability)


def snapshot_round_trip(settings: Settings, size: int) -> dict[str, Any]:
    from raymem.actors.profile import profile_path

    profile = f"snap-{size}"
    build_s = build_profile(settings, profile, size, DIM)
    path = profile_path(settings, "default", profile)
    object_store = ObjectStore.from_settings(settings.object_store)
    assert object_store is not None

    async def run() -> dict[str, Any]:
        store = await ProfileStore.open(path, dim=DIM)
        try:
            began = time.perf_counter()
            manifest = await take_snapshot(store, object_store, "default", profile)
            snapshot_s = time.perf_counter() - began
        finally:
            await store.close()
        with tempfile.TemporaryDirectory() as target:
            began = time.perf_counter()
            await restore_latest(object_store, "default", profile, Path(target) / "profile.db")
            restore_s = time.perf_counter() - began
        packed = sum(
            item.size for item in await object_store.list(object_store.key("default", profile))
        )
        return {
            "memories": size,
            "build_s": build_s,
            "file_mb": round(path.stat().st_size / 2**20, 1),
            "snapshot_mb": round(packed / 2**20, 1),
            "snapshot_s": round(snapshot_s, 2),
            "restore_s": round(restore_s, 2),
            "ledger_seq": manifest.ledger_seq,
        }

    return asyncio.run(run())


def ingest_latency(settings: Settings, mode: str, count: int) -> dict[str, float]:
    from raymem.actors.calls import ProfileCalls, run_blocking
    from raymem.actors.registry import ProfileRouter

    profile = f"lat-{mode}"
    calls = ProfileCalls(ProfileRouter(settings), "default", profile)
    samples = []
    for index in range(count):
        turn = MessageIn(role="user", content=f"Durability probe {index} of mode {mode} was filed.")
        request = IngestRequest(session_id="s1", messages=[turn])
        began = time.perf_counter()
        run_blocking(calls.ingest(request))
        samples.append((time.perf_counter() - began) * 1000)
    return percentiles(samples[5:])  # the first calls include activation


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", default="10000,100000", type=lambda s: [int(x) for x in s.split(",")]
    )
    parser.add_argument("--ingests", type=int, default=200)
    parser.add_argument("--out", default="benchmarks/results/durability.json")
    args = parser.parse_args()

    from raymem.serve import server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's per-request log lines
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    bucket = "raymem-bench"
    boto3.client("s3", endpoint_url=endpoint, region_name=REGION).create_bucket(Bucket=bucket)
    data_dir = tempfile.mkdtemp(prefix="raymem-durability-")
    base = load_settings(environ={"RAYMEM_DATA_DIR": data_dir})
    base = msgspec.structs.replace(
        base, server=msgspec.structs.replace(base.server, port=free_port())
    )
    result: dict[str, Any] = {"snapshots": [], "ingest_ms": {}}
    server.start(s3_settings(base, endpoint, bucket, "shipped"))
    try:
        print(
            f"{'memories':>9} {'file MB':>8} {'snapshot MB':>12} {'snapshot s':>11} {'restore s':>10}"
        )
        for size in args.sizes:
            row = snapshot_round_trip(s3_settings(base, endpoint, bucket, "shipped"), size)
            result["snapshots"].append(row)
            print(
                f"{row['memories']:>9} {row['file_mb']:>8} {row['snapshot_mb']:>12}"
                f" {row['snapshot_s']:>11} {row['restore_s']:>10}",
                flush=True,
            )
        for mode in ("local", "shipped", "replicated"):
            settings = s3_settings(base, endpoint, bucket, mode)
            latency = ingest_latency(settings, mode, args.ingests)
            result["ingest_ms"][mode] = latency
            print(
                f"ingest latency, {mode:>10}: p50 {latency['p50']} ms, p99 {latency['p99']} ms",
                flush=True,
            )
    finally:
        server.stop()
        moto.stop()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"saved {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
