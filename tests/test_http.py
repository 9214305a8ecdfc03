"""The HTTP API v1 through real Ray Serve: operations, error shape and bad input."""

import json

import pytest
from conftest import wait_until

PNPM = "Use pnpm, not npm. And dark mode by default."


def ingest(http, profile, content=PNPM, session="s1"):
    body = {"session_id": session, "messages": [{"role": "user", "content": content}]}
    return http.post(f"/v1/profiles/{profile}/ingest", json=body)


def assert_error(response, status, code=None):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"code", "message"} and error["message"]
    assert "Traceback" not in error["message"]
    if code is not None:
        assert error["code"] == code
    return error


def test_health(http):
    assert http.get("/healthz").json()["status"] == "ok"


def test_ingest_then_recall_names_pnpm(http, profile_name):
    first = ingest(http, profile_name)
    assert first.status_code == 200, first.text
    assert first.json()["messages"] == {"stored": 1, "duplicates": 0}
    assert first.json()["memories"]["added"] == 2
    stages = first.json()["latency_ms"]
    assert {"extract", "reconcile", "write", "total"} <= set(stages)
    assert stages["total"] >= stages["extract"] + stages["write"] > 0
    recall = http.post(
        f"/v1/profiles/{profile_name}/recall",
        json={"query": "Which package manager does the user prefer?"},
    )
    assert recall.status_code == 200, recall.text
    result = recall.json()
    top = result["memories"][0]
    assert "pnpm" in top["content"] and top["type"] == "instruction"
    assert "topic_key" in top["channels"] and top["score"] > 0
    assert "pnpm" in result["answer"]
    assert result["latency_ms"]["total"] > 0


def test_reingest_counts_duplicates_and_adds_nothing(http, profile_name):
    ingest(http, profile_name)
    again = ingest(http, profile_name).json()
    assert again["messages"] == {"stored": 0, "duplicates": 1}
    assert again["memories"] == {"added": 0, "superseded": 0, "duplicates": 0}
    [info] = [p for p in http.get("/v1/profiles").json()["profiles"] if p["name"] == profile_name]
    assert (info["messages"], info["memories"], info["sessions"]) == (1, 2, 1)


def test_vectors_find_a_paraphrase_after_background_embedding(http, profile_name):
    ingest(http, profile_name, "My daughter Mia plays the violin every evening.")

    def vector_hit():
        result = http.post(
            f"/v1/profiles/{profile_name}/recall",
            json={"query": "child practising a string instrument", "include_messages": False},
        ).json()
        return [m for m in result["memories"] if "memory_vector" in m["channels"]]

    hits = wait_until(vector_hit, timeout=30)
    assert "violin" in hits[0]["content"]


def test_remember_get_history_and_forget(http, profile_name):
    base = f"/v1/profiles/{profile_name}/memories"
    old = http.post(base, json={"content": "I live in Budapest."})
    assert old.status_code == 201, old.text
    new = http.post(base, json={"content": "I moved to Vienna in May 2026."}).json()
    got = http.get(f"{base}/{old.json()['id']}").json()
    assert got["superseded_by"] == new["id"]
    assert [m["id"] for m in got["history"]] == [old.json()["id"], new["id"]]
    listed = http.get(base).json()["memories"]
    assert [m["id"] for m in listed] == [new["id"]]
    with_old = http.get(base, params={"include_superseded": "true"}).json()["memories"]
    assert len(with_old) == 2
    assert http.delete(f"{base}/{new['id']}").status_code == 204
    assert http.get(base).json()["memories"] == []
    assert http.get(f"{base}/{new['id']}").json()["forgotten_at"] is not None
    assert_error(http.delete(f"{base}/does-not-exist"), 404, "memory_not_found")
    assert_error(http.get(f"{base}/does-not-exist"), 404, "memory_not_found")


def test_remembering_the_same_thing_twice_is_a_duplicate(http, profile_name):
    base = f"/v1/profiles/{profile_name}/memories"
    first = http.post(base, json={"content": "The office wifi is called Bluebird."}).json()
    second = http.post(base, json={"content": "the office wifi is called  Bluebird"}).json()
    assert second["id"] == first["id"]
    assert len(http.get(base).json()["memories"]) == 1


