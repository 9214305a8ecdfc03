"""Fast in-process retrieval evaluation: the ingest and recall pipelines without Ray or HTTP.

For comparing recall variants back to back on a small machine. Each LoCoMo
conversation (or LongMemEval question) is ingested once into a SQLite file under
``--work-dir`` (kept between runs; ``--reingest`` rebuilds them after a change to
extraction), every text is embedded once and cached on disk by its content, and
recall runs in-process with the cached query vector. The metrics are those of
``locomo.py`` and ``longmemeval.py``; the published numbers come from those
scripts, which go through the HTTP API.

    python benchmarks/recall_dev.py locomo ../shared/data/locomo10.json
    python benchmarks/recall_dev.py longmemeval ../shared/data/longmemeval_s_dev.json --per-type 3
    RAYMEM_RECALL_MESSAGE_FTS_WEIGHT=0.8 python benchmarks/recall_dev.py locomo ...
"""

import argparse
import asyncio
import hashlib
import json
import os
import pickle
import time
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from _common import NEWEST_FIRST, Tally, hit_turns, percentiles, score_ranking, table

from raymem.config import load_settings
from raymem.pipelines import ingest as ingest_pipeline
from raymem.pipelines.recall import Recaller
from raymem.store import ProfileStore, message_id
from raymem.types import MessageIn, RecallRequest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


class CachedEmbedder:
    """The real embedding model behind a content-keyed cache on disk."""

    def __init__(self, path: Path, threads: int) -> None:
        self.path = path
        self.threads = threads
        self._model: Any = None
        self.cache: dict[str, np.ndarray] = {}
        if path.exists():
            self.cache = pickle.loads(path.read_bytes())
        self._dirty = False

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if self.key(t) not in self.cache))
        if missing:
            if self._model is None:
                from raymem.models.embedder import SentenceTransformerEmbedder

                self._model = SentenceTransformerEmbedder(threads=self.threads)
            vectors = self._model.embed(missing)
            for text, vector in zip(missing, vectors, strict=True):
                self.cache[self.key(text)] = vector
            self._dirty = True
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        return np.stack([self.cache[self.key(t)] for t in texts])

    async def embed(self, texts: list[str]) -> np.ndarray:
        return self.embed_sync(texts)

    def save(self) -> None:
        if self._dirty:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps(self.cache))
            tmp.replace(self.path)
            self._dirty = False


async def vectorise(store: ProfileStore, embedder: CachedEmbedder) -> None:
    for table_name in ("memory_vectors", "message_vectors"):
        while pending := await store.reads.pending_vectors(table_name, limit=2048):
            vectors = await embedder.embed([text for _, text in pending])
            async with store.write() as writer:
                await writer.set_vectors(
                    table_name, [(seq, vectors[i]) for i, (seq, _) in enumerate(pending)]
                )


async def build_profile(
    path: Path,
    sessions: list[tuple[str, list[dict[str, Any]]]],
    embedder: CachedEmbedder,
    reingest: bool,
) -> ProfileStore:
    """A profile file holding ``sessions`` [(session id, [message dicts])], built once."""
    if reingest and path.exists():
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    fresh = not path.exists()
    store = await ProfileStore.open(path, dim=384)
    if fresh:
        prototypes = ingest_pipeline.TypePrototypes()
        for session_id, messages in sessions:
            await ingest_pipeline.ingest(
                store,
                session_id,
                [MessageIn(**m) for m in messages],
                embed=embedder.embed,
                prototypes=prototypes,
            )
            await vectorise(store, embedder)
    return store


# ------------------------------------------------------------------ LoCoMo


async def run_locomo(args: argparse.Namespace, settings: Any, embedder: CachedEmbedder) -> None:
    import locomo

    data = json.loads(Path(args.data).read_text())[: args.limit or None]
    tally = {"turn": Tally(), "session": Tally()}
    latency: list[float] = []
    for sample in data:
        sessions = []
        turn_of: dict[str, list[str]] = {}
        texts: dict[str, str] = {}
        conversation = locomo.sessions(sample["conversation"])
        asked_at = locomo.asked_at(conversation)
        for key, started, turns in conversation:
            messages = []
            for index, turn in enumerate(turns):
                content = locomo.turn_text(turn)
                at = (started + timedelta(seconds=index)).replace(tzinfo=UTC)
                messages.append({"role": "user", "content": content, "created_at": at})
                turn_of.setdefault(message_id(key, "user", content), []).append(turn["dia_id"])
                texts[turn["dia_id"]] = content
            sessions.append((key, messages))
        path = Path(args.work_dir) / f"locomo-{sample['sample_id']}.db"
        store = await build_profile(path, sessions, embedder, args.reingest)
        recaller = Recaller(store, settings.recall, None)
        questions = [qa for qa in sample["qa"] if locomo.evidence(qa, texts)]
        vectors = await embedder.embed([qa["question"] for qa in questions])
        for qa, vector in zip(questions, vectors, strict=True):
            relevant = locomo.evidence(qa, texts)
            category = str(qa["category"])
            request = RecallRequest(
                query=qa["question"], limit=args.recall_limit, synthesize=False, as_of=asked_at
            )
            started_at = time.perf_counter()
            result = await recaller.recall(request, query_vector=vector)
            latency.append((time.perf_counter() - started_at) * 1000)
            turns = hit_turns(result, turn_of)
            tally["turn"].add(category, score_ranking(turns, relevant))
            ranked_sessions = list(dict.fromkeys(locomo.session_of(t) for t in turns))
            tally["session"].add(
                category,
                score_ranking(ranked_sessions, {locomo.session_of(t) for t in relevant}),
            )
        await store.close()
        embedder.save()
    for level in ("turn", "session"):
        rows = [
            (f"{code} {label}", tally[level].mean([code]))
            for code, label in locomo.CATEGORIES.items()
        ]
        rows.append(("overall (1-4)", tally[level].mean(locomo.OVERALL)))
        print(table(f"LoCoMo {level}-level (in-process)", rows))
    print("recall latency without query embedding (ms):", percentiles(latency))
    save(args, tally, latency, categories=list(locomo.CATEGORIES))


