"""LongMemEval_S retrieval benchmark: does recall surface the evidence sessions and turns?

Each question's haystack (about 48 sessions) goes into its own profile through
the HTTP API, one ingest per session with its ``haystack_dates`` time; the
question is asked through recall, hits map to turns (a message hit is its turn,
a memory maps through ``source_message_ids``), and the profile is deleted.
Abstention questions (``_abs``) are skipped, as in the paper. A plain
FTS5/BM25 index over the same turns is scored in the same run.

    python benchmarks/longmemeval.py ../shared/data/longmemeval_s_dev.json [--per-type 3]
"""

import argparse
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import (
    NEWEST_FIRST,
    Bm25Baseline,
    Tally,
    hit_turns,
    percentiles,
    raymem_server,
    save_json,
    score_ranking,
    table,
    wait_vectorised,
)

from raymem import Client
from raymem.config import Settings
from raymem.store import message_id

Turn = tuple[str, int]  # (session id, turn index)


def question_time(item: dict[str, Any]) -> datetime:
    """When the question is asked: "now" for its relative dates ("last Saturday")."""
    return haystack_time(item["question_date"]).replace(tzinfo=UTC)


def newest_answer_first(item: dict[str, Any], ranked_sessions: list[str]) -> bool | None:
    """For a question whose answer was stated in several sessions (knowledge updates):
    whether the newest of them ranks above the older ones. None when not applicable."""
    answers = set(item["answer_session_ids"])
    if len(answers) < 2:
        return None
    dated = dict(zip(item["haystack_session_ids"], item["haystack_dates"], strict=True))
    newest = max(answers, key=lambda session: haystack_time(dated[session]))
    first = next((session for session in ranked_sessions if session in answers), None)
    return first == newest


def haystack_time(text: str) -> datetime:
    """LongMemEval's "2023/03/27 (Mon) 00:49" as a datetime."""
    return datetime.strptime(text.strip(), "%Y/%m/%d (%a) %H:%M")


def ingest_haystack(
    client: Client, profile: str, item: dict[str, Any], max_chars: int
) -> tuple[dict[str, list[Turn]], dict[Turn, str]]:
    """Send every session; returns message id -> turns, and turn -> text (for the baseline)."""
    turn_of: dict[str, list[Turn]] = {}
    texts: dict[Turn, str] = {}
    handle = client.get_profile(profile)
    for session_id, date, turns in zip(
        item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"], strict=True
    ):
        started = haystack_time(date)
        messages = []
        for index, turn in enumerate(turns):
            content = turn["content"][:max_chars].strip()
            if not content:
                continue
            created = (started + timedelta(seconds=index)).isoformat() + "Z"
            messages.append({"role": turn["role"], "content": content, "created_at": created})
            turn_of.setdefault(message_id(session_id, turn["role"], content), []).append(
                (session_id, index)
            )
            texts[(session_id, index)] = content
        if messages:
            handle.ingest(messages, session_id=session_id)
    return turn_of, texts


def evidence_turns(item: dict[str, Any]) -> set[Turn]:
    return {
        (session_id, index)
        for session_id, turns in zip(
            item["haystack_session_ids"], item["haystack_sessions"], strict=True
        )
        for index, turn in enumerate(turns)
        if turn.get("has_answer")
    }


