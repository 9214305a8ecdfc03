"""Context assembly: latency at growing profile sizes, and evidence in context on LongMemEval.

    python benchmarks/context.py latency --sizes 1000,10000,100000 --queries 200
    python benchmarks/context.py longmemeval ../shared/data/longmemeval_s_dev.json --per-type 3
    RAYMEM_CONTEXT_WORKING_MEMORY_SHARE=0 python benchmarks/context.py longmemeval ...

``latency``: one profile per size, built once under ``--work-dir`` (the rules
pipeline without the embedder, random unit vectors for every memory, turn and
episode, as ``latency.py`` does: latency does not depend on what the vectors
mean), with full core blocks, open work items, closed ones' episodes and a live
session. Context assembly then runs in-process with a precomputed query vector
(no model stages), at the default budget (8,000 characters) and at 2,000, with
one ``SlowSections`` as the profile actor keeps it. Wall time and this process's
CPU time are both reported: on a shared machine the first mostly measures the load.

``longmemeval``: each question's haystack is ingested in-process with the real
embedder (cached on disk, as ``recall_dev.py`` does), then the question is asked
twice within a 2,000-character budget: as context assembly, and as recall's top
hits taken in rank order while they fit (``- content`` lines, the same number of
candidates). The score is the share of questions whose evidence turn, or a
memory drawn from it, is inside the budget.

Prints a table and writes JSON under benchmarks/results/.
"""

import argparse
import asyncio
import json
import os
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from _common import percentiles, save_json
from latency import fact, question  # the synthetic facts and questions of the recall benchmark

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from raymem.config import ContextSettings, Settings, load_settings
from raymem.pipelines.context import episodes
from raymem.pipelines.context.assemble import SlowSections, assemble, block_limits
from raymem.pipelines.ingest import ingest
from raymem.pipelines.recall import Recaller
from raymem.store import ProfileStore, blocks, work
from raymem.store.reads import PENDING_TABLES
from raymem.store.refs import parse_ref
from raymem.types import MessageIn, RecallRequest
from raymem.types_context import ContextRequest, WorkItemOpen, WorkItemUpdate

DIM = 384
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
BUDGETS = (8_000, 2_000)
EPISODES = 200  # closed work items, each with its episode, in every latency profile
OPEN_ITEMS = 5
LIVE_TURNS = 50  # turns of the session the context is assembled for

# --------------------------------------------------------------- latency


