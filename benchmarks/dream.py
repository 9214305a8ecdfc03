"""Dreaming on LoCoMo: memories before -> after, turn recall before -> after, dream time.

Each of the ten conversations goes into a profile of its own with the in-process
machinery of ``recall_dev.py`` (the profile files are built once under
``--work-dir`` and kept); each run dreams on a fresh copy of every profile with
the rules (no model), adopts the dream, and asks every question before and
after. Recall is turn-level, as in ``locomo.py``: a memory hit counts for the
turns it was drawn from, so a merged memory counts for every statement it folds in.

``--longmemeval`` does the same for LongMemEval_S questions (one profile per
question's haystack; ``--per-type N`` takes the first N of each type), asking
each question as of its date.

    python benchmarks/dream.py ../shared/data/locomo10.json
    RAYMEM_DREAMS_MERGE_SIMILARITY=0.85 python benchmarks/dream.py ../shared/data/locomo10.json
    python benchmarks/dream.py ../shared/data/longmemeval_s_dev.json --longmemeval --per-type 2
"""

import argparse
import asyncio
import json
import os
import time
from collections import Counter
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import locomo
import longmemeval
from _common import Tally, hit_turns, save_json, score_ranking, table
from recall_dev import CachedEmbedder, build_profile, longmemeval_sessions

from raymem.config import Settings, load_settings
from raymem.pipelines.dream import Dreams
from raymem.pipelines.recall import Recaller
from raymem.store import ProfileStore, message_id
from raymem.store.dreams import Change, copy_profile, remove_files
from raymem.types import RecallRequest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
METRICS = ("any@10", "frac@10", "ndcg@10")


def conversation(sample: dict[str, Any]) -> tuple[list[Any], dict[str, list[str]], dict[str, str]]:
    """(sessions to ingest, message id -> dia ids, dia id -> text), as recall_dev.py builds them."""
    sessions = []
    turn_of: dict[str, list[str]] = {}
    texts: dict[str, str] = {}
    for key, started, turns in locomo.sessions(sample["conversation"]):
        messages = []
        for index, turn in enumerate(turns):
            content = locomo.turn_text(turn)
            at = (started + timedelta(seconds=index)).replace(tzinfo=UTC)
            messages.append({"role": "user", "content": content, "created_at": at})
            turn_of.setdefault(message_id(key, "user", content), []).append(turn["dia_id"])
            texts[turn["dia_id"]] = content
        sessions.append((key, messages))
    return sessions, turn_of, texts


async def ask(
    store: ProfileStore,
    settings: Settings,
    requests: list[RecallRequest],
    embedder: CachedEmbedder,
    turn_of: dict[str, list[Any]],
) -> list[list[Any]]:
    """The turns each request's recall ranks, in order."""
    recaller = Recaller(store, settings.recall, None)
    vectors = await embedder.embed([request.query for request in requests])
    ranked = []
    for request, vector in zip(requests, vectors, strict=True):
        result = await recaller.recall(request, query_vector=vector)
        ranked.append(hit_turns(result, turn_of))
    return ranked


async def current(store: ProfileStore) -> int:
    return (await store.reads.info("bench")).memories


async def dream_on(
    name: str,
    sessions: list[Any],
    requests: list[RecallRequest],
    turn_of: dict[str, list[Any]],
    args: argparse.Namespace,
    settings: Settings,
    embedder: CachedEmbedder,
) -> dict[str, Any]:
    """Ask, dream, adopt and ask again on a fresh copy of the profile ``name``."""
    base = await build_profile(Path(args.work_dir) / name, sessions, embedder, args.reingest)
    await base.close()
    path = Path(args.work_dir) / "dreams" / name
    copy_profile(Path(args.work_dir) / name, path)
    store = await ProfileStore.open(path, dim=384)
    try:
        before = await ask(store, settings, requests, embedder, turn_of)
        memories_before = await current(store)
        dreams = Dreams(store, settings.dreams, embed=embedder.embed)
        started = time.perf_counter()
        dream = await dreams.wait((await dreams.start()).id)
        dream_s = time.perf_counter() - started
        assert dream.state == "ready", dream.error
        _, changes = await dreams.diff(dream.id)
        started = time.perf_counter()
        _, adopted = await dreams.adopt(dream.id)
        adopt_s = time.perf_counter() - started
        after = await ask(store, settings, requests, embedder, turn_of)
        memories_after = await current(store)
    finally:
        await store.close()
        remove_files(path)
    embedder.save()
    print(
        f"{name}: memories {memories_before} -> {memories_after},"
        f" dream {dream_s:.1f} s, adopt {adopt_s * 1000:.0f} ms, {dict(dream.counts)}",
        flush=True,
    )
    if args.show:
        show(changes, args.show)
    return {
        "sample": name,
        "memories_before": memories_before,
        "memories_after": memories_after,
        "dream_s": dream_s,
        "adopt_s": adopt_s,
        "counts": dream.counts,
        "skipped": len(adopted.skipped),
        "ranked": (before, after),
    }


async def run_sample(
    sample: dict[str, Any], args: argparse.Namespace, settings: Settings, embedder: CachedEmbedder
) -> dict[str, Any]:
    """One LoCoMo conversation: every question with evidence, before and after."""
    sessions, turn_of, texts = conversation(sample)
    questions = [qa for qa in sample["qa"] if locomo.evidence(qa, texts)]
    requests = [
        RecallRequest(query=qa["question"], limit=args.recall_limit, synthesize=False)
        for qa in questions
    ]
    name = f"locomo-{sample['sample_id']}.db"
    run = await dream_on(name, sessions, requests, turn_of, args, settings, embedder)
    before, after = run.pop("ranked")
    run["scores"] = [
        {
            "category": str(qa["category"]),
            "before": score_ranking(ranked_before, locomo.evidence(qa, texts)),
            "after": score_ranking(ranked_after, locomo.evidence(qa, texts)),
        }
        for qa, ranked_before, ranked_after in zip(questions, before, after, strict=True)
    ]
    return run


