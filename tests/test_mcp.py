"""raymem's MCP tools through the SDK's own client, over both transports.

Streamable HTTP: the ``/mcp`` endpoint of the real Serve apps (keyless, and with
API keys). Stdio: ``raymem mcp`` as a subprocess, talking to the keyed app by URL
and token, as a coding agent would run it.
"""

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import httpx2
import pytest
from conftest import free_port
from keyed_app import ALICE, ALICE_READ_ONLY, BOB
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

TOOLS = {
    "recall",
    "remember",
    "forget",
    "list",
    "get",
    "ingest",
    "session_append",
    "session_last",
    "session_end",
    "erase",
    "context",
    "blocks",
    "block_add",
    "block_replace",
    "block_remove",
    "action_record",
    "action_advice",
}
READ_ONLY_TOOLS = {"recall", "list", "get", "session_last", "context", "blocks"}
DESTRUCTIVE_TOOLS = {"forget", "erase", "block_replace", "block_remove"}
TIMEOUT_S = 120  # generous: the box running the suite may be loaded many times over


@contextlib.asynccontextmanager
async def over_http(url: str, key: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_S) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        yield client


@contextlib.asynccontextmanager
async def over_stdio(url: str, key: str) -> AsyncIterator[Client]:
    """``raymem mcp`` as an agent starts it: a subprocess, configured by its environment."""
    env = {**os.environ, "RAYMEM_URL": url, "RAYMEM_TOKEN": key}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "raymem.cli", "mcp"], env=env
    )
    async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:
        yield client


def connect(transport: str, url: str, key: str) -> contextlib.AbstractAsyncContextManager[Client]:
    return over_http(url, key) if transport == "http" else over_stdio(url, key)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text  # type: ignore[union-attr]
    assert result.structured_content is not None
    return result.structured_content


