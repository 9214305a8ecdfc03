"""Procedural memory: a simulated agent that learns, capture and injection speed, pass timings.

    python benchmarks/procedural.py --sizes 10000,100000

1. The simulated agent, through the HTTP API: its tool, ``update_node``, fails with
   NodeNotFoundError unless ``create_node`` ran on the same node first, which the
   agent does not know. It runs 50 tasks without asking (the baseline), then 50 in
   which it asks for past experience first and heeds a precondition it is given.
   Prints when a pattern appears and the block names the precondition, and the
   curve of task_success_rate and its delta_vs_baseline.
2. Capture and injection, into one profile of the service: batches of 1,000 actions
   over HTTP (actions/s), one action per call and one injection per call, timed
   through the actor (a Ray call from here, no HTTP) and over HTTP.
3. The passes at growing sizes, on the store in this process (no Ray): actions of
   sessions of ten, captured in batches; then the sequence, pattern and metric
   passes timed, and single-action capture and injection inside a profile that big
   (what the actor itself spends on them).

Prints tables and writes JSON to benchmarks/results/procedural-<time>.json.
"""

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import raymem_server, save_json

from raymem.actors.calls import ProfileCalls, run_blocking
from raymem.actors.registry import ProfileRouter
from raymem.client import Client
from raymem.config import ProceduralSettings, Settings
from raymem.pipelines import procedural
from raymem.pipelines.procedural import capture, inject
from raymem.store import ProfileStore
from raymem.types_procedural import ActionIn, CaptureRequest, InjectRequest

# The clock of the simulation: a day ahead, so the actor's own timer (at the real time)
# closes none of its sessions.
T0 = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
TASK_HOURS = 4  # between tasks
BASELINE_TASKS = 50  # the first 50 sequences are every metric's baseline
HEEDING_TASKS = 50
CREATES_FIRST = 0.2  # how often the naive agent happens to create the node first
RECOVERS = 0.5  # how often, after NodeNotFoundError, it creates the node and retries
CAPTURE_BATCH = 1_000  # the server's default limit per request
LATENCY_CALLS = 200
SESSION_ACTIONS = 10  # actions per session in the pass timings
ACTION_TYPES = ["search", "read_node", "update_node", "create_node", "link_nodes"]
ERRORS = ["NodeNotFoundError", "PermissionDenied", "Timeout"]


def ms(seconds: float) -> float:
    return round(1000 * seconds, 3)


def timings(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": ms(statistics.median(ordered)),
        "p95_ms": ms(ordered[int(0.95 * (len(ordered) - 1))]),
        "n": len(ordered),
    }


def timed(call: Callable[[], Any], times: int) -> dict[str, float]:
    spent = []
    for _ in range(times):
        start = time.perf_counter()
        call()
        spent.append(time.perf_counter() - start)
    return timings(spent)


# ------------------------------------------------------- 1. the simulated agent


def tool(action_type: str, node: str, created: set[str]) -> tuple[str, str | None]:
    """The flaky tool: (outcome, error code); the hidden precondition is ``create_node``."""
    if action_type == "create_node":
        created.add(node)
        return "success", None
    if node not in created:
        return "failure", "NodeNotFoundError"
    return "success", None


def act(plan: list[str], node: str, rng: random.Random) -> list[tuple[str, str, str | None]]:
    created: set[str] = set()
    done = []
    for action_type in plan:
        outcome, error = tool(action_type, node, created)
        done.append((action_type, outcome, error))
        if outcome != "success":
            if rng.random() < RECOVERS:
                for retry in ("create_node", "update_node"):
                    done.append((retry, *tool(retry, node, created)))
            break
    return done


