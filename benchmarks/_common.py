"""Shared parts of the retrieval benchmarks: a private server, metrics, a BM25 baseline, output.

The benchmarks talk to raymem only through its public HTTP API (``raymem.Client``);
the one driver-side call is ``wait_vectorised`` on the profile actor, so that
questions are asked once every turn and memory has its vector.
"""

import contextlib
import json
import math
import os
import re
import shutil
import socket
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from raymem import Client
from raymem.config import Settings, load_settings
from raymem.types import RecallResult

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RUN_INFO: dict[str, Any] = {}  # what the server ran with, saved beside the metrics
KS = (5, 10)

try:  # the stdlib sqlite3 of some Python builds lacks FTS5; pysqlite3 always has it
    import pysqlite3.dbapi2 as fts_sqlite
except ImportError:  # pragma: no cover
    fts_sqlite = sqlite3  # type: ignore[misc]


# ------------------------------------------------------------------ server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def raymem_server(
    *, embedder_threads: int = 2, num_cpus: int = 2
) -> Iterator[tuple[Client, Settings]]:
    """Start the Serve app in-process on a free loopback port with a private data dir."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from raymem.serve import server

    data_dir = tempfile.mkdtemp(prefix="raymem-bench-")
    port = free_port()
    # RAYMEM_RECALL_* and RAYMEM_MODELS_* from the environment tune recall (weights,
    # rrf_k) and the models (embedder_backend, embedder_precision) for a run.
    recall = {
        key: value
        for key, value in os.environ.items()
        if key.startswith(("RAYMEM_RECALL_", "RAYMEM_MODELS_"))
    }
    settings = load_settings(
        environ={
            **recall,
            "RAYMEM_DATA_DIR": data_dir,
            "RAYMEM_SERVER_PORT": str(port),
            "RAYMEM_NAMESPACE": f"raymem-bench-{port}",
            "RAYMEM_PROFILES_IDLE_TIMEOUT_S": "3600",
            "RAYMEM_MODELS_EMBEDDER_THREADS": str(embedder_threads),
        }
    )
    RUN_INFO["recall_settings"] = msgspec.to_builtins(settings.recall)
    server.start(settings, num_cpus=num_cpus)
    client = Client(f"http://127.0.0.1:{port}", timeout=600.0)
    try:
        _wait_healthy(client)
        yield client, settings
    finally:
        client.close()
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def _wait_healthy(client: Client, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.health()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.25)


def wait_vectorised(settings: Settings, profile: str) -> None:
    """Block until the profile actor has embedded every pending turn and memory."""
    from raymem.actors.calls import ProfileCalls, run_blocking
    from raymem.actors.registry import ProfileRouter

    run_blocking(ProfileCalls(ProfileRouter(settings), "default", profile).wait_vectorised())


def hit_turns(result: RecallResult, turn_of: dict[str, list[Any]]) -> list[Any]:
    """Distinct turns in rank order: a message hit is its turn, a memory maps through its sources."""
    ranked: list[Any] = []
    for hit in result.memories:
        ids = [hit.id] if hit.type == "message" else hit.source_message_ids
        for message_id in ids:
            for turn in turn_of.get(message_id, ()):
                if turn not in ranked:
                    ranked.append(turn)
    return ranked


# ----------------------------------------------------------------- metrics


def dedupe(items: Sequence[Any]) -> list[Any]:
    return list(dict.fromkeys(items))


def score_ranking(ranked: Sequence[Any], relevant: set[Any]) -> dict[str, float]:
    """recall_any@k, recall_all@k, frac@k: the share of evidence found (k in KS); NDCG@10, MRR."""
    scores: dict[str, float] = {}
    for k in KS:
        found = relevant & set(ranked[:k])
        scores[f"any@{k}"] = float(bool(found))
        scores[f"all@{k}"] = float(found == relevant)
        scores[f"frac@{k}"] = len(found) / len(relevant)
    dcg = sum(1 / math.log2(i + 2) for i, item in enumerate(ranked[:10]) if item in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    scores["ndcg@10"] = dcg / ideal if ideal else 0.0
    first = next((i for i, item in enumerate(ranked) if item in relevant), None)
    scores["mrr"] = 0.0 if first is None else 1 / (first + 1)
    return scores


@dataclass
class Tally:
    """Per-question scores grouped by category, for one method."""

    rows: dict[str, list[dict[str, float]]] = field(default_factory=dict)

    def add(self, category: str, scores: dict[str, float]) -> None:
        self.rows.setdefault(category, []).append(scores)

    def mean(self, categories: Sequence[str]) -> dict[str, float]:
        rows = [row for c in categories for row in self.rows.get(c, [])]
        if not rows:
            return {}
        means = {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]}
        return {**means, "n": float(len(rows))}


def percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]
    return {"p50": round(statistics.median(ordered), 2), "p99": round(p99, 2), "n": len(ordered)}


# ------------------------------------------------------------- BM25 baseline

WORD = re.compile(r"\w+", re.UNICODE)


class Bm25Baseline:
    """Plain FTS5/BM25 over the raw turns: the query's words ORed, nothing else."""

    def __init__(self) -> None:
        self._db = fts_sqlite.connect(":memory:")
        self._db.execute(
            "CREATE VIRTUAL TABLE turns USING fts5 (content, tokenize = 'porter unicode61')"
        )
        self._keys: list[Any] = []

    def add(self, key: Any, text: str) -> None:
        self._keys.append(key)
        self._db.execute(
            "INSERT INTO turns (rowid, content) VALUES (?, ?)", (len(self._keys), text)
        )

    def search(self, query: str, limit: int) -> list[Any]:
        words = dedupe(WORD.findall(query.lower()))
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)
        rows = self._db.execute(
            "SELECT rowid FROM turns WHERE turns MATCH ? ORDER BY bm25(turns) LIMIT ?",
            (match, limit),
        ).fetchall()
        return [self._keys[row[0] - 1] for row in rows]

    def close(self) -> None:
        self._db.close()


# ------------------------------------------------------------------ output

COLUMNS = ("any@5", "any@10", "all@5", "all@10", "frac@10", "ndcg@10", "mrr")
#: The knowledge-update table's one score: the share of questions whose newest answer
#: session ranks above the older ones.
NEWEST_FIRST = ("newest_first",)


def table(
    title: str, rows: list[tuple[str, dict[str, float]]], columns: Sequence[str] = COLUMNS
) -> str:
    """A fixed-width text table: one row per (label, means), one column per score."""
    widths = [max(9, len(c) + 1) for c in columns]
    header = f"{'':34}{'n':>6}" + "".join(f"{c:>{w}}" for c, w in zip(columns, widths, strict=True))
    lines = [title, header, "-" * len(header)]
    for label, means in rows:
        if not means:
            continue
        cells = "".join(
            f"{means.get(c, float('nan')):>{w}.3f}" for c, w in zip(columns, widths, strict=True)
        )
        lines.append(f"{label:34}{int(means['n']):>6}{cells}")
    return "\n".join(lines)


def save_json(name: str, payload: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    path = RESULTS_DIR / f"{name}-{stamp}.json"
    payload = {**payload, **RUN_INFO}
    path.write_text(json.dumps(msgspec.to_builtins(payload), indent=2, sort_keys=True))
    return path
