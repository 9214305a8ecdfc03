"""Chat models: messages in, the assistant's text out, behind one protocol. No Ray imports.

Two backends, chosen by ``models.generator`` in the configuration:

- ``openai``: any OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp
  server, Ollama, hosted APIs), through ``OpenAIChat``.
- ``transformers``: a Hugging Face causal LM located with huggingface-hub, run
  here by ``TransformersChat``; in a cluster it runs inside the Generator pool
  and profile actors reach it through a ``ChatModel`` that calls the pool's
  deployment handle (``raymem.actors.pools``).

What is asked of a chat model (the extraction and decision prompts) and how its
answers are read is pipeline logic: ``raymem.pipelines.generators``.
"""

import asyncio
import copy
import os
from typing import Any, Protocol

from raymem.config import ModelSettings
from raymem.models.locate import locate_model
from raymem.models.prompt_cache import MIN_SHARED_TOKENS, PromptCache, shared_prefix_length

ChatMessage = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": ...}

# Retries of a failed endpoint call wait 0.2 s, 0.4 s, 0.8 s, ... up to 5 s: long
# enough for a restarting server or a rate limit, short against the call's timeout.
RETRY_FIRST_WAIT_S = 0.2
RETRY_MAX_WAIT_S = 5.0


class MalformedAnswer(ValueError):
    """A model answered something other than what it was asked for."""


class ChatModel(Protocol):
    """A chat-completion model: messages in, the assistant's text out."""

    async def complete(self, messages: list[ChatMessage], *, max_tokens: int) -> str: ...


