"""Every block of the README, run against a live server, so the README cannot drift.

Each fenced block stands under an HTML comment (invisible on GitHub) that says what
this test does with it:

    <!-- doctest -->                             run it; it must succeed
    <!-- doctest expect="REGEX" expect='RE' -->  and what it prints must match each
    <!-- doctest then='CODE' -->                 (python) run CODE after the block
    <!-- doctest differs="SECTION ..." -->       (toml) a configuration file: it loads, and
                                                 only these sections differ from the defaults
    <!-- not run: REASON -->                     shown only, for the reason given

A block with neither fails ``test_every_block_is_run_or_says_why_not``.

How a block runs, by its language: ``bash`` in ``bash -e``, with a terminal on stdin
that answers "y" to every confirmation; ``python`` with this interpreter, after
stand-ins for the names a sketch leaves to the reader (``call_your_model``, which
echoes the system prompt it is given, ``SYSTEM_PROMPT``, ``old_turns``); ``json``, an
MCP configuration: each server in it is started (or connected to) as an agent would,
and must remember and recall through its tools; ``toml``, as above.

Blocks run in the README's order, in one working folder holding the files they read
(``chat.jsonl``), against one server with object storage (moto's S3): a Serve app
beside the shared test app. ``http://127.0.0.1:8000`` and ``localhost:8000`` become
its address, ``my-project`` and ``my-agent`` profiles of this run, ``<your key>`` a
key (the server has none, so any), and the memory id ``3f2a…`` a memory the
blocks before it stored.
"""

import asyncio
import contextlib
import json
import os
import pty
import re
import subprocess
import sys
import tomllib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import msgspec
import pytest
from conftest import wait_until
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from s3_fixtures import REGION, make_bucket

from raymem.config import load_settings