def per_type(data: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """A stratified sample: the first ``count`` questions of each question type, in file order."""
    picked: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for item in data:
        kind = item["question_type"]
        if seen.get(kind, 0) < count:
            seen[kind] = seen.get(kind, 0) + 1
            picked.append(item)
    return picked


class Runner:
    """Scores questions, possibly from several threads (ingest of one overlaps recall of another)."""

    def __init__(self, client: Client, settings: Settings, args: argparse.Namespace) -> None:
        self.client, self.settings, self.args = client, settings, args
        self.tallies = {
            name: {"turn": Tally(), "session": Tally(), "update": Tally()}
            for name in ("raymem", "bm25")
        }
        self.latency: dict[str, list[float]] = {"client": [], "server_total": []}
        self.stages: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def question(self, number: int, item: dict[str, Any]) -> None:
        profile = f"lme-{item['question_id']}"
        started = time.perf_counter()
        turn_of, texts = ingest_haystack(
            self.client, profile, item, self.settings.limits.max_content_chars
        )
        wait_vectorised(self.settings, profile)
        ingest_s = time.perf_counter() - started
        sent = time.perf_counter()
        result = self.client.get_profile(profile).recall(
            item["question"],
            limit=self.args.recall_limit,
            synthesize=False,
            as_of=question_time(item),
        )
        client_ms = (time.perf_counter() - sent) * 1000
        self.client.get_profile(profile).delete()
        baseline = Bm25Baseline()
        for turn, text in texts.items():
            baseline.add(turn, text)
        rankings = {
            "raymem": hit_turns(result, turn_of),
            "bm25": baseline.search(item["question"], self.args.recall_limit),
        }
        baseline.close()
        with self._lock:
            self._record(item, rankings, result.latency_ms, client_ms)
        print(
            f"[{number}] {item['question_id']} {item['question_type']}: {len(texts)} turns, ingest {ingest_s:.1f} s",
            flush=True,
        )

    def _record(
        self,
        item: dict[str, Any],
        rankings: dict[str, list[Turn]],
        stage_ms: dict[str, float],
        client_ms: float,
    ) -> None:
        category = item["question_type"]
        relevant_turns = evidence_turns(item)
        relevant_sessions = set(item["answer_session_ids"])
        for name, turns in rankings.items():
            if relevant_turns:  # a few questions mark no evidence turn: session level only
                self.tallies[name]["turn"].add(category, score_ranking(turns, relevant_turns))
            sessions = list(dict.fromkeys(session for session, _ in turns))
            self.tallies[name]["session"].add(category, score_ranking(sessions, relevant_sessions))
            newest = newest_answer_first(item, sessions)
            if newest is not None:
                self.tallies[name]["update"].add(category, {"newest_first": float(newest)})
        self.latency["client"].append(client_ms)
        self.latency["server_total"].append(stage_ms["total"])
        for stage, ms in stage_ms.items():
            self.stages.setdefault(stage, []).append(ms)


def run(args: argparse.Namespace) -> dict[str, Any]:
    data = [
        item
        for item in json.loads(Path(args.data).read_text())
        if not item["question_id"].endswith("_abs")
    ]
    if args.per_type:
        data = per_type(data, args.per_type)
    if args.limit_questions:  # a spread over question types rather than the first few
        step = max(1, len(data) // args.limit_questions)
        data = data[::step][: args.limit_questions]
    with raymem_server(embedder_threads=args.embedder_threads) as (client, settings):
        runner = Runner(client, settings, args)
        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            for future in [pool.submit(runner.question, n, item) for n, item in enumerate(data)]:
                future.result()
    return report(runner, sorted({item["question_type"] for item in data}), args)


def report(runner: Runner, categories: list[str], args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"args": vars(args), "metrics": {}}
    for level in ("session", "turn"):
        rows = []
        for name in ("raymem", "bm25"):
            tally = runner.tallies[name][level]
            for category in categories:
                means = tally.mean([category])
                rows.append((f"{name} {category}", means))
                results["metrics"].setdefault(name, {}).setdefault(level, {})[category] = means
            overall = tally.mean(categories)
            rows.append((f"{name} overall", overall))
            results["metrics"][name][level]["overall"] = overall
        print()
        print(table(f"LongMemEval_S {level}-level", rows))
    rows = []
    for name in ("raymem", "bm25"):
        tally = runner.tallies[name]["update"]
        for category in categories:
            if tally.rows.get(category):
                rows.append((f"{name} {category}", tally.mean([category])))
                results["metrics"][name].setdefault("update", {})[category] = tally.mean([category])
    if rows:
        print()
        print(
            table(
                "LongMemEval_S: the newest answer session ranks above the older ones",
                rows,
                NEWEST_FIRST,
            )
        )
    results["latency_ms"] = {key: percentiles(values) for key, values in runner.latency.items()}
    results["stage_ms"] = {key: percentiles(values) for key, values in runner.stages.items()}
    print("\nrecall latency (ms):", json.dumps(results["latency_ms"]))
    print("per stage (ms):", json.dumps(results["stage_ms"]))
    print("saved", save_json("longmemeval", results))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", help="path to longmemeval_s_dev.json")
    parser.add_argument(
        "--limit-questions", type=int, default=0, help="an even spread of this many"
    )
    parser.add_argument(
        "--per-type", type=int, default=0, help="the first N questions of each question type"
    )
    parser.add_argument("--recall-limit", type=int, default=20, help="hits asked for per question")
    parser.add_argument("--workers", type=int, default=2, help="questions in flight at once")
    parser.add_argument("--embedder-threads", type=int, default=2)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
