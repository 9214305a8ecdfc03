"""The embedder pool as profiles call it: no call waits forever on a pool that does not answer.

A pool that never answers cannot be made on demand from the real one, so this test
deploys a small Serve app of its own, under the pool's deployment name, whose
methods hold their answer; the client, the handles and Serve are the real ones.
"""

import asyncio
import time
import uuid

import pytest
from ray import serve

from raymem.actors.pools import EMBEDDER_DEPLOYMENT, PoolEmbedder, pool_handle
from raymem.config import ModelSettings
from raymem.errors import ModelUnavailable

TIMEOUT_S = 1.0
HELD_S = 30.0  # far longer than the client waits


@serve.deployment(
    name=EMBEDDER_DEPLOYMENT,
    ray_actor_options={"num_cpus": 0},
    graceful_shutdown_timeout_s=0.1,  # its held calls are not waited for at the end
)
class HeldPool:
    """``info`` answers from its second call on; ``embed`` never answers in time."""

    def __init__(self) -> None:
        self.info_calls = 0

    async def info(self) -> dict[str, object]:
        self.info_calls += 1
        if self.info_calls == 1:
            await asyncio.sleep(HELD_S)
        return {"name": "held", "dim": 3}

    async def embed(self, texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(HELD_S)
        return [[0.0, 0.0, 1.0] for _ in texts]


@pytest.fixture(scope="module")
def held_pool(serve_app):
    app_name = f"held-pool-{uuid.uuid4().hex[:6]}"
    serve.run(HeldPool.bind(), name=app_name, route_prefix=None)
    yield app_name
    serve.delete(app_name)


async def test_a_call_with_no_answer_is_sent_again_through_a_new_handle(held_pool):
    pool = PoolEmbedder(held_pool, ModelSettings(embedder_timeout_s=TIMEOUT_S))
    first_handle = pool_handle(EMBEDDER_DEPLOYMENT, held_pool)
    started = time.monotonic()
    info = await pool.info()
    assert info == {"name": "held", "dim": 3}
    assert TIMEOUT_S <= time.monotonic() - started < TIMEOUT_S + HELD_S / 2
    assert pool_handle(EMBEDDER_DEPLOYMENT, held_pool) is not first_handle


async def test_a_pool_that_never_answers_fails_the_call_with_a_clear_503(held_pool):
    pool = PoolEmbedder(held_pool, ModelSettings(embedder_timeout_s=TIMEOUT_S))
    started = time.monotonic()
    with pytest.raises(ModelUnavailable) as failed:
        await pool.embed(["a text"])
    elapsed = time.monotonic() - started
    assert 2 * TIMEOUT_S <= elapsed < HELD_S  # two attempts, never the pool's whole hold
    assert failed.value.status == 503 and failed.value.code == "model_unavailable"
    assert str(failed.value) == "The embedder model pool did not answer within 1 s; retry"
