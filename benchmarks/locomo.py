"""LoCoMo retrieval benchmark: does recall surface the evidence turns of each question?

Each of the 10 conversations goes into its own profile through the HTTP API,
one ingest per session, with the session's date-time as the message time and the
speaker's name kept in the content (both speakers are people, so both are sent
as ``user`` turns). Every question is asked through recall; hits map to turns
(a message hit is its turn, a memory maps through ``source_message_ids``).
A plain FTS5/BM25 index over the same turns is scored in the same run.

    python benchmarks/locomo.py ../shared/data/locomo10.json [--limit-conversations 2]
"""

import argparse
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import (
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

from raymem.store import message_id

CATEGORIES = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}
OVERALL = ("1", "2", "3", "4")  # adversarial questions are reported apart, as the paper does


def session_time(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as a datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):  # the photo a speaker shared is part of what was said
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def sessions(conversation: dict[str, Any]) -> list[tuple[str, datetime, list[dict[str, Any]]]]:
    """(session key, start time, turns) in conversation order."""
    out = []
    number = 1
    while f"session_{number}" in conversation:
        key = f"session_{number}"
        out.append((key, session_time(conversation[f"{key}_date_time"]), conversation[key]))
        number += 1
    return out


def asked_at(conversation: list[tuple[str, datetime, list[dict[str, Any]]]]) -> datetime:
    """When the questions are asked: a day after the last session began (the data gives no
    question dates; the questions look back on the whole conversation)."""
    return (conversation[-1][1] + timedelta(days=1)).replace(tzinfo=UTC)


def ingest_conversation(
    client: Any, profile: str, conversation: dict[str, Any]
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Send every session; returns message id -> dia_ids, and dia_id -> text (for the baseline)."""
    turn_of: dict[str, list[str]] = {}
    texts: dict[str, str] = {}
    handle = client.get_profile(profile)
    for key, started, turns in sessions(conversation):
        messages = []
        for index, turn in enumerate(turns):
            content = turn_text(turn)
            messages.append(
                {
                    "role": "user",
                    "content": content,
                    "created_at": (started + timedelta(seconds=index)).isoformat() + "Z",
                }
            )
            turn_of.setdefault(message_id(key, "user", content), []).append(turn["dia_id"])
            texts[turn["dia_id"]] = content
        handle.ingest(messages, session_id=key)
    return turn_of, texts


def evidence(qa: dict[str, Any], known: dict[str, str]) -> set[str]:
    """The question's evidence turns that exist in the conversation."""
    ids = {
        part.strip()
        for item in qa.get("evidence", [])
        for part in item.replace(",", ";").split(";")
    }
    return {i for i in ids if i in known}


def session_of(dia_id: str) -> str:
    return dia_id.split(":", 1)[0]


def run(args: argparse.Namespace) -> dict[str, Any]:
    data = json.loads(Path(args.data).read_text())[: args.limit_conversations or None]
    tallies = {name: {"turn": Tally(), "session": Tally()} for name in ("raymem", "bm25")}
    latency: dict[str, list[float]] = {"client": [], "server_total": []}
    stages: dict[str, list[float]] = {}
    skipped = 0
    with raymem_server(embedder_threads=args.embedder_threads) as (client, settings):
        for sample in data:
            profile = f"locomo-{sample['sample_id']}".replace("_", "-")
            started = time.perf_counter()
            turn_of, texts = ingest_conversation(client, profile, sample["conversation"])
            wait_vectorised(settings, profile)
            print(
                f"{profile}: {len(texts)} turns ingested in {time.perf_counter() - started:.1f} s",
                flush=True,
            )
            baseline = Bm25Baseline()
            for dia_id, text in texts.items():
                baseline.add(dia_id, text)
            handle = client.get_profile(profile)
            asked = asked_at(sessions(sample["conversation"]))
            for qa in sample["qa"][: args.limit_questions or None]:
                relevant = evidence(qa, texts)
                if not relevant:
                    skipped += 1
                    continue
                category = str(qa["category"])
                sent = time.perf_counter()
                result = handle.recall(
                    qa["question"], limit=args.recall_limit, synthesize=False, as_of=asked
                )
                latency["client"].append((time.perf_counter() - sent) * 1000)
                latency["server_total"].append(result.latency_ms["total"])
                for stage, ms in result.latency_ms.items():
                    stages.setdefault(stage, []).append(ms)
                rankings = {
                    "raymem": hit_turns(result, turn_of),
                    "bm25": baseline.search(qa["question"], args.recall_limit),
                }
                for name, turns in rankings.items():
                    tallies[name]["turn"].add(category, score_ranking(turns, relevant))
                    sessions_ranked = list(dict.fromkeys(session_of(t) for t in turns))
                    tallies[name]["session"].add(
                        category, score_ranking(sessions_ranked, {session_of(t) for t in relevant})
                    )
            baseline.close()
    return report(tallies, latency, stages, skipped, args)


def report(
    tallies: dict[str, dict[str, Tally]],
    latency: dict[str, list[float]],
    stages: dict[str, list[float]],
    skipped: int,
    args: argparse.Namespace,
) -> dict[str, Any]:
    results: dict[str, Any] = {"args": vars(args), "skipped_no_evidence": skipped, "metrics": {}}
    for level in ("turn", "session"):
        rows = []
        for name in ("raymem", "bm25"):
            tally = tallies[name][level]
            for code, label in CATEGORIES.items():
                means = tally.mean([code])
                rows.append((f"{name} {code} {label}", means))
                results["metrics"].setdefault(name, {}).setdefault(level, {})[label] = means
            overall = tally.mean(OVERALL)
            rows.append((f"{name} overall (1-4)", overall))
            results["metrics"][name][level]["overall"] = overall
        print()
        print(table(f"LoCoMo {level}-level", rows))
    results["latency_ms"] = {key: percentiles(values) for key, values in latency.items()}
    results["stage_ms"] = {key: percentiles(values) for key, values in stages.items()}
    print("\nrecall latency (ms):", json.dumps(results["latency_ms"]))
    print("per stage (ms):", json.dumps(results["stage_ms"]))
    print("saved", save_json("locomo", results))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", help="path to locomo10.json")
    parser.add_argument("--limit-conversations", type=int, default=0)
    parser.add_argument("--limit-questions", type=int, default=0, help="per conversation")
    parser.add_argument("--recall-limit", type=int, default=20, help="hits asked for per question")
    parser.add_argument("--embedder-threads", type=int, default=2)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
