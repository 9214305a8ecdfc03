"""Truth scenarios: does recall tell the current truth, at once, and keep forgotten things out?

Each scenario writes to a fresh profile over the HTTP API (ingest, remember,
append, forget, erase), then asks one question and checks what an agent would
rely on: the current fact ranks first, the answer states it and not what it
replaced, a write is recallable by the very next call, a forgotten fact stays
out of every hit. The same scenarios run as tests (tests/test_truth.py) with
the embedded defaults.

    python benchmarks/truth.py            # a private server; prints a table, saves JSON
"""

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

Action = Callable[[httpx.Client, str], None]


# ------------------------------------------------------------------ actions


def ingest(session: str, *turns: str | tuple[str, str], at: str | None = None) -> Action:
    """Store a conversation: user turns (text) or (role, text) pairs, all at time ``at``."""

    def run(http: httpx.Client, profile: str) -> None:
        messages = []
        for turn in turns:
            role, content = ("user", turn) if isinstance(turn, str) else turn
            messages.append(
                {"role": role, "content": content, **({"created_at": at} if at else {})}
            )
        _ok(
            http.post(
                f"/v1/profiles/{profile}/ingest", json={"session_id": session, "messages": messages}
            )
        )

    return run


def remember(content: str) -> Action:
    def run(http: httpx.Client, profile: str) -> None:
        _ok(http.post(f"/v1/profiles/{profile}/memories", json={"content": content}))

    return run


def append(session: str, content: str, role: str = "user") -> Action:
    def run(http: httpx.Client, profile: str) -> None:
        body = {"role": role, "content": content}
        _ok(http.post(f"/v1/profiles/{profile}/sessions/{session}/messages", json=body))

    return run


def forget(containing: str) -> Action:
    """Forget every current memory whose content contains ``containing``."""

    def run(http: httpx.Client, profile: str) -> None:
        for memory in _memories(http, profile, containing):
            _ok(http.delete(f"/v1/profiles/{profile}/memories/{memory['id']}"))

    return run


def _memories(http: httpx.Client, profile: str, containing: str) -> list[dict[str, Any]]:
    page = _ok(http.get(f"/v1/profiles/{profile}/memories", params={"limit": 100})).json()
    found = [m for m in page["memories"] if containing.lower() in m["content"].lower()]
    if not found:
        raise AssertionError(f"no memory contains {containing!r}")
    return found


