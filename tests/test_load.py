"""A bounded concurrent load on the keyless app: no 5xx, and no acknowledged write lost.

16 clients over 10 profiles for about 10 seconds (RAYMEM_LOAD_CLIENTS, _PROFILES,
_SECONDS override it), mixing ingest (a fresh session per call), remember and
recall over loopback. Afterwards every acknowledged ingest's session and turns and
every acknowledged memory must be readable. Prints throughput and latency.
"""

import asyncio
import os
import random
import re
import time
from collections import Counter, defaultdict
from typing import Any

import httpx

CLIENTS = int(os.environ.get("RAYMEM_LOAD_CLIENTS", "16"))
PROFILES = int(os.environ.get("RAYMEM_LOAD_PROFILES", "10"))
SECONDS = float(os.environ.get("RAYMEM_LOAD_SECONDS", "10"))
MAX_OPS_PER_CLIENT = 2_000  # a second bound, should the server answer implausibly fast
MIX = (("ingest", 0.4), ("remember", 0.3), ("recall", 0.3))


class Ledger:
    """What the server acknowledged, and every request's outcome."""

    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.statuses: Counter[tuple[str, int]] = Counter()
        self.sessions: dict[str, dict[str, list[str]]] = defaultdict(
            dict
        )  # profile → session → turns
        self.memories: dict[str, set[str]] = defaultdict(set)  # profile → memory ids
        self.errors: list[str] = []


async def one_client(
    client: httpx.AsyncClient, index: int, profiles: list[str], deadline: float, ledger: Ledger
) -> None:
    rng = random.Random(index)
    for n in range(MAX_OPS_PER_CLIENT):
        if time.monotonic() >= deadline:
            return
        profile = rng.choice(profiles)
        op = rng.choices([m for m, _ in MIX], [w for _, w in MIX])[0]
        tag = f"c{index}n{n}"
        base = f"/v1/profiles/{profile}"
        if op == "ingest":
            turns = [
                f"Order {tag} ships {rng.randint(1, 99)} lamps to warehouse W{rng.randint(1, 9)}.",
                f"Noted order {tag}.",
            ]
            body = {
                "session_id": f"load-{tag}",
                "messages": [
                    {"role": "user", "content": turns[0]},
                    {"role": "assistant", "content": turns[1]},
                ],
            }
            request = client.post(f"{base}/ingest", json=body)
        elif op == "remember":
            content = f"Badge {tag} opens door {rng.randint(1, 500)} on floor {rng.randint(1, 9)}."
            request = client.post(f"{base}/memories", json={"content": content})
        else:
            query = (
                f"Which door does badge c{rng.randrange(CLIENTS)}n{rng.randrange(max(n, 1))} open?"
            )
            request = client.post(f"{base}/recall", json={"query": query, "limit": 5})
        began = time.perf_counter()
        try:
            response = await request
        except httpx.TransportError as exc:
            ledger.statuses[(op, -1)] += 1
            print(f"transport error on {op}: {exc!r}")
            continue
        ledger.samples[op].append((time.perf_counter() - began) * 1000)
        ledger.statuses[(op, response.status_code)] += 1
        if response.status_code >= 400:
            ledger.errors.append(f"{op} {base}: {response.status_code} {response.text[:300]}")
        if op == "ingest" and response.status_code == 200:
            ledger.sessions[profile][body["session_id"]] = turns
        elif op == "remember" and response.status_code == 201:
            ledger.memories[profile].add(response.json()["id"])


async def run_load(url: str, profiles: list[str]) -> tuple[Ledger, float]:
    ledger = Ledger()
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        began = time.monotonic()
        deadline = began + SECONDS
        await asyncio.wait_for(
            asyncio.gather(
                *(one_client(client, i, profiles, deadline, ledger) for i in range(CLIENTS))
            ),
            timeout=SECONDS + 120,  # requests in flight at the deadline finish; none hangs
        )
        elapsed = time.monotonic() - began
    return ledger, elapsed


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def all_memory_ids(http: httpx.Client, profile: str) -> set[str]:
    ids: set[str] = set()
    cursor = None
    for _ in range(1_000):
        params: dict[str, Any] = {"limit": 100, "include_superseded": "true"}
        if cursor:
            params["cursor"] = cursor
        page = http.get(f"/v1/profiles/{profile}/memories", params=params)
        assert page.status_code == 200, page.text
        ids.update(m["id"] for m in page.json()["memories"])
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return ids
    raise AssertionError("pagination did not end")