async def run_question(
    item: dict[str, Any], args: argparse.Namespace, settings: Settings, embedder: CachedEmbedder
) -> dict[str, Any]:
    """One LongMemEval question over its own haystack, before and after."""
    sessions, turn_of = longmemeval_sessions(item, settings.limits.max_content_chars)
    request = RecallRequest(
        query=item["question"],
        limit=args.recall_limit,
        synthesize=False,
        as_of=longmemeval.question_time(item),
    )
    name = f"lme-{item['question_id']}.db"
    run = await dream_on(name, sessions, [request], turn_of, args, settings, embedder)
    (before,), (after,) = run.pop("ranked")
    relevant = longmemeval.evidence_turns(item)
    run["scores"] = [
        {
            "category": item["question_type"],
            "before": score_ranking(before, relevant),
            "after": score_ranking(after, relevant),
        }
    ]
    return run


def show(changes: list[Change], per_action: int) -> None:
    """A few changes of each action, to read what the rules did."""
    shown: Counter[str] = Counter()
    for change in changes:
        if shown[change.action] >= per_action:
            continue
        shown[change.action] += 1
        print(f"  {change.action}: {change.reason}\n    -> {change.content}")


def report(
    runs: list[dict[str, Any]],
    args: argparse.Namespace,
    settings: Settings,
    categories: dict[str, str],
    overall: list[str],
) -> None:
    """The recall table before and after, per category (code -> label) and ``overall``."""
    tallies = {"before": Tally(), "after": Tally()}
    for run in runs:
        for score in run["scores"]:
            for moment in tallies:
                tallies[moment].add(score["category"], score[moment])
    rows = []
    for code, label in categories.items():
        for moment, tally in tallies.items():
            rows.append((f"{label} ({moment})", tally.mean([code])))
    for moment, tally in tallies.items():
        rows.append((f"overall ({moment})", tally.mean(overall)))
    dataset = "LongMemEval_S" if args.longmemeval else "LoCoMo"
    print(table(f"{dataset} turn-level recall before and after a dream (in-process)", rows))
    before = sum(run["memories_before"] for run in runs)
    after = sum(run["memories_after"] for run in runs)
    dream_s = sum(run["dream_s"] for run in runs)
    summary = {
        "memories_before": before,
        "memories_after": after,
        "fewer_memories": round(1 - after / before, 4),
        "dream_s_per_1k_memories": round(dream_s / before * 1000, 3),
        "adopt_ms_per_1k_memories": round(sum(r["adopt_s"] for r in runs) / before * 1e6, 1),
        "changes": dict(sum((Counter(run["counts"]) for run in runs), Counter())),
        "overall_before": tallies["before"].mean(overall),
        "overall_after": tallies["after"].mean(overall),
    }
    print(
        f"memories {before} -> {after} ({summary['fewer_memories']:.1%} fewer);"
        f" turn any@10 {summary['overall_before']['any@10']:.3f} ->"
        f" {summary['overall_after']['any@10']:.3f};"
        f" dream {summary['dream_s_per_1k_memories']:.2f} s per 1K memories"
    )
    payload = {
        "args": vars(args),
        "dream_settings": settings.dreams,
        "summary": summary,
        "runs": [{k: v for k, v in run.items() if k != "scores"} for run in runs],
        "by_category": {
            moment: {label: tally.mean([code]) for code, label in categories.items()}
            for moment, tally in tallies.items()
        },
    }
    print("saved", save_json("dream-longmemeval" if args.longmemeval else "dream", payload))


async def main_async(args: argparse.Namespace) -> None:
    data = json.loads(Path(args.data).read_text())
    environ = {
        k: v for k, v in os.environ.items() if k.startswith(("RAYMEM_RECALL_", "RAYMEM_DREAMS_"))
    }
    settings = load_settings(environ=environ)
    embedder = CachedEmbedder(Path(args.work_dir) / "embeddings.pkl", args.embedder_threads)
    if args.longmemeval:
        questions = [item for item in data if not item["question_id"].endswith("_abs")]
        if args.per_type:
            questions = longmemeval.per_type(questions, args.per_type)
        questions = questions[: args.limit or None]
        runs = [await run_question(item, args, settings, embedder) for item in questions]
        kinds = sorted({item["question_type"] for item in questions})
        report(runs, args, settings, {kind: kind for kind in kinds}, kinds)
    else:
        samples = data[: args.limit or None]
        runs = [await run_sample(sample, args, settings, embedder) for sample in samples]
        categories = {code: f"{code} {label}" for code, label in locomo.CATEGORIES.items()}
        report(runs, args, settings, categories, list(locomo.OVERALL))
    embedder.save()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", help="path to locomo10.json (or longmemeval_s_dev.json)")
    parser.add_argument("--longmemeval", action="store_true", help="the data is LongMemEval_S")
    parser.add_argument("--per-type", type=int, default=0, help="LongMemEval: N of each type")
    parser.add_argument("--work-dir", default="/tmp/raymem-recall-dev")
    parser.add_argument("--reingest", action="store_true", help="rebuild the profile files")
    parser.add_argument("--limit", type=int, default=0, help="conversations or questions (0: all)")
    parser.add_argument("--recall-limit", type=int, default=20)
    parser.add_argument("--embedder-threads", type=int, default=1)
    parser.add_argument("--show", type=int, default=0, help="print this many changes per action")
    args = parser.parse_args()
    Path(args.work_dir).mkdir(parents=True, exist_ok=True)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
