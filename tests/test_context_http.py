"""The agent's context over real HTTP through Ray Serve: core blocks, work items, working
memory, episodes, context assembly, get by reference and flush; bad input is a clear 4xx
that changes nothing. Also the sync and async clients and the in-cluster profile."""

import asyncio

import pytest
from conftest import wait_until
from test_http import assert_error

import raymem
from raymem import AsyncClient, Client
from raymem.client import RaymemHTTPError
from raymem.types_context import ResolvedBlockEntry, ResolvedEpisode

BUDGETS = [1, 5, 20, 60, 150, 400, 1_000, 2_500, 8_000]


def base(profile: str) -> str:
    return f"/v1/profiles/{profile}"


def add_entry(http, profile, content, block="user"):
    return http.post(f"{base(profile)}/blocks/{block}/entries", json={"content": content})


def blocks(http, profile) -> dict:
    response = http.get(f"{base(profile)}/blocks")
    assert response.status_code == 200, response.text
    return {block["name"]: block for block in response.json()["blocks"]}


def context(http, profile, **body):
    return http.post(f"{base(profile)}/context", json=body)


def ingest(http, profile, *contents, session="s1"):
    messages = [{"role": "user", "content": content} for content in contents]
    response = http.post(
        f"{base(profile)}/ingest", json={"session_id": session, "messages": messages}
    )
    assert response.status_code == 200, response.text
    return response.json()


# ------------------------------------------------------------------ blocks


def test_blocks_follow_the_contract(http, profile_name):
    assert add_entry(http, profile_name, "Prefers  concise answers.").status_code == 201
    defaults = blocks(http, profile_name)
    assert (defaults["user"]["limit"], defaults["project"]["limit"]) == (1_375, 2_200)
    assert defaults["user"]["entries"] == ["Prefers  concise answers."]  # stored as written
    assert defaults["project"] == {
        "name": "project",
        "limit": 2_200,
        "size": 0,
        "entries": [],
        "entry_refs": [],
    }

    duplicate = add_entry(http, profile_name, "  prefers CONCISE answers. ")
    assert duplicate.status_code == 200, duplicate.text
    assert duplicate.json()["duplicate"] is True
    assert len(blocks(http, profile_name)["user"]["entries"]) == 1

    replaced = http.put(
        f"{base(profile_name)}/blocks/user/entries",
        json={"old": "PREFERS concise answers.", "new": "Prefers short answers with code."},
    )
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["block"]["entries"] == ["Prefers short answers with code."]
    # Never by substring: a part of an entry names nothing.
    partial = http.request(
        "DELETE", f"{base(profile_name)}/blocks/user/entries", json={"content": "short answers"}
    )
    assert_error(partial, 404, "entry_not_found")
    removed = http.request(
        "DELETE",
        f"{base(profile_name)}/blocks/user/entries",
        json={"content": "prefers short answers with code."},
    )
    assert removed.status_code == 200, removed.text
    assert removed.json()["entries"] == [] and removed.json()["size"] == 0


def test_a_full_block_is_refused_with_its_size_and_limit_and_nothing_changes(http, profile_name):
    created = http.put(f"{base(profile_name)}/blocks/style", json={"limit": 40})
    assert created.status_code == 201, created.text
    assert http.put(f"{base(profile_name)}/blocks/style", json={"limit": 60}).status_code == 200
    assert add_entry(http, profile_name, "Tabs, not spaces.", "style").status_code == 201
    before = blocks(http, profile_name)["style"]
    error = assert_error(add_entry(http, profile_name, "x" * 50, "style"), 409, "block_full")
    assert "60" in error["message"] and str(before["size"]) in error["message"]
    assert blocks(http, profile_name)["style"] == before
    # The separator joins entries: the block's size is the rendered block.
    assert add_entry(http, profile_name, "Line length 100.", "style").status_code == 201
    after = blocks(http, profile_name)["style"]
    assert after["size"] == len("\n§\n".join(after["entries"]))


