"""Shared fixtures for export tests: moto's real S3 HTTP API, a throttling proxy, profiles.

``conftest.py`` imports them, so every test module can use them.
"""

import contextlib
import http.client
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from moto.server import ThreadedMotoServer

from raymem.export.objectstore import ObjectStore
from raymem.pipelines.ingest import consolidate_session, ingest, remember
from raymem.store import ProfileStore
from raymem.types import MessageIn

REGION = "us-east-1"


@pytest.fixture(scope="session")
def aws_test_env() -> Iterator[None]:
    """Dummy credentials, and no shared AWS config of the machine leaking in."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ACCESS_KEY_ID", "testing")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        patch.setenv("AWS_DEFAULT_REGION", REGION)
        patch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
        patch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
            patch.delenv(name, raising=False)
        yield


@pytest.fixture(scope="session")
def s3_endpoint(aws_test_env: None) -> Iterator[str]:
    """moto's S3 server on a free port of 127.0.0.1."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def make_bucket(endpoint: str) -> str:
    """A new, uniquely named bucket: tests share the server, not their data."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint, region_name=REGION).create_bucket(Bucket=name)
    return name


@pytest.fixture
def bucket(s3_endpoint: str) -> str:
    return make_bucket(s3_endpoint)


@pytest.fixture
def object_store(s3_endpoint: str, bucket: str) -> ObjectStore:
    """An ObjectStore on a fresh bucket, with short backoff so retries stay fast."""
    return ObjectStore(
        bucket, prefix="raymem", endpoint_url=s3_endpoint, region=REGION, backoff_s=0.01
    )


class ThrottlingProxy:
    """An HTTP proxy in front of an S3 server that answers the next N requests with an error.

    It speaks the S3 wire protocol's error form (an XML body with a code), so
    the client under test sees exactly what a throttled service sends.
    """

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname, parts.port
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status answered)
        self._failures: list[tuple[int, str]] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def fail_next(self, count: int, *, status: int = 503, code: str = "SlowDown") -> None:
        with self._lock:
            self._failures.extend([(status, code)] * count)

    def statuses(self) -> list[int]:
        with self._lock:
            return [status for _, _, status in self.requests]

    def _take_failure(self) -> tuple[int, str] | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None

    def _record(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self.requests.append((method, path, status))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass  # keep test output quiet

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                failure = proxy._take_failure()
                if failure is not None:
                    status, code = failure
                    error = (
                        f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>"
                        f"<Message>Injected by the test proxy</Message></Error>"
                    ).encode()
                    # Recorded before answering: the client may check as soon as it has the reply.
                    proxy._record(self.command, self.path, status)
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(error)))
                    self.end_headers()
                    self.wfile.write(error)
                    return
                conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port)
                try:
                    # Headers go through unchanged: the signature covers Host.
                    headers = dict(self.headers.items())
                    conn.request(self.command, self.path, body=body, headers=headers)
                    response = conn.getresponse()
                    payload = response.read()
                finally:
                    conn.close()
                proxy._record(self.command, self.path, response.status)
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        return Handler


@pytest.fixture
def throttling_proxy(s3_endpoint: str) -> Iterator[ThrottlingProxy]:
    proxy = ThrottlingProxy(s3_endpoint)
    proxy.thread.start()
    yield proxy
    proxy.server.shutdown()
    proxy.server.server_close()


@pytest.fixture
def s3_client(s3_endpoint: str) -> Any:
    """A plain boto3 client on moto, to look at or tamper with what the code under test stored."""
    return boto3.client("s3", endpoint_url=s3_endpoint, region_name=REGION)


@pytest.fixture
def store_via_proxy(throttling_proxy: ThrottlingProxy, bucket: str) -> Callable[..., ObjectStore]:
    """Build ObjectStores on the test bucket that talk to moto through the throttling proxy."""

    def build(**options: Any) -> ObjectStore:
        options.setdefault("backoff_s", 0.01)
        return ObjectStore(bucket, endpoint_url=throttling_proxy.url, region=REGION, **options)

    return build


# ------------------------------------------------------------------ profiles

DIM = 384


async def _fill(store: ProfileStore, phase: int) -> None:
    """Write a realistic profile: turns, supersession chains, a forgotten memory, ended sessions.

    Phase 1 and phase 2 write different data, so a test can snapshot between them.
    """
    if phase == 1:
        await ingest(
            store,
            "s1",
            [
                MessageIn(role="user", content="I use npm for packages. I live in Paris."),
                MessageIn(role="assistant", content="Noted, npm and Paris."),
            ],
        )
        await remember(store, "Always write tests with pytest", memory_id="m-pytest")
        await remember(store, "I deployed the billing service yesterday.", memory_id="m-deploy")
        await consolidate_session(store, "s1")
    else:
        await ingest(
            store,
            "s2",
            [MessageIn(role="user", content="Please use pnpm from now on. I moved to Berlin.")],
        )
        await remember(store, "Always use unittest for tests", memory_id="m-unittest")
        await remember(store, "Always use vitest for tests", memory_id="m-vitest")
        async with store.write() as writer:
            await writer.forget("m-deploy")
        await consolidate_session(store, "s2")


@pytest.fixture
async def open_store(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[ProfileStore]]]:
    """Open ProfileStores (dim 384) by path; all are closed at teardown."""
    opened: list[ProfileStore] = []

    async def opener(path: str | Path) -> ProfileStore:
        store = await ProfileStore.open(tmp_path / path, dim=DIM)
        opened.append(store)
        return store

    yield opener
    for store in opened:
        with contextlib.suppress(Exception):  # a test may have closed it already
            await store.close()


@pytest.fixture
def fill_profile() -> Callable[[ProfileStore, int], Awaitable[None]]:
    """``await fill_profile(store, phase)`` writes phase 1 or phase 2 of a test profile."""
    return _fill