def test_concurrent_mixed_load_loses_no_acknowledged_write(serve_app, http, profile_name):
    profiles = [f"{profile_name}-p{i}" for i in range(PROFILES)]
    for profile in profiles:  # activate them first: the run measures steady state
        assert http.post(
            f"/v1/profiles/{profile}/memories", json={"content": "Warm up."}
        ).is_success
    ledger, elapsed = asyncio.run(run_load(serve_app, profiles))

    total = sum(ledger.statuses.values())
    print(f"\n{CLIENTS} clients, {PROFILES} profiles, {elapsed:.1f} s: {total / elapsed:.1f} req/s")
    for op, samples in sorted(ledger.samples.items()):
        print(
            f"  {op:<9} n={len(samples):<5} p50={percentile(samples, 0.5):7.1f} ms"
            f"  p99={percentile(samples, 0.99):7.1f} ms"
        )
    print(f"  statuses: {dict(ledger.statuses)}")

    server_errors = {k: v for k, v in ledger.statuses.items() if k[1] >= 500 or k[1] < 0}
    assert not server_errors, (server_errors, ledger.errors[:10])
    unexpected = {k: v for k, v in ledger.statuses.items() if k[1] not in (200, 201)}
    assert not unexpected, (unexpected, ledger.errors[:10])
    assert total >= CLIENTS, "the load barely ran"
    assert all(ledger.samples[op] for op, _ in MIX), ledger.statuses

    # every acknowledged write is there, and nothing else appeared
    listed = {p["name"]: p for p in http.get("/v1/profiles").json()["profiles"]}
    for profile in profiles:
        acked_sessions = ledger.sessions[profile]
        sessions = http.get(f"/v1/profiles/{profile}/sessions").json()["sessions"]
        counts = {s["id"]: s["message_count"] for s in sessions}
        assert set(acked_sessions) == set(counts), profile
        assert all(counts[s] == 2 for s in acked_sessions), counts
        assert listed[profile]["messages"] == 2 * len(acked_sessions)
        assert listed[profile]["sessions"] == len(acked_sessions)
        assert ledger.memories[profile] <= all_memory_ids(http, profile), profile
    for profile, acked_sessions in ledger.sessions.items():
        for session, turns in list(acked_sessions.items())[:5]:  # spot-check the turns
            got = http.get(f"/v1/profiles/{profile}/sessions/{session}/messages").json()
            assert [m["content"] for m in got["messages"]] == turns


def test_remember_under_concurrent_recall_returns_the_memory(serve_app, http, profile_name):
    """One profile, remembers racing recalls: each remember must answer with what it wrote.

    benchmarks/load.py saw ``remember`` answer 404 memory_not_found (for the id it had just
    written) about once in 70 calls while recalls ran on the same profile.
    """
    base = f"/v1/profiles/{profile_name}"
    assert http.post(f"{base}/memories", json={"content": "Warm up the race."}).is_success
    outcomes: Counter[int] = Counter()
    errors: list[str] = []
    ids: set[str] = set()

    async def remembers(client: httpx.AsyncClient, index: int, deadline: float) -> None:
        for n in range(500):
            if time.monotonic() >= deadline:
                return
            content = f"Crate r{index}n{n} sits on shelf {n % 7} of aisle {index}."
            response = await client.post(f"{base}/memories", json={"content": content})
            outcomes[response.status_code] += 1
            if response.status_code == 201:
                ids.add(response.json()["id"])
            else:
                errors.append(response.text[:200])

    async def recalls(client: httpx.AsyncClient, deadline: float) -> None:
        for n in range(500):
            if time.monotonic() >= deadline:
                return
            query = {"query": f"Which shelf holds crate r{n % 4}n{n}?", "synthesize": False}
            outcomes[(await client.post(f"{base}/recall", json=query)).status_code] += 1

    async def main() -> None:
        async with httpx.AsyncClient(base_url=serve_app, timeout=60) as client:
            deadline = time.monotonic() + 8
            await asyncio.wait_for(
                asyncio.gather(
                    *(remembers(client, i, deadline) for i in range(4)),
                    *(recalls(client, deadline) for _ in range(4)),
                ),
                timeout=120,
            )

    asyncio.run(main())
    print(f"\nremember/recall race: {dict(outcomes)}")
    # a refused remember whose memory was written after all (a stale read, not a failed write)
    refused = [m[1] for e in errors if (m := re.search(r"Memory '([0-9a-f]+)'", e))]
    written = [i for i in refused if http.get(f"{base}/memories/{i}").status_code == 200]
    assert set(outcomes) <= {200, 201}, (dict(outcomes), errors[:3], f"{len(written)} written")
    assert ids <= all_memory_ids(http, profile_name)