# ------------------------------------------------------------- LongMemEval


def longmemeval_sessions(
    item: dict[str, Any], max_chars: int
) -> tuple[list[tuple[str, list[dict[str, Any]]]], dict[str, list[tuple[str, int]]]]:
    """A LongMemEval question's haystack as sessions to ingest, and message id -> turns."""
    import longmemeval

    sessions = []
    turn_of: dict[str, list[tuple[str, int]]] = {}
    for session_id, date, turns in zip(
        item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"], strict=True
    ):
        started = longmemeval.haystack_time(date).replace(tzinfo=UTC)
        messages = []
        for index, turn in enumerate(turns):
            content = turn["content"][:max_chars].strip()
            if not content:
                continue
            at = started + timedelta(seconds=index)
            messages.append({"role": turn["role"], "content": content, "created_at": at})
            turn_of.setdefault(message_id(session_id, turn["role"], content), []).append(
                (session_id, index)
            )
        if messages:
            sessions.append((session_id, messages))
    return sessions, turn_of


async def run_longmemeval(
    args: argparse.Namespace, settings: Any, embedder: CachedEmbedder
) -> None:
    import longmemeval

    data = [
        item
        for item in json.loads(Path(args.data).read_text())
        if not item["question_id"].endswith("_abs")
    ]
    if args.per_type:
        data = longmemeval.per_type(data, args.per_type)
    tally = {"turn": Tally(), "session": Tally(), "update": Tally()}
    latency: list[float] = []
    for number, item in enumerate(data):
        sessions, turn_of = longmemeval_sessions(item, settings.limits.max_content_chars)
        path = Path(args.work_dir) / f"lme-{item['question_id']}.db"
        started_build = time.perf_counter()
        store = await build_profile(path, sessions, embedder, args.reingest)
        built_s = time.perf_counter() - started_build
        recaller = Recaller(store, settings.recall, None)
        vector = (await embedder.embed([item["question"]]))[0]
        request = RecallRequest(
            query=item["question"],
            limit=args.recall_limit,
            synthesize=False,
            as_of=longmemeval.question_time(item),
        )
        started_at = time.perf_counter()
        result = await recaller.recall(request, query_vector=vector)
        latency.append((time.perf_counter() - started_at) * 1000)
        await store.close()
        embedder.save()
        turns = hit_turns(result, turn_of)
        kind = item["question_type"]
        relevant_turns = longmemeval.evidence_turns(item)
        if relevant_turns:
            tally["turn"].add(kind, score_ranking(turns, relevant_turns))
        ranked_sessions = list(dict.fromkeys(s for s, _ in turns))
        tally["session"].add(kind, score_ranking(ranked_sessions, set(item["answer_session_ids"])))
        newest = longmemeval.newest_answer_first(item, ranked_sessions)
        if newest is not None:
            tally["update"].add(kind, {"newest_first": float(newest)})
        if args.verbose:
            print(f"[{number}] {item['question_id']} {kind} built in {built_s:.1f} s", flush=True)
    kinds = sorted({item["question_type"] for item in data})
    for level in ("session", "turn"):
        rows = [(kind, tally[level].mean([kind])) for kind in kinds]
        rows.append(("overall", tally[level].mean(kinds)))
        print(table(f"LongMemEval_S {level}-level (in-process, {len(data)} questions)", rows))
    updates = [kind for kind in kinds if tally["update"].rows.get(kind)]
    if updates:
        rows = [(kind, tally["update"].mean([kind])) for kind in updates]
        print(
            table(
                "LongMemEval_S: the newest answer session ranks above the older ones",
                rows,
                NEWEST_FIRST,
            )
        )
    print("recall latency without query embedding (ms):", percentiles(latency))
    save(args, tally, latency, categories=kinds)


def save(
    args: argparse.Namespace, tally: dict[str, Tally], latency: list[float], **extra: Any
) -> None:
    if not args.save:
        return
    payload = {
        "args": vars(args),
        "rows": {level: t.rows for level, t in tally.items()},
        "latency_ms": percentiles(latency),
        **extra,
    }
    Path(args.save).write_text(json.dumps(payload))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("benchmark", choices=("locomo", "longmemeval"))
    parser.add_argument("data")
    parser.add_argument("--work-dir", default="/tmp/raymem-recall-dev")
    parser.add_argument("--reingest", action="store_true", help="rebuild the profile files")
    parser.add_argument("--limit", type=int, default=0, help="LoCoMo: conversations")
    parser.add_argument("--per-type", type=int, default=0, help="LongMemEval: questions per type")
    parser.add_argument("--recall-limit", type=int, default=20)
    parser.add_argument("--embedder-threads", type=int, default=1)
    parser.add_argument("--save", default="", help="write per-question scores to this JSON file")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    Path(args.work_dir).mkdir(parents=True, exist_ok=True)
    recall_env = {k: v for k, v in os.environ.items() if k.startswith("RAYMEM_RECALL_")}
    settings = load_settings(environ=recall_env)
    embedder = CachedEmbedder(Path(args.work_dir) / "embeddings.pkl", args.embedder_threads)
    runner = run_locomo if args.benchmark == "locomo" else run_longmemeval
    asyncio.run(runner(args, settings, embedder))
    embedder.save()


if __name__ == "__main__":
    main()