def test_bad_block_requests_are_4xx_and_change_nothing(http, profile_name):
    assert add_entry(http, profile_name, "Lives in Vienna.").status_code == 201
    before = blocks(http, profile_name)
    path = f"{base(profile_name)}/blocks"
    assert_error(http.put(f"{path}/.hidden", json={"limit": 10}), 400, "invalid_request")
    assert_error(http.put(f"{path}/style", json={"limit": 0}), 400, "invalid_request")
    assert_error(http.put(f"{path}/style", json={"limit": "ten"}), 400, "invalid_request")
    assert_error(http.put(f"{path}/style", json={"limit": 10**9}), 400, "invalid_request")
    assert_error(add_entry(http, profile_name, "a § b"), 400, "invalid_request")
    assert_error(add_entry(http, profile_name, "   "), 400, "invalid_request")
    assert_error(add_entry(http, profile_name, "hello", "no-such-block"), 404, "block_not_found")
    assert_error(
        http.post(f"{path}/user/entries", json={"content": "x", "extra": 1}), 400, "invalid_request"
    )
    assert_error(http.post(f"{path}/user/entries", content=b"{not json"), 400, "invalid_request")
    assert_error(http.delete(f"{path}/user"), 400, "invalid_request")  # a default block
    assert_error(http.delete(f"{path}/never-made"), 404, "block_not_found")
    assert blocks(http, profile_name) == before


# ------------------------------------------------- work items and episodes


def test_a_work_item_opens_updates_closes_into_an_episode(http, profile_name):
    opened = http.post(
        f"{base(profile_name)}/work-items",
        json={
            "objective": "Fix the flaky upload test in tests/test_upload.py",
            "session_id": "s1",
            "delivery_target": "PR against main",
            "todos": ["Reproduce the failure", "Add a retry"],
            "waits": ["CI on PR #42"],
        },
    )
    assert opened.status_code == 201, opened.text
    item = opened.json()
    updated = http.patch(
        f"{base(profile_name)}/work-items/{item['id']}",
        json={"check_todos": ["reproduce the FAILURE"], "add_followups": ["Tell QA"]},
    )
    assert updated.status_code == 200, updated.text
    assert [t["done"] for t in updated.json()["todos"]] == [True, False]

    snapshot = http.get(f"{base(profile_name)}/working-memory", params={"session_id": "s1"})
    assert snapshot.status_code == 200
    assert [w["id"] for w in snapshot.json()["work_items"]] == [item["id"]]
    again = http.get(f"{base(profile_name)}/working-memory", params={"session_id": "s1"})
    assert again.content == snapshot.content  # deterministic, byte for byte

    closed = http.post(
        f"{base(profile_name)}/work-items/{item['id']}/close",
        json={"outcome": "Decided to retry twice; tests passed on CI."},
    )
    assert closed.status_code == 200, closed.text
    episode = closed.json()["episode"]
    assert closed.json()["work_item"]["status"] == "closed"
    assert episode["work_item_id"] == item["id"] and episode["trigger"] == "work_item"
    assert "tests/test_upload.py" in episode["resources"] and "#42" in episode["resources"]
    assert episode["verification"] and episode["decisions"]
    assert "Tell QA" in " ".join(episode["followups"])
    assert http.get(f"{base(profile_name)}/working-memory").json()["work_items"] == []

    listed = http.get(f"{base(profile_name)}/episodes").json()["episodes"]
    assert [e["id"] for e in listed] == [episode["id"]]
    assert http.get(f"{base(profile_name)}/episodes/{episode['id']}").json() == episode
    resolved = http.get(f"{base(profile_name)}/refs/{episode['source_ref']}").json()
    assert resolved["kind"] == "episode" and resolved["episode"] == episode
    items = http.get(f"{base(profile_name)}/work-items", params={"status": "closed"}).json()
    assert [w["id"] for w in items["work_items"]] == [item["id"]]

    # Closing twice, or changing a closed item, is a conflict that changes nothing.
    path = f"{base(profile_name)}/work-items/{item['id']}"
    assert_error(http.post(f"{path}/close", json={}), 409, "work_item_closed")
    assert_error(http.patch(path, json={"add_todos": ["more"]}), 409, "work_item_closed")
    assert len(http.get(f"{base(profile_name)}/episodes").json()["episodes"]) == 1


