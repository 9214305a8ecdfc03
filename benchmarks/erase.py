"""Erasure: what secure_delete costs ingest, and what an erasure costs, on LoCoMo profiles.

1. secure_delete's cost to storing: every conversation through the ingest pipeline
   (the embedded rules, no model) into a fresh store, with a vector for each memory
   and turn (random: the model's time is not what is measured here), once with the
   writer's ``secure_delete`` on (as raymem runs) and once off, alternating over
   ``--rounds``; turns per second each way, best round.
2. erasures in one profile holding every conversation: one memory, one session, and
   retention of the older half of the turns; the time of the transaction (rows,
   ledger redaction, full-text merge) and of emptying the write-ahead log, and the
   two parts that grow with the profile measured alone (a scan of the ledger that
   changes nothing, and a full-text merge), with the file and ledger sizes.

3. erasing a session in a profile whose procedural memory holds many captured
   actions (``--action-sessions`` sessions of ``ACTIONS_PER_SESSION`` actions, each
   closed into a sequence, patterns evaluated): what the subsystems' erasers and
   the ledger entries of the actions add to a session erasure.

    python benchmarks/erase.py ../shared/data/locomo10.json [--limit-conversations 10]
        [--rounds 3] [--action-sessions 500]
"""

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
from locomo import sessions, turn_text  # one reading of the LoCoMo format

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DIM = 384  # all-MiniLM-L6-v2's, so vector rows have their real size
ERASURES = 5  # memories and sessions erased, each timed
ACTIONS_PER_SESSION = 100
FAILURE_EVERY = 5  # one captured action in this many fails, with one of three error codes


async def _vectorise(store: Any, rng: np.random.Generator) -> None:
    for table in ("memory_vectors", "message_vectors"):
        while pending := await store.reads.pending_vectors(table, limit=256):
            vectors = rng.standard_normal((len(pending), DIM)).astype(np.float32)
            async with store.write() as writer:
                await writer.set_vectors(
                    table, [(seq, vectors[i]) for i, (seq, _) in enumerate(pending)]
                )


async def _fill(store: Any, data: list[dict[str, Any]], rng: np.random.Generator) -> int:
    """Every conversation's sessions through the pipeline, then vectors; returns turns stored."""
    from raymem.pipelines import ingest
    from raymem.types import MessageIn

    stored = 0
    for sample in data:
        for key, started, turns in sessions(sample["conversation"]):
            messages = [
                MessageIn(role="user", content=turn_text(t), created_at=started) for t in turns
            ]
            result = await ingest.ingest(store, f"{sample['sample_id']}-{key}", messages)
            stored += result.messages.stored
        await _vectorise(store, rng)
    return stored


async def storing(data: list[dict[str, Any]], workdir: Path, rounds: int) -> dict[str, Any]:
    """Turns per second into a fresh store, secure_delete on and off, best of ``rounds``."""
    from raymem.store import ProfileStore

    rates: dict[str, list[float]] = {"on": [], "off": []}
    for number in range(rounds):
        for mode in ("on", "off") if number % 2 == 0 else ("off", "on"):
            store = await ProfileStore.open(workdir / f"store-{mode}-{number}.db", dim=DIM)
            # The benchmark's one reach inside the store: the A/B switch.
            await store._writer.execute(f"PRAGMA secure_delete = {mode.upper()}")
            start = time.perf_counter()
            stored = await _fill(store, data, np.random.default_rng(number))
            rates[mode].append(stored / (time.perf_counter() - start))
            await store.close()
    best = {mode: max(values) for mode, values in rates.items()}
    return {
        "turns_per_s": best,
        "all_rounds_turns_per_s": rates,
        "secure_delete_cost": 1 - best["on"] / best["off"],
    }


async def _timed(store: Any, erase_in: Callable[[Any], Awaitable[Any]]) -> dict[str, float]:
    start = time.perf_counter()
    async with store.write() as writer:
        await erase_in(writer)
    committed = time.perf_counter()
    assert await store.truncate_wal()
    return {"transaction_s": committed - start, "wal_s": time.perf_counter() - committed}


async def _rolled_back(store: Any, work: Callable[[Any], Awaitable[Any]]) -> float:
    """Seconds ``work`` takes inside a transaction that is then rolled back."""

    class Undo(Exception):
        pass

    start = time.perf_counter()
    try:
        async with store.write() as writer:
            await work(writer)
            raise Undo
    except Undo:
        pass
    return time.perf_counter() - start


async def erasing(data: list[dict[str, Any]], workdir: Path) -> dict[str, Any]:
    from raymem.store import ProfileStore, erase, to_db_time, utc_now

    path = workdir / "profile.db"
    store = await ProfileStore.open(path, dim=DIM)
    try:
        turns = await _fill(store, data, np.random.default_rng(0))
        assert await store.truncate_wal()
        sizes = {
            "turns": turns,
            "file_bytes": path.stat().st_size,
            "ledger_entries": await store.reads.ledger_seq(),
        }
        scan = erase.Redaction(at=to_db_time(utc_now()), memories=frozenset({"no such id"}))
        alone = {
            "ledger_scan_s": await _rolled_back(store, lambda w: erase._redact_ledger(w, scan)),
            "fts_merge_s": await _rolled_back(
                store,
                lambda w: w.conn.execute(
                    "INSERT INTO messages_fts (messages_fts) VALUES ('optimize')"
                ),
            ),
        }
        memories, _ = await store.reads.list_memories(limit=ERASURES * 50)
        sessions_listed = await store.reads.list_sessions()
        at = to_db_time(utc_now())
        timings: dict[str, list[dict[str, float]]] = {"memory": [], "session": []}
        for memory in memories[::50][:ERASURES]:
            timings["memory"].append(
                await _timed(store, lambda w, m=memory: erase.erase_memories(w, [m.id], at=at))
            )
        for session in sessions_listed[::7][:ERASURES]:
            timings["session"].append(
                await _timed(store, lambda w, s=session: erase.erase_session(w, s.id, at=at))
            )
        cutoff = await asyncio.to_thread(_median_ingested_at, path)
        retention = await _timed(store, lambda w: erase.erase_turns_before(w, cutoff))
        result: dict[str, Any] = {"profile": sizes, "alone": alone, "retention": retention}
        for kind, runs in timings.items():
            result[kind] = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        return result
    finally:
        await store.close()


