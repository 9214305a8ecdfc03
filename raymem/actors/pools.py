"""Model pools: Ray Serve deployments that profile actors call through deployment handles."""

import asyncio
import logging
from typing import Any

import numpy as np
from ray import serve

from raymem.config import ModelSettings

log = logging.getLogger(__name__)

EMBEDDER_DEPLOYMENT = "Embedder"


@serve.deployment(name=EMBEDDER_DEPLOYMENT, max_ongoing_requests=256)
class EmbedderPool:
    """Embeds lists of texts; concurrent callers' lists are batched into one model call."""

    def __init__(self, models: ModelSettings) -> None:
        from raymem.models.embedder import SentenceTransformerEmbedder

        device = "cuda" if models.num_gpus > 0 else "cpu"
        self._model = SentenceTransformerEmbedder(
            models.embedder, threads=models.embedder_threads, device=device
        )

    async def info(self) -> dict[str, Any]:
        return {"name": self._model.name, "dim": self._model.dim}

    async def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._model.dim), dtype=np.float32)
        return await self._embed_batched(texts)

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.002)
    async def _embed_batched(self, batches: list[list[str]]) -> list[np.ndarray]:
        flat = [text for texts in batches for text in texts]
        # The model call blocks: keep the replica's event loop free for new requests.
        vectors = await asyncio.to_thread(self._model.embed, flat)
        out, start = [], 0
        for texts in batches:
            out.append(vectors[start : start + len(texts)])
            start += len(texts)
        return out


def embedder_options(models: ModelSettings) -> dict[str, Any]:
    """Deployment options from configuration; never asks for GPUs the config does not name."""
    return {
        "num_replicas": models.embedder_replicas,
        "ray_actor_options": {"num_cpus": 1, "num_gpus": models.num_gpus},
    }