def test_bad_work_item_requests_are_4xx_and_change_nothing(http, profile_name):
    path = f"{base(profile_name)}/work-items"
    opened = http.post(path, json={"objective": "Ship 1.0", "todos": ["Write notes"]}).json()
    before = http.get(f"{path}/{opened['id']}").json()
    assert_error(http.post(path, json={"objective": ""}), 400, "invalid_request")
    assert_error(http.post(path, json={"objective": "x", "bogus": 1}), 400, "invalid_request")
    assert_error(http.post(path, json={"objective": "x", "todos": "one"}), 400, "invalid_request")
    assert_error(http.post(path, json={"objective": "x" * 200_000}), 400, "invalid_request")
    assert_error(
        http.patch(f"{path}/{opened['id']}", json={"check_todos": ["Write"]}),
        404,
        "entry_not_found",
    )
    assert_error(http.patch(f"{path}/nope", json={}), 404, "work_item_not_found")
    assert_error(http.post(f"{path}/nope/close", json={}), 404, "work_item_not_found")
    assert_error(http.get(path, params={"status": "half"}), 400, "invalid_request")
    assert_error(http.get(path, params={"cursor": "abc"}), 400, "invalid_request")
    assert_error(http.get(path, params={"limit": 10_000}), 400, "invalid_request")
    assert_error(
        http.get(f"{base(profile_name)}/working-memory", params={"session_id": "../x"}),
        400,
        "invalid_request",
    )
    assert http.get(f"{path}/{opened['id']}").json() == before
    assert [w["id"] for w in http.get(path).json()["work_items"]] == [opened["id"]]


def test_ending_a_session_finalises_its_episode(http, profile_name):
    turns = [
        "Let's migrate the API docs to https://docs.example.com/api this week.",
        "We'll keep the old URLs as redirects, agreed with the team.",
    ]
    ingest(http, profile_name, *turns, session="docs")
    ended = http.post(f"{base(profile_name)}/sessions/docs/end")
    assert ended.status_code == 200, ended.text
    episode_id = ended.json()["episode_id"]
    assert episode_id
    episode = http.get(f"{base(profile_name)}/episodes/{episode_id}").json()
    assert episode["trigger"] == "session" and episode["session_id"] == "docs"
    assert "https://docs.example.com/api" in episode["resources"]
    assert len(episode["source_message_ids"]) == 2
    # Nothing new since: ending it again finalises no second episode.
    assert http.post(f"{base(profile_name)}/sessions/docs/end").json()["episode_id"] is None
    page = http.get(f"{base(profile_name)}/episodes", params={"session_id": "docs"}).json()
    assert [e["id"] for e in page["episodes"]] == [episode_id]


# ------------------------------------------------------------ the context


def fill(http, profile):
    """Blocks, a work item, facts (one replaced), an episode and a session's turns."""
    assert add_entry(http, profile, "Name: Dana. Prefers concise answers.").status_code == 201
    assert add_entry(http, profile, "Repo: raymem, Python 3.12.", "project").status_code == 201
    http.post(
        f"{base(profile)}/work-items",
        json={"objective": "Release 0.4", "todos": ["Tag the release"], "session_id": "s1"},
    )
    ingest(http, profile, "I live in Budapest.", session="old")
    http.post(f"{base(profile)}/memories", json={"content": "I moved to Vienna in May 2026."})
    ingest(
        http,
        profile,
        "My sister Ana is visiting next week.",
        "I want the release notes in Markdown.",
        session="s1",
    )


def test_context_sections_come_in_order_within_every_budget(http, profile_name):
    fill(http, profile_name)
    big = context(http, profile_name, query="Where does the user live?", session_id="s1")
    assert big.status_code == 200, big.text
    result = big.json()
    names = [section["name"] for section in result["sections"]]
    assert names == ["core", "working_memory", "memories", "episodes", "recent_turns"]
    assert result["text"].startswith("## Core memory")
    assert {"core", "working_memory", "memories", "episodes", "recent_turns", "total"} <= set(
        result["latency_ms"]
    )
    for budget in BUDGETS:
        for fmt in ("markdown", "text"):
            answer = context(
                http,
                profile_name,
                query="Where does the user live?",
                session_id="s1",
                budget_chars=budget,
                format=fmt,
            )
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert len(body["text"]) <= budget == body["budget_chars"], (budget, fmt)
            shown = [s["name"] for s in body["sections"]]
            assert shown == names
            if budget < 400:
                assert body["dropped"]  # something had to be cut, and it says what
    tokens = context(http, profile_name, query="Vienna", budget_tokens=100).json()
    assert tokens["budget_chars"] == 400 and len(tokens["text"]) <= 400


