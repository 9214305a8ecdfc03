"""Procedural memory over real HTTP: the contract of issue 19, and bad input refused unharmed.

The passes run at the ``now`` each test sends, a day ahead of the real clock, so the
actor's own timer (at the real time, when a profile opens) closes nothing of theirs.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

NOW = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)


def at(minutes: float) -> str:
    return (NOW + timedelta(minutes=minutes)).isoformat()


def base(profile: str) -> str:
    return f"/v1/profiles/{profile}"


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def error(response: httpx.Response, status: int, code: str, fragment: str = "") -> None:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["code"] == code, body
    assert fragment in body["message"], body


def session_actions(session: str, steps: list[tuple[str, str, str | None]], start: float) -> list:
    """A session's actions on node ``n-<session>``, a second apart from ``start`` minutes."""
    return [
        {
            "session_id": session,
            "agent_id": "agent-1",
            "action_type": action_type,
            "target_type": "node",
            "target_ids": [f"n-{session}"],
            "outcome": outcome,
            **({"error_code": error_code} if error_code else {}),
            "intent": "rename a node",
            "duration_ms": 12.5,
            "at": (NOW + timedelta(minutes=start, seconds=index)).isoformat(),
        }
        for index, (action_type, outcome, error_code) in enumerate(steps)
    ]


FAIL = ("update_node", "failure", "NodeNotFoundError")
CREATE = ("create_node", "success", None)
UPDATE = ("update_node", "success", None)


def enable(http: httpx.Client, profile: str) -> None:
    state = ok(http.put(f"{base(profile)}/procedural", json={"enabled": True}))
    assert state["enabled"] is True


def learn_the_precondition(http: httpx.Client, profile: str) -> dict[str, Any]:
    """Six sessions in which update_node fails until create_node ran; evaluated. Returns
    the one pattern."""
    enable(http, profile)
    actions = []
    for number in range(6):
        actions += session_actions(f"s{number}", [FAIL, CREATE, UPDATE], start=number)
    captured = ok(http.post(f"{base(profile)}/actions", json={"actions": actions}))
    assert (captured["stored"], captured["duplicates"]) == (18, 0)
    result = ok(http.post(f"{base(profile)}/procedural/evaluate", json={"now": at(60)}))
    assert result["sequences_closed"] == 6
    assert result["patterns"]["promoted"] == 1
    [pattern] = ok(http.get(f"{base(profile)}/patterns"))["patterns"]
    return pattern


def test_actions_become_a_pattern_that_is_injected_before_the_action(http, profile_name):
    pattern = learn_the_precondition(http, profile_name)
    assert (pattern["action_type"], pattern["target_type"], pattern["error_code"]) == (
        "update_node",
        "node",
        "NodeNotFoundError",
    )
    assert (pattern["confidence"], pattern["samples"]) == (1.0, 6)
    assert pattern["suppressed"] is False and pattern["annotation"] is None
    assert pattern["recommendation"].endswith("run create_node first.")

    block = ok(
        http.post(
            f"{base(profile_name)}/patterns/inject",
            json={"action_type": "update_node", "target_type": "node", "target_ids": ["n-9"]},
        )
    )
    assert "run create_node first" in block["text"]
    assert [p["id"] for p in block["patterns"]] == [pattern["id"]]

    # The pattern with its (one-element) chain; the sequences, searchable by intent.
    fetched = ok(http.get(f"{base(profile_name)}/patterns/{pattern['id']}"))
    assert [p["id"] for p in fetched["history"]] == [pattern["id"]]
    found = ok(http.get(f"{base(profile_name)}/sequences", params={"query": "rename node"}))
    assert len(found["sequences"]) == 6
    assert found["sequences"][0]["intent"] == "rename a node"
    one = found["sequences"][0]
    assert ok(http.get(f"{base(profile_name)}/sequences/{one['id']}")) == one