def test_list_paginates_with_a_cursor_and_filters_by_type(http, profile_name):
    base = f"/v1/profiles/{profile_name}/memories"
    for index in range(5):
        http.post(base, json={"content": f"Garden fact number {index} is true.", "type": "fact"})
    http.post(base, json={"content": "Always answer in English.", "type": "instruction"})
    ids, cursor = [], None
    while True:
        params = {"limit": 2, "type": "fact", **({"cursor": cursor} if cursor else {})}
        page = http.get(base, params=params).json()
        ids.extend(m["id"] for m in page["memories"])
        assert all(m["type"] == "fact" for m in page["memories"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(ids) == len(set(ids)) == 5


def test_sessions_append_last_list_and_end(http, profile_name):
    base = f"/v1/profiles/{profile_name}/sessions"
    for content in (
        "I need to renew my passport by June.",
        "Sure, noted.",
        "My cat is named Tofu.",
    ):
        role = "assistant" if content.startswith("Sure") else "user"
        response = http.post(f"{base}/chat-1/messages", json={"role": role, "content": content})
        assert response.status_code == 201, response.text
    last = http.get(f"{base}/chat-1/messages", params={"last": 2}).json()["messages"]
    assert [m["content"] for m in last] == ["Sure, noted.", "My cat is named Tofu."]
    [session] = http.get(base).json()["sessions"]
    assert session["id"] == "chat-1" and session["message_count"] == 3
    assert session["ended_at"] is None
    ended = http.post(f"{base}/chat-1/end").json()
    assert ended["session"]["ended_at"] is not None
    assert ended["memories"]["added"] == 2
    types = {
        m["type"] for m in http.get(f"/v1/profiles/{profile_name}/memories").json()["memories"]
    }
    assert types == {"task", "fact"}
    assert_error(http.post(f"{base}/nope/end"), 404, "session_not_found")
    assert_error(http.get(f"{base}/nope/messages"), 404, "session_not_found")


def test_delete_profile_removes_its_data(http, profile_name):
    ingest(http, profile_name)
    assert http.delete(f"/v1/profiles/{profile_name}").status_code == 204
    names = [p["name"] for p in http.get("/v1/profiles").json()["profiles"]]
    assert profile_name not in names
    assert_error(http.post(f"/v1/profiles/{profile_name}/recall", json={"query": "pnpm"}), 404)
    assert_error(http.delete(f"/v1/profiles/{profile_name}"), 404, "profile_not_found")
    # the name can be used again, starting empty
    assert ingest(http, profile_name, "A brand new start for this profile.").status_code == 200
    assert len(http.get(f"/v1/profiles/{profile_name}/memories").json()["memories"]) == 1


def test_unknown_profile_is_404_for_reads(http):
    for response in (
        http.post("/v1/profiles/never-made/recall", json={"query": "anything"}),
        http.get("/v1/profiles/never-made/memories"),
        http.get("/v1/profiles/never-made/sessions"),
    ):
        error = assert_error(response, 404, "profile_not_found")
        assert "never-made" in error["message"]
    names = [p["name"] for p in http.get("/v1/profiles").json()["profiles"]]
    assert "never-made" not in names


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"{not json", "Malformed JSON"),
        (b"", "empty"),
        (b"[]", "Expected `object`"),
        (json.dumps({"session_id": "s1", "messages": "hello"}).encode(), "$.messages"),
        (json.dumps({"session_id": 5, "messages": []}).encode(), "$.session_id"),
        (
            json.dumps(
                {"session_id": "s1", "messages": [{"role": "boss", "content": "x"}]}
            ).encode(),
            "$.messages[0].role",
        ),
        (
            json.dumps(
                {"session_id": "s1", "messages": [{"role": "user", "content": "x", "mood": 1}]}
            ).encode(),
            "mood",
        ),
        (json.dumps({"session_id": "s1", "messages": [], "tenant": "other"}).encode(), "tenant"),
        (json.dumps({"session_id": "s1", "messages": []}).encode(), "must not be empty"),
        (
            json.dumps(
                {"session_id": "../up", "messages": [{"role": "user", "content": "x"}]}
            ).encode(),
            "$.session_id",
        ),
    ],
)
def test_bad_ingest_bodies_are_400_with_the_field(http, profile_name, body, fragment):
    ingest(http, profile_name, "Keep this memory safe please.")
    response = http.post(
        f"/v1/profiles/{profile_name}/ingest",
        content=body,
        headers={"content-type": "application/json"},
    )
    error = assert_error(response, 400, "invalid_request")
    assert fragment in error["message"]
    # nothing stored was lost or changed
    memories = http.get(f"/v1/profiles/{profile_name}/memories").json()["memories"]
    assert [m["content"] for m in memories] == ["Keep this memory safe please."]