def test_context_memories_are_the_current_truth_and_every_ref_resolves(http, profile_name):
    fill(http, profile_name)
    result = context(
        http, profile_name, query="Where does the user live?", budget_chars=8_000
    ).json()
    sections = {section["name"]: section for section in result["sections"]}
    memories = " ".join(item["content"] for item in sections["memories"]["items"])
    assert "Vienna" in memories
    assert "Budapest" not in memories  # a stale turn: recall marks it, the context leaves it
    recalled = http.post(
        f"{base(profile_name)}/recall", json={"query": "Where does the user live?"}
    ).json()
    assert all(hit["source_ref"] for hit in recalled["memories"])
    refs = [item["source_ref"] for s in result["sections"] for item in s["items"]]
    refs += [hit["source_ref"] for hit in recalled["memories"]]
    assert refs
    for ref in refs:
        resolved = http.get(f"{base(profile_name)}/refs/{ref}")
        assert resolved.status_code == 200, (ref, resolved.text)
        assert resolved.json()["source_ref"] == ref
        assert resolved.json()["kind"] in {
            "memory",
            "message",
            "episode",
            "block_entry",
            "work_item",
        }
    turn = next(hit for hit in recalled["memories"] if hit["type"] == "message")
    resolved = http.get(f"{base(profile_name)}/refs/{turn['source_ref']}").json()
    assert resolved["message"]["id"] == turn["id"]


def test_the_prefix_stays_the_same_across_turns_until_a_block_changes(http, profile_name):
    fill(http, profile_name)

    def prefix(query: str) -> str:
        body = context(http, profile_name, query=query, session_id="s1", budget_chars=2_000).json()
        slow = {s["name"]: s["chars"] for s in body["sections"]}
        return body["text"][: slow["core"] + 1 + slow["working_memory"]]  # a blank line between

    first = prefix("Where does the user live?")
    assert first and first == prefix("Who is visiting next week?")
    assert add_entry(http, profile_name, "Timezone: Europe/Vienna.").status_code == 201
    assert prefix("Who is visiting next week?") != first


def test_bad_context_requests_are_4xx(http, profile_name):
    fill(http, profile_name)
    before = blocks(http, profile_name)
    bad = [
        {"query": "x", "budget_chars": 100, "budget_tokens": 10},
        {"query": "x", "budget_chars": 0},
        {"query": "x", "budget_chars": -5},
        {"query": "x", "budget_chars": 10**9},
        {"query": "x", "budget_chars": "many"},
        {"query": "x" * 5_000},
        {"query": "x", "format": "html"},
        {"query": "x", "session_id": "../etc"},
        {"query": "x", "as_of": "not a date"},
        {"query": "x", "surprise": True},
    ]
    for body in bad:
        assert_error(context(http, profile_name, **body), 400, None)
    assert_error(http.post(f"{base(profile_name)}/context", content=b""), 400, "invalid_request")
    assert blocks(http, profile_name) == before


def test_refs_that_are_unknown_or_malformed(http, profile_name):
    assert add_entry(http, profile_name, "Likes tea.").status_code == 201
    [ref] = blocks(http, profile_name)["user"]["entry_refs"]
    resolved = http.get(f"{base(profile_name)}/refs/{ref}").json()
    assert resolved == {"kind": "block_entry", "source_ref": ref, "block": "user",
                        "content": "Likes tea.", "position": 0}  # fmt: skip
    for unknown in ("mem_nope", "msg_nope", "epi_nope", "wrk_nope", "blk_user_0123456789ab"):
        assert_error(http.get(f"{base(profile_name)}/refs/{unknown}"), 404, "ref_not_found")
    for malformed in ("nope", "zzz_1", "blk_user_xyz", "mem_"):
        assert_error(http.get(f"{base(profile_name)}/refs/{malformed}"), 400, "invalid_ref")
    assert_error(http.get(f"{base(profile_name)}/refs/{'m' * 600}"), 400, "invalid_request")