def test_a_resent_batch_is_stored_once(http, profile_name):
    enable(http, profile_name)
    actions = session_actions("s1", [FAIL, CREATE, UPDATE], start=0)
    first = ok(http.post(f"{base(profile_name)}/actions", json={"actions": actions}))
    again = ok(http.post(f"{base(profile_name)}/actions", json={"actions": actions}))
    assert (first["stored"], first["duplicates"]) == (3, 0)
    assert (again["stored"], again["duplicates"]) == (0, 3)
    assert again["ids"] == first["ids"]
    with_ids = [{**actions[0], "id": "client-chosen-1", "at": at(5)}]
    stored = ok(http.post(f"{base(profile_name)}/actions", json={"actions": with_ids}))
    assert stored["ids"] == ["client-chosen-1"] and stored["stored"] == 1
    state = ok(http.get(f"{base(profile_name)}/procedural"))
    assert state["counts"]["actions"] == 4 and state["counts"]["open_actions"] == 4


def test_the_timeline_filters_and_pages(http, profile_name):
    enable(http, profile_name)
    actions = session_actions("s1", [FAIL, CREATE, UPDATE], start=0)
    actions += session_actions("s2", [UPDATE], start=10)
    ok(http.post(f"{base(profile_name)}/actions", json={"actions": actions}))
    url = f"{base(profile_name)}/actions"
    page = ok(http.get(url, params={"limit": 2}))
    assert [a["session_id"] for a in page["actions"]] == ["s2", "s1"]  # newest first
    rest = ok(http.get(url, params={"limit": 2, "cursor": page["next_cursor"]}))
    assert len(rest["actions"]) == 2 and rest["next_cursor"] is None
    failures = ok(http.get(url, params={"outcome": "failure"}))["actions"]
    assert [a["error_code"] for a in failures] == ["NodeNotFoundError"]
    creates = ok(http.get(url, params={"action_type": "create_node", "agent_id": "agent-1"}))
    assert len(creates["actions"]) == 1
    window = {"since": at(9), "until": at(11)}
    assert [a["session_id"] for a in ok(http.get(url, params=window))["actions"]] == ["s2"]


def test_ending_a_session_closes_its_sequence(http, profile_name):
    enable(http, profile_name)
    actions = session_actions("work-1", [FAIL, CREATE, UPDATE], start=0)
    ok(http.post(f"{base(profile_name)}/actions", json={"actions": actions}))
    ended = ok(http.post(f"{base(profile_name)}/sessions/work-1/end"))
    assert ended["session"]["id"] == "work-1" and ended["action_sequence_id"]
    [sequence] = ok(http.get(f"{base(profile_name)}/sequences"))["sequences"]
    assert sequence["id"] == ended["action_sequence_id"]
    assert (sequence["closed_by"], sequence["outcome"], sequence["action_count"]) == (
        "session_end",
        "success",
        3,
    )
    # A session with turns ends as before, and closes its actions too.
    ok(
        http.post(
            f"{base(profile_name)}/sessions/chat-1/messages",
            json={"role": "user", "content": "Rename node n-chat-1 please."},
        ),
        201,
    )
    ok(
        http.post(
            f"{base(profile_name)}/actions",
            json={"actions": session_actions("chat-1", [CREATE, UPDATE], start=5)},
        )
    )
    ended = ok(http.post(f"{base(profile_name)}/sessions/chat-1/end"))
    assert ended["session"]["message_count"] == 1 and ended["action_sequence_id"]
    error(http.post(f"{base(profile_name)}/sessions/never-seen/end"), 404, "session_not_found")


def test_annotate_and_suppress_a_pattern(http, profile_name):
    pattern = learn_the_precondition(http, profile_name)
    url = f"{base(profile_name)}/patterns/{pattern['id']}/annotate"
    inject = {"action_type": "update_node", "target_type": "node"}
    noted = ok(http.post(url, json={"annotation": "Nodes are created by the importer."}))
    assert noted["annotation"] == "Nodes are created by the importer."
    block = ok(http.post(f"{base(profile_name)}/patterns/inject", json=inject))
    assert "Operator note: Nodes are created by the importer." in block["text"]

    suppressed = ok(http.post(url, json={"suppressed": True}))
    assert suppressed["suppressed"] is True
    assert suppressed["annotation"] == noted["annotation"]  # absent fields stay as they are
    block = ok(http.post(f"{base(profile_name)}/patterns/inject", json=inject))
    assert block == {"text": "", "patterns": []}
    [listed] = ok(http.get(f"{base(profile_name)}/patterns"))["patterns"]
    assert listed["suppressed"] is True  # kept for audit, marked

    cleared = ok(http.post(url, json={"annotation": None, "suppressed": False}))
    assert cleared["annotation"] is None and cleared["suppressed"] is False