class OpenAIChat:
    """An OpenAI-compatible ``/chat/completions`` endpoint over httpx, with timeouts and retries.

    Args:
        base_url: the API root including its version, e.g. ``http://127.0.0.1:8080/v1``.
        model: the model name the server expects.
        api_key: sent as a bearer token when not empty.
        timeout_s: per-request timeout.
        attempts: tries per call (connection errors, timeouts, 429 and 5xx are retried).
        json_mode: ask for ``response_format: {"type": "json_object"}``.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "",
        timeout_s: float = 60.0,
        attempts: int = 3,
        json_mode: bool = True,
    ) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s
        )
        self._model, self._attempts, self._json_mode = model, attempts, json_mode

    async def complete(self, messages: list[ChatMessage], *, max_tokens: int) -> str:
        """The assistant's text for ``messages``.

        Raises:
            httpx.HTTPError: the endpoint failed on every attempt or refused the request.
            MalformedAnswer: the response is not a chat completion.
        """
        from tenacity import (
            AsyncRetrying,
            retry_if_exception,
            stop_after_attempt,
            wait_exponential,
        )

        body: dict[str, Any] = {
            "model": self._model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": max_tokens,
        }
        if self._json_mode:
            body["response_format"] = {"type": "json_object"}
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(_retryable),
            stop=stop_after_attempt(self._attempts),
            wait=wait_exponential(multiplier=RETRY_FIRST_WAIT_S, max=RETRY_MAX_WAIT_S),
            reraise=True,
        ):
            with attempt:
                response = await self._client.post("/chat/completions", json=body)
                response.raise_for_status()
        try:
            return str(response.json()["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise MalformedAnswer(f"not a chat completion: {response.text[:200]!r}") from exc

    async def close(self) -> None:
        await self._client.aclose()


def _retryable(exc: BaseException) -> bool:
    import httpx

    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code == 429 or exc.response.status_code >= 500
    return isinstance(exc, httpx.TransportError)


class TransformersChat:
    """A Hugging Face causal LM, greedy decoding; located by hub id or local directory.

    Generation blocks: ``complete`` runs it in a thread; the Generator pool calls
    ``complete_batch`` with the prompts of concurrent callers. The key/value
    states of the tokens a batch's prompts share are computed once and kept in a
    ``PromptCache`` for the next batch (``prompt_cache_entries``: 0 turns it off).

    Args:
        name: a hub repository id or a local directory.
        device: ``cpu``, ``cuda`` or None (cuda when available).
        threads: torch CPU threads (0: leave torch's default).
        prompt_cache_entries: prompt prefixes whose states are kept.
    """

    def __init__(
        self,
        name: str,
        *,
        device: str | None = None,
        threads: int = 0,
        prompt_cache_entries: int = 8,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)  # under contention the default pool spins
        path = locate_model(name)
        self.name = name
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self._tokenizer = AutoTokenizer.from_pretrained(str(path))
        self._tokenizer.padding_side = "left"  # generation continues after the prompt
        if self._tokenizer.pad_token is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(str(path))
        # transformers decorates PreTrainedModel.to so that its stub does not bind self.
        self._model = model.to(self.device).eval()  # type: ignore[arg-type]
        self.prompt_cache = PromptCache(prompt_cache_entries)

    def _prompt(self, messages: list[ChatMessage]) -> str:
        if getattr(self._tokenizer, "chat_template", None):
            return str(
                self._tokenizer.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=True
                )
            )
        turns = "\n".join(f"{m['role']}: {m['content']}" for m in messages)
        return f"{turns}\nassistant:"

    def complete_batch(self, batch: list[list[ChatMessage]], *, max_tokens: int) -> list[str]:
        """Greedy completions for several conversations at once (one padded batch)."""
        import torch

        prompts = [self._prompt(messages) for messages in batch]
        rows = [list(ids) for ids in self._tokenizer(prompts)["input_ids"]]
        shared = shared_prefix_length(rows) if self.prompt_cache.entries > 0 else 0
        if shared >= MIN_SHARED_TOKENS:
            inputs, states, computed = self._with_shared_states(rows, shared)
        else:
            inputs = self._tokenizer(prompts, return_tensors="pt", padding=True).to(self.device)
            states, computed = None, sum(len(row) for row in rows)
        self.prompt_cache.count(sum(len(row) for row in rows), computed)
        with torch.inference_mode():
            output = self._model.generate(
                **inputs,
                cache=states,
                max_new_tokens=max_tokens,
                do_sample=False,
                pad_token_id=self._tokenizer.pad_token_id,
            )
        new_tokens = output[:, inputs["input_ids"].shape[1] :]
        return [str(t) for t in self._tokenizer.batch_decode(new_tokens, skip_special_tokens=True)]

    def _with_shared_states(
        self, rows: list[list[int]], shared: int
    ) -> tuple[dict[str, Any], Any, int]:
        """Inputs whose first ``shared`` tokens come with their states already computed.

        The states of the shared part come from the cache where it holds them and
        are computed (once for the whole batch) where it does not. Each row is
        then padded in the middle: shared part, padding, its own tokens.

        Returns:
            The generate inputs, the states for the batch, and how many prompt
            tokens had to be computed.
        """
        import torch

        prefix = rows[0][:shared]
        held, cached = self.prompt_cache.lookup(prefix)
        if cached is None or held < shared:  # compute the part of the prefix it lacks
            with torch.inference_mode():
                rest = torch.tensor([prefix[held:]], device=self.device)
                output = self._model(input_ids=rest, cache=cached, use_cache=True)
            states = output.past_key_values
        else:
            states = cached
        self.prompt_cache.keep(prefix, states)
        longest = max(len(row) - shared for row in rows)
        ids, mask = [], []
        pad = int(self._tokenizer.pad_token_id)
        for row in rows:
            own = row[shared:]
            gap = longest - len(own)
            ids.append(prefix + [pad] * gap + own)
            mask.append([1] * shared + [0] * gap + [1] * len(own))
        states = copy.deepcopy(states)  # generate extends it; the cache keeps its own copy
        if len(rows) > 1:
            states.batch_repeat_interleave(len(rows))
        inputs = {
            "input_ids": torch.tensor(ids, device=self.device),
            "attention_mask": torch.tensor(mask, device=self.device),
        }
        computed = (shared - held) + sum(len(row) - shared for row in rows)
        return inputs, states, computed

    async def complete(self, messages: list[ChatMessage], *, max_tokens: int) -> str:
        [text] = await asyncio.to_thread(self.complete_batch, [messages], max_tokens=max_tokens)
        return text


def make_chat_model(models: ModelSettings) -> ChatModel:
    """The chat model that ``models.generator`` names (``openai`` or ``transformers``).

    Raises:
        ValueError: the backend is unknown or its settings are incomplete.
    """
    backend = models.generator
    if backend == "openai":
        if not models.openai_base_url or not models.openai_model:
            raise ValueError("models.generator = 'openai' needs openai_base_url and openai_model")
        key_env = models.openai_api_key_env
        return OpenAIChat(
            models.openai_base_url,
            models.openai_model,
            api_key=os.environ.get(key_env, "") if key_env else "",
            timeout_s=models.generator_timeout_s,
            attempts=models.generator_attempts,
            json_mode=models.openai_json_mode,
        )
    if backend == "transformers":
        name = models.generator_model
        if not name:
            raise ValueError("models.generator = 'transformers' needs models.generator_model")
        device = "cuda" if models.num_gpus > 0 else "cpu"
        return TransformersChat(
            name,
            device=device,
            threads=models.generator_threads,
            prompt_cache_entries=models.generator_prompt_cache_entries,
        )
    raise ValueError(f"Unknown generator backend {backend!r}")