def _ok(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        raise AssertionError(
            f"{response.request.method} {response.request.url.path}: {response.status_code} {response.text}"
        )
    return response


# ---------------------------------------------------------------- scenarios


@dataclass
class Scenario:
    """Writes, then one question, and what the answer must and must not say."""

    name: str
    writes: list[Action]
    query: str
    current: str  # the top hit and the answer must say this (case-insensitive)
    replaced: Sequence[str] = ()  # the answer must not say these; no hit above the current one may
    gone: Sequence[str] = ()  # no hit at all may say these (forgotten or erased)
    as_of: str | None = None
    expect_in_answer: Sequence[str] = ()  # more the answer must say (a resolved date, ...)
    recall: dict[str, Any] = field(default_factory=dict)


SCENARIOS = [
    Scenario(
        "move",
        [
            ingest("s1", "I live in Budapest.", at="2026-01-10T09:00:00Z"),
            remember("I moved to Vienna in May 2026."),
        ],
        "Where does the user live?",
        current="Vienna",
        replaced=["Budapest"],
    ),
    Scenario(
        "move, both ingested",
        [
            ingest("s1", "I'm based in Lisbon these days.", at="2025-11-02T10:00:00Z"),
            ingest(
                "s2", "Quick update: I relocated to Porto last month.", at="2026-03-15T10:00:00Z"
            ),
        ],
        "Which city is the user in?",
        current="Porto",
        replaced=["Lisbon"],
    ),
    Scenario(
        "job change",
        [
            ingest("s1", "I work at Acme Corp as a data engineer.", at="2025-06-01T12:00:00Z"),
            ingest(
                "s2", "I work for Globex now, on their platform team.", at="2026-02-01T12:00:00Z"
            ),
        ],
        "Where does the user work?",
        current="Globex",
        replaced=["Acme"],
    ),
    Scenario(
        "switched editor",
        [
            ingest("s1", "I use VS Code for everything.", at="2025-09-01T08:00:00Z"),
            ingest(
                "s2", "I switched to Neovim, it's much faster for me.", at="2026-01-20T08:00:00Z"
            ),
        ],
        "Which editor does the user use?",
        current="Neovim",
        replaced=["VS Code"],
    ),
    Scenario(
        "package manager back and forth",
        [
            ingest("s1", "Use pnpm, not npm.", at="2026-01-05T08:00:00Z"),
            ingest("s2", "Actually, switch back to npm for this repo.", at="2026-02-05T08:00:00Z"),
        ],
        "Which package manager should I use?",
        current="npm",
        replaced=["pnpm"],
    ),
    Scenario(
        "diet",
        [
            ingest("s1", "I'm vegetarian, so no meat for me.", at="2025-08-01T18:00:00Z"),
            ingest(
                "s2", "I'm fully vegan now, no dairy or eggs either.", at="2026-04-01T18:00:00Z"
            ),
        ],
        "What does the user eat?",
        current="vegan",
        replaced=["vegetarian"],
    ),
    Scenario(
        "database version",
        [
            ingest("s1", "We run Postgres 15 in production.", at="2025-10-01T09:00:00Z"),
            ingest(
                "s2",
                "We upgraded production to Postgres 16 over the weekend.",
                at="2026-03-01T09:00:00Z",
            ),
        ],
        "Which Postgres version is in production?",
        current="16",
        replaced=["Postgres 15"],
    ),
    Scenario(
        "phone number",
        [
            ingest("s1", "My phone number is 555-0100.", at="2025-12-01T09:00:00Z"),
            ingest(
                "s2",
                "My new phone number is 555-0199, the old one is gone.",
                at="2026-02-11T09:00:00Z",
            ),
        ],
        "What is the user's phone number?",
        current="555-0199",
        replaced=["555-0100"],
    ),
    Scenario(
        "build order instruction",
        [
            ingest(
                "s1", "Always run the migrations before the build step.", at="2026-01-02T09:00:00Z"
            ),
            ingest("s2", "Run the build before migrations from now on.", at="2026-03-02T09:00:00Z"),
        ],
        "In which order should the build and the migrations run?",
        current="build before migrations",
        replaced=["migrations before the build"],
    ),
    Scenario(
        "remember then recall a paraphrase",
        [remember("My daughter's name is Lila.")],
        "What is my kid called?",
        current="Lila",
    ),
    Scenario(
        "append then recall a paraphrase",
        [append("chat-1", "My flight to Oslo lands at 6pm on Thursday.")],
        "When does my plane arrive?",
        current="6pm",
    ),
    Scenario(
        "ingest then recall at once",
        [ingest("s1", "The staging database password rotates every 30 days.", "Noted.")],
        "How often do the staging credentials change?",
        current="30 days",
    ),
    Scenario(
        "forget",
        [
            ingest(
                "s1",
                "I'm allergic to peanuts.",
                "I love hiking in the Alps.",
                at="2026-01-15T09:00:00Z",
            ),
            forget("peanuts"),
        ],
        "What is the user allergic to?",
        current="",
        gone=["peanuts"],
    ),
    Scenario(
        "yesterday, as of a date",
        [
            ingest(
                "s1", "Yesterday I finally fixed the flaky login test.", at="2026-03-10T17:00:00Z"
            ),
            ingest("s2", "Today I'm reviewing the billing refactor.", at="2026-03-12T09:00:00Z"),
        ],
        "What did I do yesterday?",
        current="billing refactor",
        as_of="2026-03-13T09:00:00Z",
    ),
    Scenario(
        "next Friday resolves",
        [ingest("s1", "I need to submit the grant report next Friday.", at="2026-03-02T10:00:00Z")],
        "When is the grant report due?",
        current="grant report",
        expect_in_answer=["2026-03-06"],
    ),
]


# ------------------------------------------------------------------ checking


@dataclass
class Outcome:
    scenario: str
    held: bool
    problems: list[str]
    answer: str
    top: str
    latency_ms: float


def check(scenario: Scenario, result: dict[str, Any], latency_ms: float) -> Outcome:
    """What in a recall result breaks the scenario's expectations."""
    hits = result["memories"]
    answer = result["answer"]
    problems = []
    current = scenario.current.lower()
    first_current = next(
        (i for i, hit in enumerate(hits) if current and current in hit["content"].lower()), None
    )
    if current and (first_current is None or first_current != 0):
        problems.append(f"top hit does not say {scenario.current!r}")
    if current and current not in answer.lower():
        problems.append(f"answer does not say {scenario.current!r}")
    for old in scenario.replaced:
        if old.lower() in answer.lower():
            problems.append(f"answer says the replaced {old!r}")
        above = hits[: first_current if first_current is not None else len(hits)]
        if any(old.lower() in hit["content"].lower() for hit in above):
            problems.append(f"a hit saying {old!r} ranks above the current fact")
        if any(
            old.lower() in h["content"].lower() and not h.get("stale")
            for h in hits
            if h["type"] == "message"
        ):
            problems.append(f"a turn saying {old!r} is not marked stale")
    for erased in scenario.gone:
        if any(erased.lower() in hit["content"].lower() for hit in hits):
            problems.append(f"a hit still says {erased!r}")
        if erased.lower() in answer.lower():
            problems.append(f"the answer still says {erased!r}")
    for text in scenario.expect_in_answer:
        if text.lower() not in answer.lower():
            problems.append(f"answer does not say {text!r}")
    return Outcome(
        scenario=scenario.name,
        held=not problems,
        problems=problems,
        answer=answer,
        top=hits[0]["content"] if hits else "",
        latency_ms=latency_ms,
    )


def run_scenario(http: httpx.Client, scenario: Scenario, profile: str | None = None) -> Outcome:
    """Write the scenario into a fresh profile, ask its question at once, and check the result."""
    profile = profile or f"truth-{uuid.uuid4().hex[:12]}"
    for write in scenario.writes:
        write(http, profile)
    body: dict[str, Any] = {"query": scenario.query, **scenario.recall}
    if scenario.as_of:
        body["as_of"] = scenario.as_of
    started = time.perf_counter()
    result = _ok(http.post(f"/v1/profiles/{profile}/recall", json=body)).json()
    return check(scenario, result, (time.perf_counter() - started) * 1000)


# ---------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a running server (default: start a private one)")
    parser.add_argument("--token", default=None)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from _common import raymem_server, save_json

    def run_all(url: str) -> list[Outcome]:
        headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
        with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
            return [run_scenario(http, scenario) for scenario in SCENARIOS]

    if args.url:
        outcomes = run_all(args.url)
    else:
        with raymem_server() as (_client, settings):
            outcomes = run_all(f"http://127.0.0.1:{settings.server.port}")
    print(f"{'scenario':40} {'held':5} {'ms':>7}  problems")
    for outcome in outcomes:
        print(
            f"{outcome.scenario:40} {'yes' if outcome.held else 'NO':5} {outcome.latency_ms:7.1f}  {'; '.join(outcome.problems)}"
        )
    held = sum(outcome.held for outcome in outcomes)
    latencies = [outcome.latency_ms for outcome in outcomes]
    print(
        f"\n{held} of {len(outcomes)} scenarios hold; recall p50 {statistics.median(latencies):.1f} ms"
    )
    path = save_json(
        "truth",
        {
            "held": held,
            "total": len(outcomes),
            "outcomes": [outcome.__dict__ for outcome in outcomes],
        },
    )
    print(f"saved {path}")
    return 0 if held == len(outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