def test_disabling_stops_capture_and_injection_and_keeps_everything_readable(http, profile_name):
    pattern = learn_the_precondition(http, profile_name)
    state = ok(http.put(f"{base(profile_name)}/procedural", json={"enabled": False}))
    assert state["enabled"] is False and state["counts"]["actions"] == 18
    more = session_actions("s9", [FAIL], start=30)
    captured = ok(http.post(f"{base(profile_name)}/actions", json={"actions": more}))
    assert (captured["stored"], captured["ignored"]) == (0, 1)
    inject = {"action_type": "update_node", "target_type": "node"}
    assert ok(http.post(f"{base(profile_name)}/patterns/inject", json=inject))["text"] == ""
    assert ok(http.get(f"{base(profile_name)}/patterns"))["patterns"][0]["id"] == pattern["id"]
    assert len(ok(http.get(f"{base(profile_name)}/actions"))["actions"]) == 18


def test_metrics_builtins_custom_preview_benchmark_and_compare(http, profile_name):
    learn_the_precondition(http, profile_name)
    url = f"{base(profile_name)}/metrics"
    builtins = {m["id"] for m in ok(http.get(url))["metrics"] if m["builtin"]}
    assert builtins == {"task_success_rate", "efficiency_delta", "pattern_utilisation"}

    custom = {
        "id": "quick-tasks",
        "aggregation": "rate",
        "success_condition": "outcome == 'success' and action_count < 4",
        "event_filter": {"action_types": ["update_node"]},
        "window_days": 7,
    }
    preview = ok(http.post(f"{url}/preview", params={"now": at(60)}, json=custom))
    assert (preview["value"], preview["samples"]) == (1.0, 6)
    assert ok(http.get(url)).get("metrics") and "quick-tasks" not in {
        m["id"] for m in ok(http.get(url))["metrics"]
    }  # a preview saves nothing
    saved = ok(http.post(url, json=custom), 201)
    assert saved["builtin"] is False and saved["active"] is True
    error(http.post(url, json=custom), 409, "conflict", "exists already")

    ok(http.post(f"{base(profile_name)}/procedural/evaluate", json={"now": at(120)}))
    bench = ok(http.get(f"{url}/task_success_rate/benchmark"))
    last = bench["rows"][-1]
    assert last["at"].startswith(at(120)[:19]) and (last["value"], last["samples"]) == (1.0, 6)
    assert "delta_vs_baseline" in last

    window = {"start": at(-60), "end": at(120)}
    compared = ok(
        http.post(
            f"{url}/compare",
            json={
                "a": {"metric_id": "task_success_rate", **window},
                "b": {"metric_id": "quick-tasks", **window},
            },
        )
    )
    assert (compared["a"]["value"], compared["b"]["value"], compared["difference"]) == (
        1.0,
        1.0,
        0.0,
    )

    off = ok(http.patch(f"{url}/task_success_rate", json={"active": False}))
    assert off["active"] is False
    error(http.delete(f"{url}/task_success_rate"), 409, "conflict", "built in")
    ok(http.delete(f"{url}/quick-tasks"), 204)
    error(http.get(f"{url}/quick-tasks/benchmark"), 404, "metric_not_found")


def test_skills_add_search_fetch_update_and_delete(http, profile_name):
    url = f"{base(profile_name)}/skills"
    skill = {
        "name": "rename-node",
        "when_to_use": "When a node in the ontology must be renamed.",
        "steps": ["create_node on the node if it does not exist", "update_node with the name"],
        "inputs": [{"name": "node", "description": "the node to rename"}],
    }
    added = ok(http.post(url, json=skill), 201)
    assert added["status"] == "active" and added["source"] == "operator"
    error(http.post(url, json=skill), 409, "conflict", "exists already")
    other = {**skill, "name": "refund-invoice", "when_to_use": "When a customer wants money back."}
    ok(http.post(url, json=other), 201)

    listed = ok(http.get(url))["skills"]
    assert [s["name"] for s in listed] == ["refund-invoice", "rename-node"]
    hits = ok(http.get(url, params={"query": "rename an ontology node"}))["skills"]
    assert hits[0]["id"] == added["id"] and hits[0]["score"] > 0
    assert ok(http.get(f"{url}/{added['id']}"))["steps"] == skill["steps"]

    changed = ok(http.put(f"{url}/{added['id']}", json={**skill, "steps": ["update_node"]}))
    assert changed["steps"] == ["update_node"] and changed["id"] == added["id"]
    error(http.post(f"{url}/{added['id']}/adopt"), 409, "conflict", "not a candidate")
    ok(http.delete(f"{url}/{added['id']}"), 204)
    error(http.get(f"{url}/{added['id']}"), 404, "skill_not_found")


