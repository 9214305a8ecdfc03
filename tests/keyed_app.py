"""A raymem app with API keys, shared by the MCP and browser tests.

A third Serve application ("raymem-keyed", route prefix ``/keyed``) beside the
keyless ``serve_app``, with its own data directory and namespace. Tenants alice and
bob, and a read-only key of alice's. Deployed once per test session.
"""

from collections.abc import Iterator

import httpx
import msgspec
import pytest

from raymem.config import ApiKey, AuthSettings, hash_key, load_settings

ALICE = "alice-keyed-4e1c"
BOB = "bob-keyed-8a7f"
ALICE_READ_ONLY = "alice-keyed-read-only-2b90"
PREFIX = "/keyed"


@pytest.fixture(scope="session")
def keyed_app(serve_app: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a raymem app that requires API keys (alice, bob, alice read-only)."""
    from conftest import wait_until  # here: conftest imports this module
    from ray import serve

    from raymem.serve.app import build_app

    data_dir = tmp_path_factory.mktemp("keyed-data")
    settings = load_settings(environ={"RAYMEM_DATA_DIR": str(data_dir)})
    keys = [
        ApiKey(tenant="alice", key_sha256=hash_key(ALICE)),
        ApiKey(tenant="bob", key_sha256=hash_key(BOB)),
        ApiKey(tenant="alice", key_sha256=hash_key(ALICE_READ_ONLY), read_only=True),
    ]
    settings = msgspec.structs.replace(
        settings, app_name="raymem-keyed", namespace="raymem-keyed", auth=AuthSettings(keys=keys)
    )
    serve.run(build_app(settings), name="raymem-keyed", route_prefix=PREFIX, blocking=False)
    url = f"{serve_app}{PREFIX}"

    def healthy() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(healthy, timeout=120)
    yield url
    serve.delete("raymem-keyed")
