"""Model pools: Ray Serve deployments that profile actors call through deployment handles."""

import asyncio
import logging
from pathlib import Path
from typing import Any

import numpy as np
from ray import serve
from ray.serve.handle import DeploymentHandle

from raymem import metrics
from raymem.config import ModelSettings
from raymem.errors import ModelUnavailable
from raymem.models.priority import PriorityBatcher
from raymem.pipelines.generators import LLMGenerator

log = logging.getLogger(__name__)

EMBEDDER_DEPLOYMENT = "Embedder"
POOL_ATTEMPTS = 2  # a call with no answer is sent once more, through a new handle

# One handle per model pool and process, shared by every profile of a host (a handle of
# its own per profile would start a router per profile); replaced when it stops answering.
_handles: dict[tuple[str, str], Any] = {}


def pool_handle(deployment: str, app_name: str) -> Any:
    """This process's handle to the model pool ``deployment`` of app ``app_name``.

    Made directly, not with ``serve.get_deployment_handle``: that one asks the Serve
    controller, blocking the event loop, and hands back its cached handle, where a
    handle that stopped answering must give way to a new one (with a router of its own).
    """
    key = (deployment, app_name)
    if key not in _handles:
        _handles[key] = DeploymentHandle(deployment, app_name)
    return _handles[key]


def drop_pool_handle(deployment: str, app_name: str, handle: Any) -> None:
    """``handle`` stopped answering: the next call gets a new one (unless it was replaced)."""
    if _handles.get((deployment, app_name)) is handle:
        del _handles[(deployment, app_name)]


#: A background call holds ``embedder_background_chunk`` texts, or as many characters
#: as that many texts of this length (16: 8,192), so long texts make no longer calls.
CHARS_PER_BACKGROUND_TEXT = 512


@serve.deployment(name=EMBEDDER_DEPLOYMENT, max_ongoing_requests=256)
class EmbedderPool:
    """Embeds lists of texts for profile actors, one model call at a time.

    Callers waiting together share a model call. ``embed`` is interactive work (a
    query, the memories of an ingest being answered) and goes ahead of
    ``embed_background`` (the vectoriser's backlog), which runs in small chunks.
    """

    def __init__(self, models: ModelSettings) -> None:
        from raymem.models.embedder import make_embedder

        self._model = make_embedder(
            models.embedder,
            backend=models.embedder_backend,
            threads=models.embedder_threads,
            device="cuda" if models.num_gpus > 0 else "cpu",
            precision=models.embedder_precision,
            batch_size=models.embedder_batch_size,
            max_seq_length=models.embedder_max_seq_length,
            cache_dir=Path(models.embedder_cache_dir) if models.embedder_cache_dir else None,
        )
        # A call holds at most one forward pass of interactive texts: longer than
        # that would batch no better, and a query arriving meanwhile would wait.
        self._batcher = PriorityBatcher(
            self._embed_batch,
            max_batch=models.embedder_batch_size,
            background_chunk=models.embedder_background_chunk,
            background_chunk_chars=models.embedder_background_chunk * CHARS_PER_BACKGROUND_TEXT,
            background_after_s=models.embedder_background_after_s,
            background_max_delay_s=models.embedder_background_max_delay_s,
        )

    async def info(self) -> dict[str, Any]:
        """``name``: what stores record (the model and its precision); ``dim``; where it runs."""
        return {
            "name": self._model.name,
            "backend": type(self._model).__name__,
            "dim": self._model.dim,
            "model": self._model.model,
            "precision": self._model.precision,
            "device": self._model.device,
        }

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts``, ahead of any background work."""
        return await self._run(texts, background=False)

    async def embed_background(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts``, computed when no interactive work waits."""
        return await self._run(texts, background=True)

    async def _run(self, texts: list[str], *, background: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._model.dim), dtype=np.float32)
        self._record_queues()
        try:
            return await self._batcher.run(texts, background=background)
        finally:
            self._record_queues()

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        """One model call (in the batcher's thread), its size recorded."""
        metrics.EMBEDDER_BATCH.observe(len(texts))
        return self._model.embed(texts)

    def _record_queues(self) -> None:
        stats = self._batcher.stats()
        metrics.EMBEDDER_QUEUE.set(stats["waiting_interactive"], queue="interactive")
        metrics.EMBEDDER_QUEUE.set(stats["waiting_background"], queue="background")