def test_a_routine_that_keeps_succeeding_is_proposed_for_review(http, profile_name):
    enable(http, profile_name)
    actions = []
    for number in range(5):
        actions += session_actions(f"ok{number}", [CREATE, UPDATE], start=number)
    ok(http.post(f"{base(profile_name)}/actions", json={"actions": actions}))
    result = ok(http.post(f"{base(profile_name)}/procedural/evaluate", json={"now": at(60)}))
    assert result["skills_proposed"] == 1
    url = f"{base(profile_name)}/skills"
    [candidate] = ok(http.get(url, params={"status": "candidate"}))["skills"]
    assert candidate["source"] == "proposed" and candidate["source_intent"] == "rename a node"
    assert ok(http.get(url))["skills"] == []  # not active until adopted
    adopted = ok(http.post(f"{url}/{candidate['id']}/adopt"))
    assert adopted["status"] == "active"
    assert [s["id"] for s in ok(http.get(url))["skills"]] == [candidate["id"]]


# ------------------------------------------------------------- bad input


def _action(**changes: Any) -> dict[str, Any]:
    return {**session_actions("bad", [FAIL], start=0)[0], **changes}


BAD_REQUESTS = [
    ("PUT", "/procedural", {"enabled": "yes"}, 400, "invalid_request", "$.enabled"),
    ("PUT", "/procedural", {"enabled": True, "extra": 1}, 400, "invalid_request", "extra"),
    ("POST", "/actions", {"actions": []}, 400, "invalid_request", "$.actions"),
    ("POST", "/actions", {"actions": [_action(outcome="meh")]}, 400, "invalid_request", "outcome"),
    ("POST", "/actions", {"actions": [_action(session_id="../x")]}, 400, "invalid_request", ""),
    ("POST", "/actions", {"actions": [_action(duration_ms=-1)]}, 400, "invalid_request", ""),
    ("POST", "/actions", {"actions": [_action(at="10000-01-01")]}, 400, "invalid_request", ""),
    ("POST", "/actions", {"actions": [_action(at="0001-01-01T00:00:00Z")]}, 400, "", "at"),
    ("POST", "/actions", {"actions": [_action(action_type="x" * 129)]}, 400, "", "action_type"),
    ("POST", "/actions", {"actions": [_action(target_ids=["n"] * 65)]}, 400, "", "target_ids"),
    ("POST", "/actions", {"actions": [_action()] * 1001}, 413, "payload_too_large", "1000"),
    ("POST", "/procedural/evaluate", {"now": "yesterday"}, 400, "invalid_request", "$.now"),
    ("POST", "/patterns/inject", {"action_type": "x"}, 400, "invalid_request", "target_type"),
    ("POST", "/patterns/nope/annotate", {"suppressed": "no"}, 400, "invalid_request", ""),
    ("POST", "/patterns/no-such-pattern/annotate", {}, 404, "pattern_not_found", ""),
    ("GET", "/patterns/no-such-pattern", None, 404, "pattern_not_found", ""),
    ("GET", "/patterns/.hidden", None, 400, "invalid_request", "pattern name"),
    ("GET", "/sequences/no-such", None, 404, "sequence_not_found", ""),
    ("GET", "/actions?cursor=garbage", None, 400, "invalid_request", "cursor"),
    ("GET", "/actions?cursor=2025-01-01|99999999999999999999", None, 400, "", "cursor"),
    ("GET", "/actions?outcome=meh", None, 400, "invalid_request", "outcome"),
    ("GET", "/actions?since=soon", None, 400, "invalid_request", "since"),
    ("GET", "/actions?limit=0", None, 400, "invalid_request", "limit"),
    ("GET", "/actions?agent_id=a/b", None, 400, "invalid_request", "agent name"),
    ("GET", "/sequences?query=%20", None, 400, "invalid_request", "blank"),
    (
        "POST",
        "/metrics",
        {"id": "m", "aggregation": "rate", "success_condition": "__import__('os')"},
        400,
        "invalid_condition",
        "unexpected '('",
    ),
    (
        "POST",
        "/metrics",
        {"id": "m", "aggregation": "rate", "success_condition": "outcome == 1;"},
        400,
        "",
        ";",
    ),
    (
        "POST",
        "/metrics",
        {"id": "m", "aggregation": "median"},
        400,
        "invalid_request",
        "aggregation",
    ),
    (
        "POST",
        "/metrics",
        {"id": "m", "aggregation": "rate", "window_days": 0},
        400,
        "",
        "window_days",
    ),
    (
        "POST",
        "/metrics/preview",
        {"id": "m", "aggregation": "rate", "success_condition": "duration > 5"},
        400,
        "",
        "duration",
    ),
    ("PATCH", "/metrics/no-such", {"active": False}, 404, "metric_not_found", ""),
    ("DELETE", "/metrics/no-such", None, 404, "metric_not_found", ""),
    ("GET", "/metrics/task_success_rate/benchmark?limit=0", None, 400, "", "limit"),
    ("POST", "/metrics/compare", {"a": {"metric_id": "x"}}, 400, "invalid_request", ""),
    ("POST", "/skills", {"name": "s", "when_to_use": "w", "steps": []}, 400, "", "steps"),
    ("POST", "/skills", {"name": "s", "when_to_use": "", "steps": ["a"]}, 400, "", "when_to_use"),
    ("GET", "/skills?status=old", None, 400, "invalid_request", "status"),
    ("GET", "/skills/no-such", None, 404, "skill_not_found", ""),
    ("POST", "/skills/no-such/keep", None, 400, "invalid_request", "decision"),
    ("DELETE", "/skills/no-such", None, 404, "skill_not_found", ""),
]


