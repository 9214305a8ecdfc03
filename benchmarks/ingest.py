"""Ingest throughput and extraction coverage on LoCoMo, with the embedded default generator.

Four measurements, each on fresh real SQLite stores:

1. raw turns stored: ``StoreWriter.insert_messages`` per session (messages/s);
2. the pipeline (``raymem.pipelines.ingest.ingest``) with the real embedder as the
   reconciliation embed function, then what the actor's background vectoriser
   does: the memories still without a vector, then the turns' vectors. Reported
   as memories/s extracted *and* embedded (memory vectors), and end to end with
   the turn vectors too; time split by stage;
3. extraction coverage: the share of LoCoMo QA evidence turns (``qa[].evidence``)
   from which at least one memory was extracted;
4. end to end through the API: a local raymem server (Ray Serve, HTTP), one
   ingest request per session, timed until the profile actors have embedded every
   memory and turn; once with one conversation at a time and once with four
   profiles at once (``--api-concurrency``; ``--skip-api`` leaves this out).

    python benchmarks/ingest.py ../shared/data/locomo10.json [--limit-conversations 10]
        [--threads 2] [--precision auto|float32|bfloat16|int8]
"""

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from locomo import sessions, turn_text  # one reading of the LoCoMo format

RESULTS_DIR = Path(__file__).resolve().parent / "results"


async def _vectorise(store: Any, table: str, embed: Any) -> None:
    """What the actor's background vectoriser does for one table."""
    while pending := await store.reads.pending_vectors(table, limit=256):
        vectors = await embed([text for _, text in pending])
        async with store.write() as writer:
            await writer.set_vectors(
                table, [(seq, vectors[i]) for i, (seq, _) in enumerate(pending)]
            )


async def run(
    path: Path, limit: int, threads: int, precision: str, batch_size: int, backend: str
) -> dict[str, Any]:
    from raymem.models.embedder import make_embedder
    from raymem.pipelines import ingest
    from raymem.store import ProfileStore, message_id
    from raymem.types import MessageIn

    data = json.loads(path.read_text())[:limit]
    timings: dict[str, float] = {}
    embedder = make_embedder(
        threads=threads, precision=precision, batch_size=batch_size, backend=backend
    )
    embedder.embed(["warm up"])

    embedded = {"texts": 0}

    async def embed(texts: list[str]) -> Any:
        start = time.perf_counter()
        try:
            return await asyncio.to_thread(embedder.embed, texts)
        finally:  # the model's share of the stage that called it (reconcile, vectorising)
            embedded["texts"] += len(texts)
            timings["embed (all stages)"] = (
                timings.get("embed (all stages)", 0.0) + time.perf_counter() - start
            )

    workdir = Path(tempfile.mkdtemp(prefix="raymem-ingest-bench-"))
    totals = {
        "messages": 0,
        "memories": 0,
        "raw_s": 0.0,
        "pipeline_s": 0.0,
        "vectorise_s": 0.0,
        "turn_vectors_s": 0.0,
    }
    evidence_total = evidence_covered = 0
    prototypes = ingest.TypePrototypes()  # as a profile actor keeps them
    try:
        for index, sample in enumerate(data):
            conversation = sample["conversation"]
            batches = []
            dia_of: dict[str, str] = {}
            for key, started, turns in sessions(conversation):
                messages = [
                    MessageIn(role="user", content=turn_text(t), created_at=started) for t in turns
                ]
                for turn, message in zip(turns, messages, strict=True):
                    dia_of[turn["dia_id"]] = message_id(key, "user", message.content)
                batches.append((key, messages))
            # 1. raw turns only
            raw = await ProfileStore.open(workdir / f"raw{index}.db", dim=embedder.dim)
            start = time.perf_counter()
            for key, messages in batches:
                async with raw.write() as writer:
                    await writer.insert_messages(ingest.build_messages(key, messages))
            totals["raw_s"] += time.perf_counter() - start
            await raw.close()
            # 2. the pipeline, then the background vectoriser's share
            store = await ProfileStore.open(workdir / f"p{index}.db", dim=embedder.dim)
            start = time.perf_counter()
            for key, messages in batches:
                result = await ingest.ingest(
                    store, key, messages, embed=embed, prototypes=prototypes, timings=timings
                )
                totals["messages"] += result.messages.stored
                totals["memories"] += result.memories.added
            totals["pipeline_s"] += time.perf_counter() - start
            start = time.perf_counter()
            await _vectorise(store, "memory_vectors", embed)
            totals["vectorise_s"] += time.perf_counter() - start
            timings["vectorise_rest"] = totals["vectorise_s"]
            start = time.perf_counter()
            await _vectorise(store, "message_vectors", embed)
            totals["turn_vectors_s"] += time.perf_counter() - start
            timings["turn_vectors"] = totals["turn_vectors_s"]
            # 3. coverage of QA evidence turns
            memories, _ = await store.reads.list_memories(include_superseded=True, limit=1_000_000)
            sourced = {i for m in memories for i in m.source_message_ids}
            for qa in sample["qa"]:
                for dia in qa.get("evidence", []):
                    if dia in dia_of:
                        evidence_total += 1
                        evidence_covered += dia_of[dia] in sourced
            await store.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    work_s = totals["pipeline_s"] + totals["vectorise_s"]
    all_s = work_s + totals["turn_vectors_s"]
    return {
        "conversations": len(data),
        "messages": totals["messages"],
        "memories": totals["memories"],
        "raw_messages_per_s": totals["messages"] / totals["raw_s"],
        "pipeline_messages_per_s": totals["messages"] / work_s,
        "memories_per_s_extracted_and_embedded": totals["memories"] / work_s,
        "messages_per_s_with_turn_vectors": totals["messages"] / all_s,
        "memories_per_s_with_turn_vectors": totals["memories"] / all_s,
        "stage_s": {k: round(v, 3) for k, v in timings.items()},
        "texts_embedded": embedded["texts"],
        "total_s": round(work_s, 3),
        "total_s_with_turn_vectors": round(all_s, 3),
        "embedder": embedder.name,
        "embedder_device": embedder.device,
        "embedder_backend": type(embedder).__name__,
        "evidence_turns": evidence_total,
        "evidence_coverage": evidence_covered / max(1, evidence_total),
        "embedder_threads": threads,
        "cpus": os.cpu_count(),
    }