def simulate(client: Client, profile: str) -> dict[str, Any]:
    """The agent's 100 tasks over HTTP; returns when it learned and the metric curve."""
    target = client.get_profile(profile)
    memory = target.procedural
    memory.enable()
    rng = random.Random(19)
    pattern_after = named_after = None
    heeded = 0
    for number in range(BASELINE_TASKS + HEEDING_TASKS):
        session, node = f"task-{number}", f"n{number}"
        start = T0 + timedelta(hours=TASK_HOURS * number)
        asks = number >= BASELINE_TASKS
        told = False
        if asks:
            block = memory.inject(
                action_type="update_node", target_type="node", target_ids=[node], session_id=session
            )
            told = any(p.precondition == "create_node" for p in block.patterns)
            heeded += told
        creates_first = told or rng.random() < CREATES_FIRST
        plan = ["create_node", "update_node"] if creates_first else ["update_node"]
        memory.capture(
            [
                ActionIn(
                    session_id=session,
                    action_type=action_type,
                    target_type="node",
                    target_ids=[node],
                    outcome=outcome,  # type: ignore[arg-type]
                    error_code=error,
                    intent="rename a node",
                    at=start + timedelta(seconds=index),
                )
                for index, (action_type, outcome, error) in enumerate(act(plan, node, rng))
            ]
        )
        target.session(session).end()  # closes the session's action sequence
        memory.evaluate(now=start + timedelta(minutes=2))
        if pattern_after is None and memory.patterns().patterns:
            pattern_after = number + 1
        if named_after is None:
            probe = memory.inject(action_type="update_node", target_type="node")
            if "run create_node first" in probe.text:
                named_after = number + 1
    rows = {  # the rows of the evaluations at the simulation's clock, one per task
        metric: [row for row in memory.benchmark(metric).rows if row.at >= T0]
        for metric in ("task_success_rate", "pattern_utilisation", "efficiency_delta")
    }
    curve = [
        {
            "task": index + 1,
            "success_rate": row.value,
            "delta_vs_baseline": row.delta_vs_baseline,
            "pattern_utilisation": rows["pattern_utilisation"][index].value,
            "actions_per_sequence": rows["efficiency_delta"][index].value,
        }
        for index, row in enumerate(rows["task_success_rate"])
    ]
    return {
        "pattern_after_sequences": pattern_after,
        "precondition_named_after_sequences": named_after,
        "heeded_tasks": heeded,
        "curve": curve,
        "injection_example": memory.inject(action_type="update_node", target_type="node").text,
    }


# ------------------------------------------------- 2. capture and injection


def synthetic_actions(count: int, *, start: datetime, prefix: str) -> list[ActionIn]:
    """Sessions of ten actions, a second apart, with a tenth of them failing."""
    rng = random.Random(count)
    actions = []
    for index in range(count):
        fails = rng.random() < 0.1
        actions.append(
            ActionIn(
                session_id=f"{prefix}-{index // SESSION_ACTIONS}",
                agent_id=f"agent-{index % 3}",
                action_type=rng.choice(ACTION_TYPES),
                target_type=rng.choice(["node", "edge", "document"]),
                target_ids=[f"t{rng.randrange(1000)}"],
                outcome="failure" if fails else "success",
                error_code=rng.choice(ERRORS) if fails else None,
                duration_ms=rng.uniform(5, 500),
                intent=f"task {index // SESSION_ACTIONS % 50}",
                at=start + timedelta(seconds=index),
            )
        )
    return actions


def service_speed(client: Client, settings: Settings, profile: str, count: int) -> dict[str, Any]:
    memory = client.get_profile(profile).procedural
    memory.enable()
    actions = synthetic_actions(count, start=T0 - timedelta(days=30), prefix="load")
    start = time.perf_counter()
    for first in range(0, count, CAPTURE_BATCH):
        memory.capture(actions[first : first + CAPTURE_BATCH])
    batched_s = time.perf_counter() - start

    calls = ProfileCalls(ProfileRouter(settings), "default", profile)
    singles = iter(synthetic_actions(4 * LATENCY_CALLS, start=T0, prefix="single"))

    def one_actor() -> None:
        run_blocking(calls.capture_actions(CaptureRequest(actions=[next(singles)])))

    def one_http() -> None:
        memory.capture([next(singles)])

    request = InjectRequest(action_type="update_node", target_type="node", target_ids=["t1"])
    return {
        "actions": count,
        "batched_http_actions_per_s": round(count / batched_s, 1),
        "single_capture_actor": timed(one_actor, LATENCY_CALLS),
        "single_capture_http": timed(one_http, LATENCY_CALLS),
        "inject_actor": timed(lambda: run_blocking(calls.inject(request)), LATENCY_CALLS),
        "inject_http": timed(
            lambda: memory.inject(action_type="update_node", target_type="node", target_ids=["t1"]),
            LATENCY_CALLS,
        ),
    }


# ----------------------------------------------------------- 3. pass timings