@pytest.fixture(scope="module")
def bad_target(serve_app: str) -> str:
    """A profile with a pattern, a custom metric and a skill, which bad requests must not touch."""
    profile = "t-procedural-bad-input"
    with httpx.Client(base_url=serve_app, timeout=60) as http:
        learn_the_precondition(http, profile)
        metric = {"id": "kept", "aggregation": "rate", "success_condition": "outcome == 'success'"}
        ok(http.post(f"{base(profile)}/metrics", json=metric), 201)
        skill = {"name": "kept", "when_to_use": "Always.", "steps": ["one"]}
        ok(http.post(f"{base(profile)}/skills", json=skill), 201)
    return profile


def _everything(http: httpx.Client, profile: str) -> dict[str, Any]:
    return {
        "state": ok(http.get(f"{base(profile)}/procedural")),
        "actions": ok(http.get(f"{base(profile)}/actions", params={"limit": 100})),
        "sequences": ok(http.get(f"{base(profile)}/sequences", params={"limit": 100})),
        "patterns": ok(http.get(f"{base(profile)}/patterns", params={"include_inactive": True})),
        "metrics": ok(http.get(f"{base(profile)}/metrics")),
        "skills": ok(http.get(f"{base(profile)}/skills", params={"status": "all"})),
    }


@pytest.mark.parametrize(("method", "path", "body", "status", "code", "fragment"), BAD_REQUESTS)
def test_bad_requests_are_refused_and_harm_nothing(
    http, bad_target, method, path, body, status, code, fragment
):
    before = _everything(http, bad_target)
    response = http.request(method, base(bad_target) + path, json=body)
    assert response.status_code == status, response.text
    detail = response.json()["error"]
    assert not code or detail["code"] == code, detail
    assert fragment in detail["message"], detail
    assert _everything(http, bad_target) == before


def test_unknown_profiles_are_404_for_reads(http):
    for path in ("/procedural", "/actions", "/patterns", "/metrics", "/skills"):
        error(http.get(base("t-procedural-never-made") + path), 404, "profile_not_found")


def test_the_openapi_document_has_the_procedural_bodies(http):
    document = ok(http.get("/openapi.json"))
    assert {"CaptureRequest", "Injection", "MetricIn", "SkillIn"} <= set(
        document["components"]["schemas"]
    )
    assert "/v1/profiles/{profile}/patterns/inject" in document["paths"]