def through_api(path: Path, limit: int, threads: int, concurrency: int) -> dict[str, Any]:
    """Every conversation into its own profile over HTTP, until all is vectorised.

    Each conversation's sessions go one request at a time, in order; up to
    ``concurrency`` conversations (profiles) are sent at once, as several agents
    would, so the server can overlap one profile's waiting with another's work.
    """
    from concurrent.futures import ThreadPoolExecutor

    from _common import raymem_server, wait_vectorised

    data = json.loads(path.read_text())[:limit]
    request_s: list[float] = []
    stage_ms: dict[str, float] = {}  # the pipeline's own split, summed over requests
    counts = {"messages": 0, "memories": 0}

    def profile_name(sample: dict[str, Any]) -> str:
        return f"locomo-{sample['sample_id']}".replace("_", "-")

    def send(client: Any, sample: dict[str, Any]) -> None:
        profile = client.get_profile(profile_name(sample))
        for key, session_start, turns in sessions(sample["conversation"]):
            batch = [
                {
                    "role": "user",
                    "content": turn_text(turn),
                    "created_at": session_start.isoformat() + "Z",
                }
                for turn in turns
            ]
            sent = time.perf_counter()
            result = profile.ingest(batch, session_id=key)
            request_s.append(time.perf_counter() - sent)
            counts["messages"] += result.messages.stored
            counts["memories"] += result.memories.added
            for stage, ms in result.latency_ms.items():
                stage_ms[stage] = stage_ms.get(stage, 0.0) + ms

    with raymem_server(embedder_threads=threads) as (client, settings):
        client.get_profile("warm-up").remember("The server is warm.")  # models loaded
        started = time.perf_counter()
        with ThreadPoolExecutor(max(1, concurrency)) as pool:
            list(pool.map(lambda sample: send(client, sample), data))
        acknowledged_s = time.perf_counter() - started
        for sample in data:
            wait_vectorised(settings, profile_name(sample))
        vectorised_s = time.perf_counter() - started
    messages, memories = counts["messages"], counts["memories"]
    return {
        "concurrency": concurrency,
        "messages": messages,
        "memories": memories,
        "messages_per_s_acknowledged": messages / acknowledged_s,
        "memories_per_s_acknowledged": memories / acknowledged_s,
        "messages_per_s_vectorised": messages / vectorised_s,
        "memories_per_s_vectorised": memories / vectorised_s,
        "session_request_s_p50": sorted(request_s)[len(request_s) // 2],
        # Request time outside the pipeline: HTTP, the Serve proxy, the ingress, the
        # actor call, and waiting behind other requests.
        "outside_pipeline_s": round(sum(request_s) - stage_ms.get("total", 0.0) / 1000, 3),
        "stage_s": {stage: round(ms / 1000, 3) for stage, ms in stage_ms.items()},
        "acknowledged_s": round(acknowledged_s, 2),
        "vectorised_s": round(vectorised_s, 2),
    }


def print_table(result: dict[str, Any]) -> None:
    rows = [
        ("raw messages stored / s", f"{result['raw_messages_per_s']:,.0f}", ">= 2,000"),
        ("pipeline messages / s", f"{result['pipeline_messages_per_s']:,.0f}", ""),
        (
            "memories extracted+embedded / s",
            f"{result['memories_per_s_extracted_and_embedded']:,.0f}",
            ">= 300",
        ),
        (
            "  with turn vectors too: memories / s",
            f"{result['memories_per_s_with_turn_vectors']:,.0f}",
            "",
        ),
        (
            "  with turn vectors too: messages / s",
            f"{result['messages_per_s_with_turn_vectors']:,.0f}",
            "",
        ),
        ("evidence-turn coverage", f"{result['evidence_coverage']:.1%}", ""),
        ("messages / memories", f"{result['messages']:,} / {result['memories']:,}", ""),
    ]
    print(f"\n{'metric':<34} {'value':>14}  target")
    for name, value, target in rows:
        print(f"{name:<34} {value:>14}  {target}")
    total = result["total_s_with_turn_vectors"]
    print(
        f"\n{result['embedder']} ({result['embedder_backend']}) on {result['embedder_device']},"
        f" {result['embedder_threads']} threads"
    )
    print(f"{'stage':<34} {'seconds':>14}  share of {total:.1f} s with turn vectors")
    for stage, seconds in result["stage_s"].items():
        print(f"{stage:<34} {seconds:>14.2f}  {seconds / total:.0%}")
    print(
        "(embed: the model's share of classify and reconcile; embed (all stages): of"
        " those, vectorise_rest and turn_vectors)"
    )
    for api in result.get("api", []):
        print(
            f"\nthrough the API (HTTP, Serve, profile actors), {api['concurrency']} conversation(s)"
            f" at a time: {api['messages']:,} turns, {api['memories']:,} memories"
        )
        print(
            f"  acknowledged: {api['messages_per_s_acknowledged']:,.0f} turns/s,"
            f" {api['memories_per_s_acknowledged']:,.0f} memories/s"
            f" (one request per session, p50 {api['session_request_s_p50'] * 1000:.0f} ms)"
        )
        print(
            f"  until every memory and turn is embedded: {api['messages_per_s_vectorised']:,.0f}"
            f" turns/s, {api['memories_per_s_vectorised']:,.0f} memories/s"
        )
        requests = api["stage_s"].get("total", 0.0) + api["outside_pipeline_s"]
        print(f"  {'request time by stage':<32} {'seconds':>14}  share of {requests:.1f} s")
        for stage, seconds in api["stage_s"].items():
            if stage != "total":
                print(f"  {stage:<32} {seconds:>14.2f}  {seconds / requests:.0%}")
        outside = api["outside_pipeline_s"]
        print(
            f"  {'HTTP, proxy, ingress, actor call':<32} {outside:>14.2f}  {outside / requests:.0%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("locomo", type=Path, help="path to locomo10.json")
    parser.add_argument("--limit-conversations", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2, help="threads for the embedder")
    parser.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "torch", "onnx"],
        help="embedder backend (models.embedder_backend)",
    )
    parser.add_argument(
        "--precision",
        default="auto",
        choices=["auto", "float32", "bfloat16", "float16", "int8"],
        help="embedder precision (models.embedder_precision)",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="texts per forward pass")
    parser.add_argument("--skip-api", action="store_true", help="leave out the HTTP measurement")
    parser.add_argument(
        "--api-concurrency",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 4],
        help="conversations sent at once through the API, one run each (e.g. 1,4)",
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result = asyncio.run(
        run(
            args.locomo,
            args.limit_conversations,
            args.threads,
            args.precision,
            args.batch_size,
            args.backend,
        )
    )
    if not args.skip_api:
        result["api"] = [
            through_api(args.locomo, args.limit_conversations, args.threads, concurrency)
            for concurrency in args.api_concurrency
        ]
    print_table(result)
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"ingest-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"\nsaved {out}")


if __name__ == "__main__":
    main()
