"""Shared fixtures: a real local Ray with the Serve app, real HTTP, real SQLite files."""

import asyncio
import itertools
import os
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

# a real headless Chromium and its tabs, for the browser tests
from browser_fixtures import browser, tab  # noqa: F401

# a raymem app with API keys, for the MCP and browser tests
from keyed_app import keyed_app  # noqa: F401

# moto's S3 server, a throttling proxy and profile fixtures, for the durability tests
from s3_fixtures import (  # noqa: F401
    aws_test_env,
    bucket,
    fill_profile,
    object_store,
    open_store,
    s3_client,
    s3_endpoint,
    store_via_proxy,
    throttling_proxy,
)

from raymem.config import Settings, load_settings
from raymem.models.embedder import SentenceTransformerEmbedder

_counter = itertools.count()


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    """The real default embedding model (torch, one thread), loaded once per run."""
    return SentenceTransformerEmbedder(threads=1)


@pytest.fixture
def embed(embedder):
    """The embedder as the pipelines call it: texts -> unit vectors, off the event loop."""

    async def run(texts: list[str]):
        return await asyncio.to_thread(embedder.embed, texts)

    return run


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(predicate, timeout: float = 60.0, interval: float = 0.05):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it returns a truthy value; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


def make_settings(data_dir: Path, **env: str) -> Settings:
    environ = {"RAYMEM_DATA_DIR": str(data_dir), **env}
    return load_settings(environ=environ)


@pytest.fixture(scope="session")
def server_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    settings = make_settings(tmp_path_factory.mktemp("data"))
    server = msgspec.structs.replace(settings.server, port=free_port(), metrics_port=free_port())
    return msgspec.structs.replace(settings, server=server)


@pytest.fixture(scope="session")
def serve_app(server_settings: Settings) -> Iterator[str]:
    """The raymem Serve app on a real local Ray, reachable over real HTTP; yields its URL."""
    from raymem.serve import server

    server.start(server_settings, num_cpus=4)
    url = f"http://127.0.0.1:{server_settings.server.port}"
    wait_until(lambda: _healthy(url), timeout=120)
    yield url
    server.stop()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def http(serve_app: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=serve_app, timeout=60) as client:
        yield client


@pytest.fixture
def profile_name(request: pytest.FixtureRequest) -> str:
    """A profile name unique to the test."""
    return "t-" + re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:80] + f"-{next(_counter)}"


# --------------------------------------------- diagnosing a failure in the session's app

MAX_DIAGNOSED = 2  # failures whose profile hosts are described at the end of the run
_diagnosed: list[str] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """On a failed test that used the session's app, note what its profile hosts are doing
    (``diagnostics.hosts_report``): a hung request otherwise shows only as a timeout."""
    report = yield
    settings = getattr(item, "funcargs", {}).get("server_settings")
    if (
        report.failed
        and call.when == "call"
        and "serve_app" in getattr(item, "fixturenames", ())
        and settings is not None
        and len(_diagnosed) < MAX_DIAGNOSED
    ):
        from diagnostics import hosts_report

        _diagnosed.append(f"{item.nodeid}\n{hosts_report(settings)}")
    return report


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if _diagnosed:
        terminalreporter.section("profile hosts when a test of the session's app failed")
        for text in _diagnosed:
            terminalreporter.write_line(text)