def embedder_options(models: ModelSettings) -> dict[str, Any]:
    """Deployment options from configuration; never asks for GPUs the config does not name."""
    return {
        "num_replicas": models.embedder_replicas,
        "ray_actor_options": {"num_cpus": 1, "num_gpus": models.num_gpus},
    }


# ------------------------------------------------------------------ generator

GENERATOR_DEPLOYMENT = "Generator"
#: Profiles a Generator replica is recorded as serving (least recently used out);
#: beyond them a profile's next call may go to any replica.
PROFILES_PER_REPLICA = 256


@serve.deployment(name=GENERATOR_DEPLOYMENT, max_ongoing_requests=64)
class GeneratorPool:
    """Chat completions for the ``transformers`` (or ``openai``) generator backend.

    Concurrent callers' prompts are batched: a local model generates them as one
    padded batch, a remote endpoint gets them concurrently. Profile actors reach
    it through ``pool_generator(handle, models)``. With the ``rules`` backend no
    pool is deployed: the actor runs the rules in-process (no pool hop).

    Affinity: a ``transformers`` replica keeps the key/value states of recent
    prompt prefixes (``PromptCache``), and a profile's consecutive chunks share
    the system prompt and, between the full and the detail pass, the transcript.
    Callers therefore tag each call with their profile (``multiplexed_model_id``)
    and Serve routes a profile's calls to the replica that served it before,
    while it has capacity. Serve batches only calls with the same tag together.
    With ``generator_prompt_cache_entries = 0`` calls are untagged and any
    replica batches any profiles' prompts.
    """

    def __init__(self, models: ModelSettings) -> None:
        from raymem.models.chat import make_chat_model

        self._chat = make_chat_model(models)

    async def complete(self, messages: list[dict[str, str]], max_tokens: int) -> str:
        """The model's answer to one chat; batched with concurrent callers."""
        profile = serve.get_multiplexed_model_id()
        if profile:
            await self._hold_profile(profile)
        return await self._complete_batched((messages, max_tokens))

    async def prompt_cache_stats(self) -> dict[str, Any]:
        """This replica's prompt tokens seen and computed (the rest came from its cache)."""
        cache = getattr(self._chat, "prompt_cache", None)
        return {
            "replica": serve.get_replica_context().replica_id.unique_id,
            "prompt_tokens": cache.prompt_tokens if cache else 0,
            "computed_tokens": cache.computed_tokens if cache else 0,
            "prefixes_held": len(cache) if cache else 0,
        }

    @serve.multiplexed(max_num_models_per_replica=PROFILES_PER_REPLICA)  # type: ignore[untyped-decorator]
    async def _hold_profile(self, profile: str) -> str:
        """Mark this replica as the one serving ``profile``; nothing is loaded.

        The record is what Serve's router reads to send the profile's next call
        here, where the prompt cache holds its recent prefixes.
        """
        return profile

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.01)
    async def _complete_batched(
        self, requests: list[tuple[list[dict[str, str]], int]]
    ) -> list[str]:
        batch_generate = getattr(self._chat, "complete_batch", None)
        if batch_generate is not None:
            # One padded batch; generation blocks, so keep the replica's loop free.
            longest = max(max_tokens for _, max_tokens in requests)
            chats = [messages for messages, _ in requests]
            return list(await asyncio.to_thread(batch_generate, chats, max_tokens=longest))
        return list(
            await asyncio.gather(*(self._chat.complete(m, max_tokens=t) for m, t in requests))
        )