def test_oversize_body_is_413(http, profile_name):
    huge = b'{"session_id": "s1", "messages": [' + b" " * (17 * 2**20) + b"]}"
    response = http.post(f"/v1/profiles/{profile_name}/ingest", content=huge)
    error = assert_error(response, 413, "payload_too_large")
    assert str(16 * 2**20) in error["message"]


def test_oversize_content_and_query_are_rejected(http, profile_name):
    long_content = "word " * 20_001
    response = ingest(http, profile_name, long_content)
    assert "100000" in assert_error(response, 413)["message"]
    ingest(http, profile_name)
    response = http.post(f"/v1/profiles/{profile_name}/recall", json={"query": "q" * 2001})
    assert "2000" in assert_error(response, 400)["message"]
    response = http.post(
        f"/v1/profiles/{profile_name}/recall", json={"query": "pnpm", "limit": 101}
    )
    assert "100" in assert_error(response, 400)["message"]
    response = http.get(f"/v1/profiles/{profile_name}/memories", params={"limit": "many"})
    assert_error(response, 400, "invalid_request")


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced',
        "pnpm AND OR NOT",
        "NEAR(pnpm npm)",
        "content:pnpm",
        "pn*",
        "(((",
        "^pnpm",
        "'; DROP TABLE memories; --",
        "?!",
    ],
)
def test_fts_syntax_in_queries_is_harmless(http, profile_name, query):
    ingest(http, profile_name)
    response = http.post(f"/v1/profiles/{profile_name}/recall", json={"query": query})
    assert response.status_code == 200, response.text
    assert isinstance(response.json()["memories"], list)
    assert len(http.get(f"/v1/profiles/{profile_name}/memories").json()["memories"]) == 2


@pytest.mark.parametrize(
    "name", ["..%2Fx", ".hidden", "a" * 129, "sp%20ace", "%C3%A9t%C3%A9", "a%00b", "%2E%2E"]
)
def test_invalid_profile_names_are_rejected(http, name):
    body = {"session_id": "s1", "messages": [{"role": "user", "content": "hello world again"}]}
    response = http.post(f"/v1/profiles/{name}/ingest", json=body)
    assert response.status_code in (400, 404), response.text
    assert "error" in response.json()
    names = [p["name"] for p in http.get("/v1/profiles").json()["profiles"]]
    assert all(n.isascii() and not n.startswith(".") and len(n) <= 128 for n in names)


def test_invalid_name_message_names_the_rule(http):
    error = assert_error(http.post("/v1/profiles/.hidden/recall", json={"query": "x"}), 400)
    assert "Invalid profile name" in error["message"]


def test_unknown_route_and_method_use_the_error_shape(http):
    assert_error(http.get("/v2/nothing"), 404, "not_found")
    assert_error(http.put("/v1/profiles/p/recall", json={}), 405, "method_not_allowed")


def test_openapi_documents_the_bodies(http):
    schema = http.get("/openapi.json").json()
    assert "IngestRequest" in schema["components"]["schemas"]
    ingest_op = schema["paths"]["/v1/profiles/{profile}/ingest"]["post"]
    assert ingest_op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "IngestRequest"
    )
    assert http.get("/docs").status_code == 200