async def random_vectors(store: ProfileStore, rng: np.random.Generator) -> None:
    """Give every row without a vector a random unit vector."""
    for table in PENDING_TABLES:
        while True:
            pending = await store.reads.pending_vectors(table, limit=5000)
            if not pending:
                break
            vectors = rng.standard_normal((len(pending), DIM)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            async with store.write() as writer:
                await writer.set_vectors(
                    table, [(s, vectors[i]) for i, (s, _) in enumerate(pending)]
                )


async def fill_context(store: ProfileStore, settings: ContextSettings) -> None:
    """Core blocks near their limits, open work items, closed ones' episodes, a live session."""
    limits = block_limits(settings)
    async with store.write() as writer:
        for block, limit in limits.items():
            for number in range(limit // 120):
                entry = f"{block} note {number}: {fact(number)}"[:110]
                await blocks.add_entry(writer, block, entry, defaults=limits, now=NOW)
        for number in range(OPEN_ITEMS + EPISODES):
            item = WorkItemOpen(
                objective=f"Work item {number}: ship feature {number} of the billing service",
                session_id="live" if number < OPEN_ITEMS else f"done-{number}",
                delivery_target=f"PR #{number} by Friday",
                todos=[f"step {step} of feature {number}" for step in range(4)],
            )
            await work.open_item(writer, item, item_id=f"w{number}", now=NOW)
            await work.update_item(
                writer,
                f"w{number}",
                WorkItemUpdate(check_todos=[f"step 0 of feature {number}"]),
                now=NOW,
            )
    for number in range(OPEN_ITEMS, OPEN_ITEMS + EPISODES):
        await episodes.close_work_item(
            store, f"w{number}", f"Merged in commit {number:07x}a", settings=settings, now=NOW
        )
    turns = [
        MessageIn(role="user" if i % 2 == 0 else "assistant", content=fact(10_000_000 + i))
        for i in range(LIVE_TURNS)
    ]
    await ingest(store, "live", turns)


async def build_latency_profile(path: Path, size: int, settings: ContextSettings) -> float:
    """``size`` facts, their turns and the context above, with random vectors; built once."""
    if path.exists():
        return 0.0
    began = time.perf_counter()
    partial = path.with_suffix(".building")
    store = await ProfileStore.open(partial, dim=DIM)
    try:
        for first in range(0, size, 1000):
            turns = [
                MessageIn(role="user", content=fact(i))
                for i in range(first, min(size, first + 1000))
            ]
            await ingest(store, f"s{first // 10_000}", turns)
        await fill_context(store, settings)
        await random_vectors(store, np.random.default_rng(size))
    finally:
        await store.close()
    for suffix in ("-wal", "-shm"):
        Path(str(partial) + suffix).unlink(missing_ok=True)
    partial.rename(path)
    return round(time.perf_counter() - began, 1)


async def measure_latency(
    path: Path, size: int, queries: int, settings: Settings
) -> dict[str, Any]:
    store = await ProfileStore.open(path, dim=DIM)
    try:
        await store.warm_vector_indexes()
        recaller = Recaller(store, settings.recall, None)
        rng = random.Random(size)
        vectors = np.random.default_rng(size + 1).standard_normal((queries, DIM)).astype(np.float32)
        row: dict[str, Any] = {"memories": (await store.reads.info("x")).memories}
        questions = [question(rng.randrange(size)) for _ in range(queries)]
        alone: list[float] = []  # recall by itself, the same questions: what the host gives
        for text, vector in zip(questions, vectors, strict=True):
            limit = settings.context.memories + settings.context.episodes  # as assembly asks
            recall = RecallRequest(query=text, limit=limit, synthesize=False)
            began = time.perf_counter()
            await recaller.recall(recall, query_vector=vector)
            alone.append((time.perf_counter() - began) * 1000)
        row["recall_alone_ms"] = percentiles(alone)
        slow = SlowSections()  # as the profile actor keeps it: nothing is written meanwhile
        for budget in BUDGETS:
            totals: list[float] = []
            cpu: list[float] = []  # this process's CPU time: what a loaded machine does not inflate
            stages: dict[str, list[float]] = {}
            chars: list[int] = []
            for number in range(-3, queries):  # three to warm up
                request = ContextRequest(
                    query=questions[number], session_id="live", budget_chars=budget
                )
                began, began_cpu = time.perf_counter(), time.process_time()
                result = await assemble(
                    store,
                    recaller,
                    request,
                    settings.context,
                    query_vector=vectors[number],
                    slow=slow,
                )
                elapsed = (time.perf_counter() - began) * 1000
                spent = (time.process_time() - began_cpu) * 1000
                assert len(result.text) <= budget
                if number < 0:
                    continue
                totals.append(elapsed)
                cpu.append(spent)
                chars.append(len(result.text))
                for stage, ms in result.latency_ms.items():
                    stages.setdefault(stage, []).append(ms)
            row[f"budget_{budget}"] = {
                "total_ms": percentiles(totals),
                "cpu_ms": percentiles(cpu),
                "stage_ms": {stage: percentiles(ms)["p50"] for stage, ms in stages.items()},
                "chars_p50": sorted(chars)[len(chars) // 2],
            }
        return row
    finally:
        await store.close()


def run_latency(args: argparse.Namespace) -> None:
    settings = load_settings(environ={})
    work_dir = Path(args.work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    print(
        f"{'memories':>9} {'build s':>8} {'budget':>7} {'p50 ms':>7} {'p99 ms':>7}"
        f" {'cpu p50':>7} {'recall p50/p99':>21}  p50 per section (ms)"
    )
    for size in args.sizes:
        path = work_dir / f"context-latency-{size}.db"
        built = asyncio.run(build_latency_profile(path, size, settings.context))
        row = asyncio.run(measure_latency(path, size, args.queries, settings))
        row["build_s"] = built
        rows.append(row)
        for budget in BUDGETS:
            cell = row[f"budget_{budget}"]
            stages = ", ".join(f"{k} {v}" for k, v in cell["stage_ms"].items() if k != "total")
            alone = row["recall_alone_ms"]
            print(
                f"{row['memories']:>9} {built:>8} {budget:>7} {cell['total_ms']['p50']:>7}"
                f" {cell['total_ms']['p99']:>7} {cell['cpu_ms']['p50']:>7}"
                f" {alone['p50']:>13}/{alone['p99']:<7}  {stages}",
                flush=True,
            )
    print("saved", save_json("context-latency", {"args": vars(args), "rows": rows}))


# ----------------------------------------------------------- LongMemEval


def evidence_inside(
    turns_shown: set[str],
    memories_shown: list[str],
    store_memories: dict[str, list[str]],
    evidence: set[str],
) -> bool:
    """Whether an evidence turn is shown, itself or as a memory drawn from it."""
    sources = {source for memory in memories_shown for source in store_memories.get(memory, [])}
    return bool(evidence & (turns_shown | sources))


def recall_within(hits: list[Any], budget: int) -> list[Any]:
    """Recall's hits in rank order while their ``- content`` lines fit the budget."""
    kept, used = [], 0
    for hit in hits:
        line = len(f"- {' '.join(hit.content.split())}\n")
        if used + line <= budget:
            kept.append(hit)
            used += line
    return kept


async def run_question(
    item: dict[str, Any], args: argparse.Namespace, settings: Settings, embedder: Any
) -> dict[str, Any]:
    import longmemeval
    from recall_dev import build_profile

    from raymem.store import message_id

    sessions = []
    evidence: set[str] = set()
    for session_id, date, turns in zip(
        item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"], strict=True
    ):
        started = longmemeval.haystack_time(date).replace(tzinfo=UTC)
        messages = []
        for index, turn in enumerate(turns):
            content = turn["content"][: settings.limits.max_content_chars].strip()
            if not content:
                continue
            at = started + timedelta(seconds=index)
            messages.append({"role": turn["role"], "content": content, "created_at": at})
            if turn.get("has_answer"):
                evidence.add(message_id(session_id, turn["role"], content))
        if messages:
            sessions.append((session_id, messages))
    path = Path(args.work_dir) / f"lme-{item['question_id']}.db"
    store = await build_profile(path, sessions, embedder, False)
    try:
        recaller = Recaller(store, settings.recall, None)
        vector = (await embedder.embed([item["question"]]))[0]
        request = ContextRequest(query=item["question"], budget_chars=args.budget)
        result = await assemble(store, recaller, request, settings.context, query_vector=vector)
        items = [i for s in result.sections for i in s.items]
        turns_shown = {parse_ref(i.source_ref).id for i in items if i.kind == "message"}
        memory_ids = [parse_ref(i.source_ref).id for i in items if i.kind == "memory"]
        recalled = await recaller.recall(
            RecallRequest(
                query=item["question"],
                limit=settings.context.memories + settings.context.episodes,  # as assembly asks
                synthesize=False,
            ),
            query_vector=vector,
        )
        top = recall_within(recalled.memories, args.budget)
        top_turns = {hit.id for hit in top if hit.type == "message"}
        top_memories = [hit.id for hit in top if hit.type not in ("message", "episode")]
        sources = {
            m.id: m.source_message_ids
            for m in await store.reads.memories_by_id(list({*memory_ids, *top_memories}))
        }
        embedder.save()
        return {
            "type": item["question_type"],
            "has_evidence": bool(evidence),
            "context": evidence_inside(turns_shown, memory_ids, sources, evidence),
            "recall_top": evidence_inside(top_turns, top_memories, sources, evidence),
            "context_items": len(items),
            "recall_items": len(top),
            "context_ms": result.latency_ms["total"],
        }
    finally:
        await store.close()


def run_longmemeval(args: argparse.Namespace) -> None:
    import longmemeval
    from recall_dev import CachedEmbedder

    # RAYMEM_CONTEXT_* and RAYMEM_RECALL_* variables try other settings.
    tried = ("RAYMEM_CONTEXT_", "RAYMEM_RECALL_")
    settings = load_settings(environ={k: v for k, v in os.environ.items() if k.startswith(tried)})
    Path(args.work_dir).mkdir(parents=True, exist_ok=True)
    embedder = CachedEmbedder(Path(args.work_dir) / "embeddings.pkl", args.embedder_threads)
    data = [
        i for i in json.loads(Path(args.data).read_text()) if not i["question_id"].endswith("_abs")
    ]
    if args.per_type:
        data = longmemeval.per_type(data, args.per_type)
    rows = []
    for number, item in enumerate(data):
        row = asyncio.run(run_question(item, args, settings, embedder))
        rows.append(row)
        print(
            f"[{number}] {item['question_id']} {row['type']}: context {row['context']}, recall {row['recall_top']}",
            flush=True,
        )
    scored = [row for row in rows if row["has_evidence"]]
    kinds = sorted({row["type"] for row in scored})
    print(
        f"\nEvidence inside {args.budget:,} characters (share of questions with an evidence turn)"
    )
    print(f"{'question type':32} {'n':>4} {'context':>8} {'recall top hits':>16}")
    summary: dict[str, Any] = {}
    for kind in [*kinds, "overall"]:
        group = [r for r in scored if kind in (r["type"], "overall")]
        shares = {
            "n": len(group),
            "context": round(sum(r["context"] for r in group) / len(group), 3),
            "recall_top": round(sum(r["recall_top"] for r in group) / len(group), 3),
        }
        summary[kind] = shares
        print(f"{kind:32} {shares['n']:>4} {shares['context']:>8} {shares['recall_top']:>16}")
    latency = percentiles([r["context_ms"] for r in rows])
    print("context assembly in-process (ms):", latency)
    print(
        "saved",
        save_json(
            "context-longmemeval",
            {"args": vars(args), "summary": summary, "rows": rows, "latency_ms": latency},
        ),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    latency = commands.add_parser("latency", help="assembly latency at growing profile sizes")
    latency.add_argument(
        "--sizes", default="1000,10000,100000", type=lambda s: [int(x) for x in s.split(",")]
    )
    latency.add_argument("--queries", type=int, default=200)
    latency.add_argument("--work-dir", default="/tmp/raymem-context-bench")
    lme = commands.add_parser("longmemeval", help="evidence inside a budget, context vs recall")
    lme.add_argument("data", help="path to longmemeval_s_dev.json")
    lme.add_argument("--per-type", type=int, default=3, help="the first N questions of each type")
    lme.add_argument("--budget", type=int, default=2_000)
    lme.add_argument("--embedder-threads", type=int, default=1)
    lme.add_argument("--work-dir", default="/tmp/raymem-context-bench")
    args = parser.parse_args()
    run_latency(args) if args.command == "latency" else run_longmemeval(args)


if __name__ == "__main__":
    main()