def generator_options(models: ModelSettings) -> dict[str, Any]:
    """Deployment options of the Generator pool from configuration (0 GPUs on a CPU machine)."""
    low = int(models.generator_min_replicas)
    high = max(low, int(models.generator_max_replicas))
    return {
        "autoscaling_config": {
            "min_replicas": low,
            "initial_replicas": low,
            "max_replicas": high,
            "target_ongoing_requests": models.generator_target_ongoing_requests,
        },
        "ray_actor_options": {"num_cpus": 1, "num_gpus": models.num_gpus},
    }


class PoolEmbedder:
    """The embedder pool as a profile actor calls it; no call waits forever.

    A call with no answer within ``models.embedder_timeout_s`` is sent once more through
    a new handle (a Serve handle can stop routing, as after the pool's replicas restart),
    then fails with ``ModelUnavailable`` (503). A background call may wait
    ``embedder_background_max_delay_s`` longer: the pool holds it back on purpose.
    """

    def __init__(self, app_name: str, models: ModelSettings) -> None:
        self._app_name = app_name
        self._timeout_s = models.embedder_timeout_s
        self._background_timeout_s = (
            models.embedder_timeout_s + models.embedder_background_max_delay_s
        )

    async def info(self) -> dict[str, Any]:
        """The pool's ``EmbedderPool.info``: the model's name and dimension."""
        info: dict[str, Any] = await self._call("info", timeout_s=self._timeout_s)
        return info

    async def embed(self, texts: list[str]) -> np.ndarray:
        vectors: np.ndarray = await self._call("embed", texts, timeout_s=self._timeout_s)
        return vectors

    async def embed_background(self, texts: list[str]) -> np.ndarray:
        vectors: np.ndarray = await self._call(
            "embed_background", texts, timeout_s=self._background_timeout_s
        )
        return vectors

    async def _call(self, method: str, *args: Any, timeout_s: float) -> Any:
        for attempt in range(1, POOL_ATTEMPTS + 1):
            handle = pool_handle(EMBEDDER_DEPLOYMENT, self._app_name)
            try:
                return await asyncio.wait_for(getattr(handle, method).remote(*args), timeout_s)
            except TimeoutError:
                log.warning(
                    "embedder pool: no answer to %s within %g s (attempt %d of %d)",
                    method,
                    timeout_s,
                    attempt,
                    POOL_ATTEMPTS,
                )
                drop_pool_handle(EMBEDDER_DEPLOYMENT, self._app_name, handle)
        raise ModelUnavailable("embedder", timeout_s)


class PoolChat:
    """A ``ChatModel`` that calls the Generator pool through its deployment handle.

    Args:
        handle: the pool's deployment handle.
        profile: tags every call, so the pool keeps this profile on one replica;
            empty: no affinity.
    """

    def __init__(self, handle: Any, profile: str = "") -> None:
        self._handle = handle.options(multiplexed_model_id=profile) if profile else handle

    async def complete(self, messages: list[dict[str, str]], *, max_tokens: int) -> str:
        return str(await self._handle.complete.remote(messages, max_tokens))


def pool_generator(handle: Any, models: ModelSettings, profile: str = "") -> LLMGenerator:
    """The Generator a profile actor uses with a model backend: prompts here, model in the pool.

    Args:
        handle: ``serve.get_deployment_handle(GENERATOR_DEPLOYMENT, app_name=...)``.
        models: the model settings (backend name, ``generator_max_tokens``).
        profile: the calling profile, for replica affinity when the pool keeps a
            prompt cache (``generator_prompt_cache_entries`` > 0).
    """
    affinity = profile if models.generator_prompt_cache_entries > 0 else ""
    return LLMGenerator(
        PoolChat(handle, affinity),
        name=models.generator,
        max_tokens=int(models.generator_max_tokens),
    )