async def erasing_with_actions(workdir: Path, sessions: int) -> dict[str, Any]:
    """Session erasures in a profile of ``sessions`` sessions of captured actions (no turns)."""
    from datetime import UTC, datetime, timedelta

    from raymem.pipelines.procedural import capture, patterns, sequences
    from raymem.store import ProfileStore, erase, to_db_time, utc_now
    from raymem.types_procedural import ActionIn

    start = datetime(2026, 11, 1, tzinfo=UTC)
    store = await ProfileStore.open(workdir / "actions.db", dim=DIM)
    try:
        await capture.set_enabled(store, True, now=start)
        for number in range(sessions):
            began = start + timedelta(minutes=number)
            fails = [i % FAILURE_EVERY == 0 for i in range(ACTIONS_PER_SESSION)]
            actions = [
                ActionIn(
                    session_id=f"s{number}",
                    action_type=f"act{i % 7}",
                    target_type="node",
                    outcome="failure" if fails[i] else "success",
                    error_code=f"E{i % 3}" if fails[i] else None,
                    target_ids=[f"n{number}-{i % 10}"],
                    intent=f"task {number}",
                    at=began + timedelta(milliseconds=i),
                )
                for i in range(ACTIONS_PER_SESSION)
            ]
            await capture.capture(store, actions, now=began)
            await sequences.close_session(store, f"s{number}", began + timedelta(minutes=1))
        await patterns.evaluate_patterns(store, start + timedelta(days=1))
        assert await store.truncate_wal()
        at = to_db_time(utc_now())
        runs = [
            await _timed(store, lambda w, n=number: erase.erase_session(w, f"s{n}", at=at))
            for number in range(0, sessions, max(1, sessions // ERASURES))[:ERASURES]
        ]
        return {
            "actions": sessions * ACTIONS_PER_SESSION,
            "ledger_entries": await store.reads.ledger_seq(),
            "session": {key: statistics.median(run[key] for run in runs) for key in runs[0]},
        }
    finally:
        await store.close()


def _median_ingested_at(path: Path) -> str:
    from raymem.store.connection import open_sync

    conn = open_sync(path)
    try:
        times = [row[0] for row in conn.execute("SELECT ingested_at FROM messages ORDER BY 1")]
    finally:
        conn.close()
    return str(times[len(times) // 2])


def print_table(result: dict[str, Any]) -> None:
    rates = result["storing"]["turns_per_s"]
    print(f"storing {result['conversations']} LoCoMo conversations (rules, random vectors)")
    print(f"  secure_delete on   {rates['on']:>9.0f} turns/s")
    print(f"  secure_delete off  {rates['off']:>9.0f} turns/s")
    print(f"  cost               {result['storing']['secure_delete_cost']:>9.1%}")
    erasing_ = result["erasing"]
    profile = erasing_["profile"]
    print(
        f"\nerasing in one profile: {profile['turns']} turns, {profile['ledger_entries']}"
        f" ledger entries, {profile['file_bytes'] / 2**20:.1f} MiB"
    )
    print(f"  {'':28}{'transaction':>14}{'empty the WAL':>16}")
    for kind in ("memory", "session", "retention"):
        row = erasing_[kind]
        print(f"  {kind:28}{row['transaction_s'] * 1000:>11.1f} ms{row['wal_s'] * 1000:>13.1f} ms")
    alone = erasing_["alone"]
    print(
        f"  of which, alone: ledger scan {alone['ledger_scan_s'] * 1000:.1f} ms,"
        f" full-text merge of the turns {alone['fts_merge_s'] * 1000:.1f} ms"
    )
    actions = result["erasing_with_actions"]
    print(
        f"\nerasing a session among {actions['actions']} captured actions"
        f" ({actions['ledger_entries']} ledger entries):"
        f" {actions['session']['transaction_s'] * 1000:.1f} ms,"
        f" emptying the WAL {actions['session']['wal_s'] * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("locomo", type=Path, help="path to locomo10.json")
    parser.add_argument("--limit-conversations", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="A/B rounds of the storing test")
    parser.add_argument(
        "--action-sessions", type=int, default=500, help="sessions of captured actions"
    )
    args = parser.parse_args()
    data = json.loads(args.locomo.read_text())[: args.limit_conversations]
    workdir = Path(tempfile.mkdtemp(prefix="raymem-erase-bench-"))
    try:
        result = {
            "conversations": len(data),
            "storing": asyncio.run(storing(data, workdir, args.rounds)),
            "erasing": asyncio.run(erasing(data, workdir)),
            "erasing_with_actions": asyncio.run(
                erasing_with_actions(workdir, args.action_sessions)
            ),
            "cpus": os.cpu_count(),
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_table(result)
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"erase-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"\nsaved {out}")


if __name__ == "__main__":
    main()