async def error_of(client: Client, tool: str, **arguments: Any) -> str:
    """The text of a tool error: raymem's message, never a stack trace."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    text: str = result.content[0].text  # type: ignore[union-attr]
    assert "Traceback" not in text and 'File "' not in text
    return text


async def test_tools_are_listed_with_descriptions_for_a_model(serve_app):
    async with over_http(serve_app) as client:  # keyless app: no token needed
        tools = (await client.list_tools()).tools
    assert {tool.name for tool in tools} == TOOLS
    for tool in tools:
        assert len(tool.description or "") > 150, tool.name  # when to call it, what it returns
        properties = tool.input_schema["properties"]
        assert "profile" in tool.input_schema["required"], tool.name
        assert "tenant" not in properties, tool.name
        assert tool.annotations is not None
        assert bool(tool.annotations.read_only_hint) == (tool.name in READ_ONLY_TOOLS), tool.name
    by_name = {tool.name: tool for tool in tools}
    assert "query" in by_name["recall"].input_schema["required"]
    assert "content" in by_name["remember"].input_schema["required"]
    destructive = {name for name, tool in by_name.items() if tool.annotations.destructive_hint}  # type: ignore[union-attr]
    assert destructive == DESTRUCTIVE_TOOLS


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_remember_supersede_recall_history_and_forget(keyed_app, profile_name, transport):
    async with connect(transport, keyed_app, ALICE) as client:
        old = await call(client, "remember", profile=profile_name, content="I live in Budapest.")
        new = await call(
            client, "remember", profile=profile_name, content="I moved to Vienna in May 2026."
        )
        assert new["type"] == "fact" and new["topic_key"] == old["topic_key"]

        history = await call(client, "get", profile=profile_name, memory_id=old["id"])
        assert history["superseded_by"] == new["id"]
        assert [m["id"] for m in history["history"]] == [old["id"], new["id"]]

        recalled = await call(
            client, "recall", profile=profile_name, query="Which city did I move to?"
        )
        assert recalled["memories"][0]["id"] == new["id"]
        assert recalled["memories"][0]["channels"]
        assert "Vienna" in recalled["answer"]
        assert recalled["latency_ms"]["total"] > 0

        listed = await call(client, "list", profile=profile_name)
        assert [m["id"] for m in listed["memories"]] == [new["id"]]
        everything = await call(client, "list", profile=profile_name, include_superseded=True)
        assert {m["id"] for m in everything["memories"]} == {old["id"], new["id"]}

        assert await call(client, "forget", profile=profile_name, memory_id=new["id"]) == {
            "forgotten": new["id"]
        }
        assert (await call(client, "list", profile=profile_name))["memories"] == []

    # The same data through the REST API: the tools wrote alice's profile, nobody else's.
    headers = {"Authorization": f"Bearer {ALICE}"}
    got = httpx.get(
        f"{keyed_app}/v1/profiles/{profile_name}/memories/{new['id']}",
        headers=headers,
        timeout=TIMEOUT_S,
    )
    assert got.status_code == 200 and got.json()["forgotten_at"] is not None


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_sessions_and_ingest(keyed_app, profile_name, transport):
    async with connect(transport, keyed_app, ALICE) as client:
        first = await call(
            client,
            "session_append",
            profile=profile_name,
            session_id="s1",
            role="user",
            content="Deploys go out on Thursdays.",
        )
        assert first["role"] == "user" and first["session_id"] == "s1"
        await call(
            client,
            "session_append",
            profile=profile_name,
            session_id="s1",
            role="assistant",
            content="Noted: Thursday deploys.",
        )
        last = await call(client, "session_last", profile=profile_name, session_id="s1", n=1)
        assert [m["content"] for m in last["messages"]] == ["Noted: Thursday deploys."]

        ended = await call(client, "session_end", profile=profile_name, session_id="s1")
        assert ended["session"]["id"] == "s1" and ended["session"]["ended_at"]

        turns = [
            {"role": "user", "content": "Use pnpm, not npm."},
            {"role": "assistant", "content": "Noted: pnpm."},
        ]
        stored = await call(client, "ingest", profile=profile_name, session_id="s2", messages=turns)
        assert stored["messages"] == {"stored": 2, "duplicates": 0}
        again = await call(client, "ingest", profile=profile_name, session_id="s2", messages=turns)
        assert again["messages"] == {"stored": 0, "duplicates": 2}


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_recall_marks_a_stale_turn_and_takes_as_of(keyed_app, profile_name, transport):
    async with connect(transport, keyed_app, ALICE) as client:
        turn = {
            "role": "user",
            "content": "I live in Budapest.",
            "created_at": "2026-01-10T09:00:00Z",
        }
        await call(client, "ingest", profile=profile_name, session_id="s1", messages=[turn])
        vienna = await call(
            client, "remember", profile=profile_name, content="I moved to Vienna in May 2026."
        )

        found = await call(
            client,
            "recall",
            profile=profile_name,
            query="Where does the user live?",
            as_of="2026-06-01T12:00:00Z",
        )
        assert found["memories"][0]["id"] == vienna["id"]
        assert "stale" not in found["memories"][0] or not found["memories"][0]["stale"]
        budapest = [hit for hit in found["memories"] if "Budapest" in hit["content"]]
        assert budapest
        assert all(hit["stale"] and hit["superseded_by"] == vienna["id"] for hit in budapest)

        too_early = await error_of(
            client, "recall", profile=profile_name, query="x", as_of="0001-01-01T00:00:00Z"
        )
        assert "out of range" in too_early


async def test_the_tenant_comes_from_the_bearer_token(keyed_app, profile_name):
    async with over_http(keyed_app, ALICE) as alice:
        await call(alice, "remember", profile=profile_name, content="The office is in Graz.")
    async with over_http(keyed_app, BOB) as bob:
        message = await error_of(bob, "recall", profile=profile_name, query="Where is the office?")
        assert f"Profile '{profile_name}' does not exist" in message
        assert "profile_not_found" in message
    async with over_http(keyed_app, ALICE_READ_ONLY) as read_only:
        found = await call(read_only, "recall", profile=profile_name, query="Where is the office?")
        assert "Graz" in found["memories"][0]["content"]
        refused = await error_of(
            read_only, "remember", profile=profile_name, content="Not allowed."
        )
        assert "This API key is read-only (forbidden)" in refused


@pytest.mark.parametrize("key", [None, "not-a-key"])
def test_a_missing_or_invalid_key_is_a_401_before_mcp(keyed_app, key):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    response = httpx.post(
        f"{keyed_app}/mcp",
        json=initialize,
        headers={**headers, "Accept": "application/json, text/event-stream"},
        timeout=TIMEOUT_S,
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["code"] == "unauthorized"


async def test_errors_come_back_as_tool_errors_with_our_message(keyed_app, profile_name):
    async with over_http(keyed_app, ALICE) as client:
        await call(client, "remember", profile=profile_name, content="Lunch is at noon.")
        missing = await error_of(client, "get", profile=profile_name, memory_id="nope")
        assert "Memory 'nope' does not exist (memory_not_found)" in missing
        bad_name = await error_of(client, "recall", profile="../etc", query="anything")
        assert "Invalid profile name '../etc'" in bad_name
        too_many = await error_of(client, "recall", profile=profile_name, query="x", limit=1000)
        assert "limit" in too_many


async def test_stdio_refuses_ids_that_would_escape_their_url_path(keyed_app, profile_name):
    async with over_stdio(keyed_app, ALICE) as client:
        kept = await call(client, "remember", profile=profile_name, content="Keep this one.")
        # Sent as a path, this would be DELETE /v1/profiles/<profile>: the whole profile.
        escape = await error_of(client, "forget", profile=profile_name, memory_id="../..")
        assert "Invalid memory id '../..'" in escape
        assert (await call(client, "get", profile=profile_name, memory_id=kept["id"]))["id"]


async def test_stdio_reports_an_unreachable_server(profile_name):
    async with over_stdio(f"http://127.0.0.1:{free_port()}", ALICE) as client:
        message = await error_of(client, "recall", profile=profile_name, query="anything")
    assert "Cannot reach the raymem server at http://127.0.0.1:" in message


def rest(url: str, key: str) -> httpx.Client:
    """The REST API of the same app and key, to see what the tools did."""
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=TIMEOUT_S)


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_core_blocks_and_context(keyed_app, profile_name, transport):
    async with connect(transport, keyed_app, ALICE) as client:
        fact = await call(
            client, "remember", profile=profile_name, content="We deploy to Fly.io, region fra."
        )
        added = await call(
            client, "block_add", profile=profile_name, block="user", content="Name: Dana."
        )
        assert added["block"]["entries"] == ["Name: Dana."] and added["duplicate"] is False
        again = await call(
            client, "block_add", profile=profile_name, block="user", content="name:  dana."
        )
        assert again["duplicate"] is True and again["block"]["entries"] == ["Name: Dana."]
        too_big = await error_of(
            client, "block_add", profile=profile_name, block="user", content="x" * 2_000
        )
        assert "block_full" in too_big

        with rest(keyed_app, ALICE) as http:  # written through MCP, seen through HTTP
            blocks = http.get(f"/v1/profiles/{profile_name}/blocks").json()["blocks"]
        assert {b["name"]: b["entries"] for b in blocks}["user"] == ["Name: Dana."]
        listed = await call(client, "blocks", profile=profile_name)
        assert {b["name"] for b in listed["blocks"]} >= {"user", "project"}

        context = await call(
            client, "context", profile=profile_name, query="Where do we deploy?", budget_tokens=500
        )
        assert "Name: Dana." in context["text"] and "Fly.io" in context["text"]
        assert len(context["text"]) <= context["budget_chars"] == 2_000
        assert f"mem_{fact['id']}" in context["sections"]["memories"]
        assert context["sections"]["core"]

        await call(
            client,
            "block_replace",
            profile=profile_name,
            block="user",
            old="Name: Dana.",
            new="Name: Dana K.",
        )
        with rest(keyed_app, ALICE) as http:
            blocks = http.get(f"/v1/profiles/{profile_name}/blocks").json()["blocks"]
        assert {b["name"]: b["entries"] for b in blocks}["user"] == ["Name: Dana K."]
        left = await call(
            client, "block_remove", profile=profile_name, block="user", content="Name: Dana K."
        )
        assert left["entries"] == []
        missing = await error_of(
            client, "block_remove", profile=profile_name, block="user", content="Nothing."
        )
        assert "No entry of block 'user' reads 'Nothing.'" in missing
        assert "entry_not_found" in missing


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_erase_removes_the_text(keyed_app, profile_name, transport):
    async with connect(transport, keyed_app, ALICE) as client:
        secret = await call(
            client, "remember", profile=profile_name, content="My locker code is 4711."
        )
        erased = await call(client, "erase", profile=profile_name, memory_id=secret["id"])
        assert erased["memory_id"] == secret["id"] and secret["id"] in erased["erased_memory_ids"]
        gone = await error_of(client, "get", profile=profile_name, memory_id=secret["id"])
        assert "memory_erased" in gone
    with rest(keyed_app, ALICE) as http:
        got = http.get(f"/v1/profiles/{profile_name}/memories/{secret['id']}")
    assert got.status_code == 410


def actions(session: str, start: datetime) -> list[dict[str, Any]]:
    """update_node fails until create_node ran: the steps of one session, a second apart."""
    steps = [
        ("update_node", "failure", "NodeNotFoundError"),
        ("create_node", "success", None),
        ("update_node", "success", None),
    ]
    return [
        {
            "session_id": session,
            "action_type": action_type,
            "target_type": "node",
            "target_ids": [f"n-{session}"],
            "outcome": outcome,
            **({"error_code": error_code} if error_code else {}),
            "at": (start + timedelta(seconds=index)).isoformat(),
        }
        for index, (action_type, outcome, error_code) in enumerate(steps)
    ]


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_actions_are_recorded_and_advice_comes_from_their_patterns(
    keyed_app, profile_name, transport
):
    base = f"/v1/profiles/{profile_name}"
    async with connect(transport, keyed_app, ALICE) as client:
        first = {
            "session_id": "s0",
            "action_type": "update_node",
            "target_type": "node",
            "target_ids": ["n-s0"],
            "outcome": "failure",
            "error_code": "NodeNotFoundError",
            "intent": "rename a node",
            "id": "s0-update-1",
        }
        off = await call(client, "action_record", profile=profile_name, **first)
        assert (off["stored"], off["ignored"]) == (0, 1)  # procedural memory is off by default

        with rest(keyed_app, ALICE) as http:
            enabled = http.put(f"{base}/procedural", json={"enabled": True})
            assert enabled.status_code == 200, enabled.text
        recorded = await call(client, "action_record", profile=profile_name, **first)
        assert (recorded["stored"], recorded["ignored"]) == (1, 0)
        resent = await call(client, "action_record", profile=profile_name, **first)
        assert (resent["stored"], resent["duplicates"], resent["ids"]) == (0, 1, ["s0-update-1"])
        start = datetime.now(UTC)  # after the recorded action, stamped with the server's clock

        with rest(keyed_app, ALICE) as http:  # recorded through MCP, seen through HTTP
            [seen] = http.get(f"{base}/actions").json()["actions"]
            assert (seen["action_type"], seen["error_code"], seen["intent"]) == (
                "update_node",
                "NodeNotFoundError",
                "rename a node",
            )
            # Five more such sessions, and s0's remaining steps, then the passes.
            more = actions("s0", start + timedelta(seconds=10))[1:]
            for number in range(1, 6):
                more += actions(f"s{number}", start + timedelta(minutes=number))
            captured = http.post(f"{base}/actions", json={"actions": more})
            assert captured.json()["stored"] == len(more), captured.text
            later = (start + timedelta(hours=1)).isoformat()
            passes = http.post(f"{base}/procedural/evaluate", json={"now": later}).json()
            assert passes["patterns"]["promoted"] == 1, passes

        advice = await call(
            client,
            "action_advice",
            profile=profile_name,
            action_type="update_node",
            target_type="node",
            target_ids=["n-new"],
            session_id="s9",
        )
        assert "run create_node first" in advice["text"]
        assert advice["patterns"][0]["error_code"] == "NodeNotFoundError"
        nothing = await call(
            client, "action_advice", profile=profile_name, action_type="delete", target_type="x"
        )
        assert nothing == {"text": "", "patterns": []}


async def test_a_read_only_key_reads_context_and_advice_but_writes_nothing(keyed_app, profile_name):
    async with over_http(keyed_app, ALICE) as alice:
        await call(alice, "block_add", profile=profile_name, block="project", content="Use uv.")
    async with over_http(keyed_app, ALICE_READ_ONLY) as read_only:
        context = await call(read_only, "context", profile=profile_name, query="tooling")
        assert "Use uv." in context["text"]
        for tool, arguments in [
            ("block_add", {"block": "project", "content": "Use pip."}),
            ("block_remove", {"block": "project", "content": "Use uv."}),
            ("action_record", {**RECORD, "session_id": "s1"}),
            ("action_advice", {"action_type": "a", "target_type": "b", "session_id": "s1"}),
        ]:
            refused = await error_of(read_only, tool, profile=profile_name, **arguments)
            assert "read-only (forbidden)" in refused, tool
        advice = await call(
            read_only, "action_advice", profile=profile_name, action_type="a", target_type="b"
        )
        assert advice["text"] == ""


RECORD = {"action_type": "run_tests", "target_type": "suite", "outcome": "success"}