async def pass_timings(size: int) -> dict[str, Any]:
    """Capture ``size`` actions into a fresh store, run the passes, time the hot paths."""
    settings = ProceduralSettings()
    with tempfile.TemporaryDirectory(prefix="raymem-procedural-") as directory:
        store = await ProfileStore.open(Path(directory) / "profile.db", dim=384)
        try:
            start_at = T0 - timedelta(days=6)
            await capture.set_enabled(store, True, now=start_at)
            actions = synthetic_actions(size, start=start_at, prefix="s")
            start = time.perf_counter()
            for first in range(0, size, CAPTURE_BATCH):
                await capture.capture(store, actions[first : first + CAPTURE_BATCH], now=start_at)
            capture_s = time.perf_counter() - start
            now = start_at + timedelta(seconds=size + 3600)
            first_pass = await procedural.evaluate(store, now, settings)
            again = await procedural.evaluate(store, now + timedelta(minutes=15), settings)
            singles = synthetic_actions(LATENCY_CALLS, start=now, prefix="one")
            spent = []
            for action in singles:
                begin = time.perf_counter()
                await capture.capture(store, [action], now=now)
                spent.append(time.perf_counter() - begin)
            injected = []
            for index in range(LATENCY_CALLS):
                begin = time.perf_counter()
                await inject.injection_block(store, "update_node", "node", [f"t{index}"])
                injected.append(time.perf_counter() - begin)
            state = await capture.state(store)
        finally:
            await store.close()
    return {
        "actions": size,
        "capture_actions_per_s": round(size / capture_s, 1),
        "first_pass_ms": {k: round(v, 1) for k, v in first_pass.latency_ms.items()},
        "next_pass_ms": {k: round(v, 1) for k, v in again.latency_ms.items()},
        "sequences": state.counts.sequences,
        "patterns": state.counts.patterns,
        "single_capture_in_store": timings(spent),
        "inject_in_store": timings(injected),
    }


# ------------------------------------------------------------------ output


def print_service(report: dict[str, Any]) -> None:
    agent = report["agent"]
    print("\n== simulated agent (HTTP) ==")
    print(
        f"pattern after {agent['pattern_after_sequences']} sequences;"
        f" precondition named after {agent['precondition_named_after_sequences']};"
        f" heeded in {agent['heeded_tasks']} of {HEEDING_TASKS} tasks"
    )
    print(f"{'task':>5} {'success':>8} {'delta':>8} {'utilised':>9} {'actions/seq':>12}")
    for row in agent["curve"]:
        if row["task"] % 10 == 0 or row["task"] in (1, 5):
            cells = [row["success_rate"], row["delta_vs_baseline"], row["pattern_utilisation"]]
            text = "".join(f"{'-' if v is None else f'{v:.3f}':>9}" for v in cells)
            print(f"{row['task']:>5}{text} {row['actions_per_sequence'] or 0:>12.2f}")
    print(agent["injection_example"])

    speed = report["service"]
    print("\n== capture and injection in one profile of the service ==")
    print(
        f"batched capture over HTTP: {speed['batched_http_actions_per_s']:.0f} actions/s"
        f" ({speed['actions']} actions, {CAPTURE_BATCH} per request)"
    )
    for name in ("single_capture_actor", "single_capture_http", "inject_actor", "inject_http"):
        t = speed[name]
        print(f"{name:<22} p50 {t['p50_ms']:>7.2f} ms   p95 {t['p95_ms']:>7.2f} ms")


def print_report(report: dict[str, Any]) -> None:
    if "agent" in report:
        print_service(report)
    print("\n== passes (store, in process) ==")
    print(
        f"{'actions':>8} {'capture/s':>10} {'seq ms':>8} {'pat ms':>8} {'met ms':>8}"
        f" {'skill ms':>9} {'next ms':>8} {'1-capture p50':>14} {'inject p50':>11}"
    )
    for row in report["passes"]:
        first = row["first_pass_ms"]
        print(
            f"{row['actions']:>8} {row['capture_actions_per_s']:>10.0f}"
            f" {first['sequences']:>8.0f} {first['patterns']:>8.0f} {first['metrics']:>8.0f}"
            f" {first['skills']:>9.0f} {row['next_pass_ms']['total']:>8.0f}"
            f" {row['single_capture_in_store']['p50_ms']:>14.2f}"
            f" {row['inject_in_store']['p50_ms']:>11.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="actions for the pass timings")
    parser.add_argument("--capture", type=int, default=20_000, help="actions captured over HTTP")
    parser.add_argument(
        "--passes-only", action="store_true", help="only the pass timings (no Ray, no server)"
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",") if size]

    report: dict[str, Any] = {"started": datetime.now(UTC).isoformat()}
    if not args.passes_only:
        with raymem_server() as (client, settings):
            report["agent"] = simulate(client, "procedural-agent")
            report["service"] = service_speed(client, settings, "procedural-load", args.capture)
    report["passes"] = [asyncio.run(pass_timings(size)) for size in sizes]
    print_report(report)
    print(f"\nsaved {save_json('procedural', report)}")


if __name__ == "__main__":
    main()