README = Path(__file__).parent.parent / "README.md"
FENCE = re.compile(r"^```(?P<language>[\w+-]*)\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL)
MARKER = re.compile(r"<!-- (?:doctest(?P<options>[^>]*?)|not run: (?P<reason>[^>]*?)) -->\n\Z")
OPTION = re.compile(r"""(\w+)=(["'])(.*?)\2""")  # either quote, the other inside
RUNNABLE = {"bash", "python", "json", "toml"}

README_URL, README_HOST = "http://127.0.0.1:8000", "localhost:8000"
MEMORY_ID = "3f2a…"  # the README's example of a memory id
RUN = f"readme-{uuid.uuid4().hex[:8]}"  # one per run: blocks build on each other
NAMES = {"my-project": RUN, "my-agent": f"{RUN}-agent", "<your key>": "any-key"}
PREFIX = "/readme"
BLOCK_TIMEOUT_S = 300  # a first call activates a profile and loads models, on a loaded machine
CONFIRMATIONS = "y\n" * 20  # more than any block asks

STAND_INS = """\
SYSTEM_PROMPT = "You are a concise assistant."
old_turns = [{"role": "user", "content": "We release on Fridays."}]


def call_your_model(*, system: str, user: str) -> str:  # a model that echoes its prompt
    return system
"""
CHAT = [  # the chat.jsonl the terminal block ingests
    {"role": "user", "content": "I prefer pnpm over npm as the package manager."},
    {"role": "assistant", "content": "Noted: pnpm."},
]


class Block:
    def __init__(self, text: str, fence: re.Match[str]) -> None:
        self.language, self.code = fence["language"], fence["code"]
        self.line = text[: fence.start()].count("\n") + 1
        marker = MARKER.search(text, 0, fence.start())
        self.marked = marker is not None
        self.runs = marker is not None and marker["reason"] is None
        self.reason = "" if marker is None else (marker["reason"] or "").strip()
        found = OPTION.findall(marker["options"] or "") if marker is not None else []
        self.expect = [re.compile(value) for name, _, value in found if name == "expect"]
        self.options = {name: value for name, _, value in found if name != "expect"}

    def __repr__(self) -> str:
        return f"README.md:{self.line}:{self.language or 'text'}"


def readme_blocks() -> list[Block]:
    text = README.read_text()
    return [Block(text, fence) for fence in FENCE.finditer(text)]


BLOCKS = readme_blocks()
RUN_BLOCKS = [block for block in BLOCKS if block.runs]


def test_every_block_is_run_or_says_why_not():
    unmarked = [block for block in BLOCKS if not block.marked]
    assert not unmarked, f"mark them <!-- doctest --> or <!-- not run: why -->: {unmarked}"
    assert all(block.reason for block in BLOCKS if not block.runs)
    assert all(block.language in RUNNABLE for block in RUN_BLOCKS), RUN_BLOCKS
    # The quick start, the CLI, the agent loop, both MCP configurations, the settings.
    assert [block.language for block in RUN_BLOCKS] == [
        "bash",
        "python",
        "bash",
        "python",
        "json",
        "json",
        "toml",
    ]
    assert all(block.expect for block in RUN_BLOCKS if block.language in {"bash", "python"})


# ------------------------------------------------------------------ the server


@pytest.fixture(scope="module")
def readme_app(
    serve_app: str, s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A keyless raymem app with object storage in moto, as the README's server."""
    from ray import serve

    from raymem.serve.app import build_app

    settings = load_settings(environ={"RAYMEM_DATA_DIR": str(tmp_path_factory.mktemp("readme"))})
    store = msgspec.structs.replace(
        settings.object_store,
        bucket=make_bucket(s3_endpoint),
        endpoint_url=s3_endpoint,
        region=REGION,
        access_key_id="testing",
        secret_access_key="testing",
    )
    settings = msgspec.structs.replace(
        settings, app_name="raymem-readme", namespace="raymem-readme", object_store=store
    )
    serve.run(build_app(settings), name="raymem-readme", route_prefix=PREFIX, blocking=False)
    url = f"{serve_app}{PREFIX}"
    wait_until(lambda: _healthy(url), timeout=120)
    yield url
    serve.delete("raymem-readme")


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("readme-work")
    (folder / "chat.jsonl").write_text("".join(json.dumps(turn) + "\n" for turn in CHAT))
    return folder


def a_memory_id(url: str) -> str:
    """A current memory of the run's profile outside session s1 (which the block erases
    before it names the memory id)."""
    page = httpx.get(f"{url}/v1/profiles/{RUN}/memories", params={"limit": 100}, timeout=60)
    assert page.status_code == 200, page.text
    return next(m["id"] for m in page.json()["memories"] if m.get("session_id") != "s1")


def with_names(code: str, url: str) -> str:
    code = code.replace(README_URL, url).replace(README_HOST, url.removeprefix("http://"))
    for shown, used in NAMES.items():
        code = code.replace(shown, used)
    if MEMORY_ID in code:
        code = code.replace(MEMORY_ID, a_memory_id(url))
    return code


# ------------------------------------------------------------------ the runs


def run_program(block: Block, code: str, url: str, workdir: Path) -> str:
    """Run a bash or python block; its output, once it exited 0."""
    if block.language == "python":
        code = f"{STAND_INS}\n{code}\n{block.options.get('then', '')}\n"
        command = [sys.executable, "-c", code]
    else:
        command = ["bash", "-ec", code]
    env = {
        **os.environ,
        "RAYMEM_URL": url,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    # A terminal answers confirmations one line per read, so each command gets its own "y".
    terminal, answers = pty.openpty()
    try:
        os.write(terminal, CONFIRMATIONS.encode())
        out = subprocess.run(
            command,
            cwd=workdir,
            env=env,
            stdin=answers,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
        )
    finally:
        os.close(answers)
        os.close(terminal)
    shown = f"{block!r} printed:\n{out.stdout}\n{out.stderr}"
    assert out.returncode == 0, shown
    return out.stdout


@contextlib.asynccontextmanager
async def mcp_client(server: dict[str, Any]) -> AsyncIterator[Client]:
    """An MCP client of a configured server, started or reached as an agent would."""
    if "command" in server:
        env = {**os.environ, **server.get("env", {})}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        params = StdioServerParameters(command=server["command"], args=server["args"], env=env)
        async with Client(params, read_timeout_seconds=BLOCK_TIMEOUT_S) as client:
            yield client
        return
    assert server["type"] == "http", server
    async with (
        httpx2.AsyncClient(headers=server.get("headers", {}), timeout=BLOCK_TIMEOUT_S) as http,
        Client(streamable_http_client(server["url"], http_client=http)) as client,
    ):
        yield client


async def remember_and_recall(server: dict[str, Any], profile: str) -> None:
    async with mcp_client(server) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert {"recall", "remember", "context", "block_add", "action_record"} <= tools
        stored = await client.call_tool(
            "remember", {"profile": profile, "content": "The staging database is Postgres 17."}
        )
        assert not stored.is_error, stored.content
        found = await client.call_tool(
            "recall", {"profile": profile, "query": "Which database runs on staging?"}
        )
        assert not found.is_error, found.content
        assert found.structured_content is not None
        assert "Postgres 17" in found.structured_content["memories"][0]["content"]


def check_mcp_config(code: str) -> None:
    servers = json.loads(code)["mcpServers"]
    assert servers
    for name, server in servers.items():
        asyncio.run(remember_and_recall(server, f"{RUN}-mcp-{name}-{len(code)}"))


def check_settings(block: Block, code: str, workdir: Path) -> None:
    """The settings shown load, and all but the named sections are the defaults."""
    path = workdir / "raymem.toml"
    path.write_text(code)
    shown = msgspec.to_builtins(load_settings(path, environ={}))
    defaults = msgspec.to_builtins(load_settings(environ={}))
    differ = {name for name in shown if shown[name] != defaults[name]}
    assert differ == set(block.options.get("differs", "").split()), differ
    assert set(tomllib.loads(code)) >= differ


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=repr)
def test_readme_block_runs(block: Block, readme_app: str, workdir: Path) -> None:
    code = with_names(block.code, readme_app)
    if block.language == "json":
        check_mcp_config(code)
        return
    if block.language == "toml":
        check_settings(block, block.code, workdir)
        return
    printed = run_program(block, code, readme_app, workdir)
    for pattern in block.expect:
        assert pattern.search(printed), f"{pattern.pattern!r} not found in {block!r}:\n{printed}"