def test_flush_stores_what_is_durable_and_skips_what_a_block_says(http, profile_name):
    assert add_entry(http, profile_name, "I prefer dark mode in every editor.").status_code == 201
    messages = [
        {"role": "user", "content": "I prefer dark mode in every editor."},
        {"role": "user", "content": "My cat Miso is twelve years old."},
    ]
    flushed = http.post(
        f"{base(profile_name)}/flush", json={"session_id": "s9", "messages": messages}
    )
    assert flushed.status_code == 200, flushed.text
    result = flushed.json()
    assert result["error"] is None and result["messages"]["stored"] == 2
    assert result["known"] >= 1 and result["memory_ids"]
    stored = http.get(f"{base(profile_name)}/memories").json()["memories"]
    contents = " ".join(m["content"] for m in stored)
    assert "Miso" in contents and "dark mode" not in contents
    for body in (
        {"session_id": "s9", "messages": []},
        {"messages": messages},
        {"session_id": "s9"},
    ):
        assert_error(http.post(f"{base(profile_name)}/flush", json=body), 400, "invalid_request")
    assert len(http.get(f"{base(profile_name)}/memories").json()["memories"]) == len(stored)


# ---------------------------------------------------------------- clients


def test_sync_and_async_clients_and_the_in_cluster_profile_agree(
    serve_app, server_settings, profile_name
):
    with Client(serve_app) as client:
        profile = client.get_profile(profile_name)
        written = profile.add_block_entry("user", "Writes Rust at work.")
        assert (
            not written.duplicate
            and profile.add_block_entry("user", "writes rust AT work.").duplicate
        )
        item = profile.open_work_item("Port the parser", todos=["Read the grammar"])
        profile.update_work_item(item.id, check_todos=["read the grammar"])
        profile.remember("The parser lives in src/parse.rs.")
        synced = profile.context("Where is the parser?", budget_chars=1_500)
        with pytest.raises(RaymemHTTPError) as full:
            profile.set_block("tiny", limit=5)
            profile.add_block_entry("tiny", "far too long for five")
        assert (full.value.status, full.value.code) == (409, "block_full")
        resolved = profile.resolve(written.source_ref)
        assert (
            isinstance(resolved, ResolvedBlockEntry) and resolved.content == "Writes Rust at work."
        )

    async def the_same_asynchronously():
        async with AsyncClient(serve_app) as client:
            profile = client.get_profile(profile_name)
            answer = await profile.context("Where is the parser?", budget_chars=1_500)
            closed = await profile.close_work_item(item.id, outcome="Ported; tests pass.")
            episode = await profile.resolve(closed.episode.source_ref)
            return answer, closed, episode, await profile.working_memory()

    answer, closed, episode, memory = asyncio.run(the_same_asynchronously())
    assert answer.text == synced.text and len(synced.text) <= 1_500
    assert "Writes Rust at work." in synced.text and "Port the parser" in synced.text
    assert isinstance(episode, ResolvedEpisode) and episode.episode == closed.episode
    assert memory.work_items == []

    local = raymem.get_profile(profile_name, settings=server_settings)
    in_cluster = local.context("Where is the parser?", budget_chars=1_500)
    assert in_cluster.sections[0].items == answer.sections[0].items  # the core blocks
    assert [e.id for e in local.episodes().episodes] == [closed.episode.id]
    flushed = local.flush([{"role": "user", "content": "I use Helix now."}], session_id="f1")
    assert flushed.error is None and flushed.messages.stored == 1


def test_recall_finds_a_finished_episode_by_type(http, profile_name):
    path = f"{base(profile_name)}/work-items"
    item = http.post(path, json={"objective": "Rotate the staging TLS certificates"}).json()
    closed = http.post(f"{path}/{item['id']}/close", json={"outcome": "Rotated; checks passed."})
    episode = closed.json()["episode"]

    def found():
        result = http.post(
            f"{base(profile_name)}/recall",
            json={"query": "TLS certificates rotation", "types": ["episode"]},
        ).json()
        return result["memories"]

    hits = wait_until(found, timeout=30)
    assert hits[0]["id"] == episode["id"] and hits[0]["type"] == "episode"
    assert hits[0]["source_ref"] == episode["source_ref"]
