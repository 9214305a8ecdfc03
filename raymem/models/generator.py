"""Generators: extraction and reconciliation decisions, behind one protocol. No Ray imports.

Three backends, chosen by ``models.generator`` in the configuration:

- ``rules``: the embedded default (``RulesGenerator``), deterministic and offline.
- ``openai``: any OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp
  server, Ollama, hosted APIs), through ``LLMGenerator(OpenAIChat(...))``.
- ``transformers``: a Hugging Face causal LM located with huggingface-hub,
  through ``LLMGenerator(TransformersChat(...))``; in a cluster it runs inside the
  Generator pool and profile actors reach it through a ``ChatModel`` that calls
  the pool's deployment handle (``raymem.actors.pools``).

Model backends answer structured JSON prompts. An answer that is not the JSON
asked for raises ``MalformedAnswer``; the ingest pipeline then uses the rules
result for that chunk, so a bad model answer never fails an ingest.
"""

import asyncio
import copy
import json
import logging
import os
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import msgspec

from raymem.config import ModelSettings
from raymem.models import rules
from raymem.models.prompt_cache import MIN_SHARED_TOKENS, PromptCache, shared_prefix_length

log = logging.getLogger(__name__)

MemoryType = Literal["fact", "event", "instruction", "task"]
Focus = Literal["full", "detail"]
Action = Literal["add", "duplicate", "supersede"]
MEMORY_TYPES = ("fact", "event", "instruction", "task")
ChatMessage = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": ...}


class MalformedAnswer(ValueError):
    """A model answered something other than the JSON it was asked for."""


# ------------------------------------------------------------------ data


class Line(msgspec.Struct, frozen=True, kw_only=True):
    """One sentence of a turn, as a numbered line of a chunk's transcript."""

    index: int  # the line's number in the chunk's transcript
    message_id: str
    line: int  # the sentence's index within its message: provenance that survives chunking
    role: str
    speaker: str | None = None  # a name given inside the turn ("Caroline: ...")
    date: str  # the message's date, ISO 8601
    text: str


class Chunk(msgspec.Struct, frozen=True, kw_only=True):
    """A window of a conversation: whole messages, rendered as numbered transcript lines."""

    number: int
    message_ids: list[str]
    lines: list[Line]

    def render(self) -> str:
        """The transcript a model reads: ``[line] date role (speaker): text``."""
        out = []
        for line in self.lines:
            who = f"{line.role} ({line.speaker})" if line.speaker else line.role
            out.append(f"[{line.index}] {line.date} {who}: {line.text}")
        return "\n".join(out)


class Extracted(msgspec.Struct, kw_only=True):
    """An item proposed by a generator; ``lines`` are transcript line numbers of its chunk."""

    content: str
    lines: list[int] = []
    type: MemoryType | None = None
    topic_key: str | None = None
    event_time: str | None = None
    importance: float | None = None
    confidence: float | None = None
    questions: list[str] = []


class ExtractAnswer(msgspec.Struct):
    memories: list[Extracted]


class Neighbour(msgspec.Struct, frozen=True, kw_only=True):
    """A stored memory close to a new one, with their cosine similarity."""

    id: str
    content: str
    similarity: float
    topic_key: str | None = None


class DecisionAnswer(msgspec.Struct, frozen=True):
    """A model's decision, as the prompt asks for it."""

    decision: Action
    target: str | None = None


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """What reconciliation does with a new memory: add it, skip it, or supersede ``target``."""

    action: Action
    target: str | None = None


# ------------------------------------------------------------- protocols


class Generator(Protocol):
    """Proposes memories from a chunk and decides how a new memory relates to stored ones."""

    name: str

    async def extract(self, chunk: Chunk, *, focus: Focus = "full") -> list[Extracted]: ...

    async def decide(self, content: str, neighbours: Sequence[Neighbour]) -> Decision: ...


class ChatModel(Protocol):
    """A chat-completion model: messages in, the assistant's text out."""

    async def complete(self, messages: list[ChatMessage], *, max_tokens: int) -> str: ...


# ------------------------------------------------------------------ rules


def rules_item(line: Line, *, detail: bool = False) -> Extracted:
    """The rules generator's item for one transcript line.

    Its type is left open (None) when no pattern fires, so that classification
    can settle it with the embedding prototypes; until then it reads as a fact.
    """
    by_pattern = rules.classify_by_pattern(line.text)
    memory_type, importance = by_pattern or ("fact", 0.5)
    subject = rules.subject_key(line.speaker)
    key = rules.topic_key_for(line.text, memory_type, subject=subject)
    content = f"{line.speaker}: {line.text}" if line.speaker else line.text
    return Extracted(
        content=content,
        lines=[line.index],
        type=memory_type if by_pattern else None,  # type: ignore[arg-type]
        topic_key=key,
        importance=min(1.0, importance + 0.1) if detail else importance,
        confidence=0.9 if detail else 0.8,
        questions=rules.search_questions(
            line.text, memory_type, key, subject=line.speaker or "the user"
        ),
    )


def decide_by_rules(content: str, neighbours: Sequence[Neighbour]) -> Decision:
    """Near-identical text is a duplicate; the same subject and attribute supersedes; else add.

    Near-identical means a very high similarity or word overlap *and* the same
    concrete values: "room 14" and "room 15" embed almost alike, yet say different
    things.

    Args:
        content: the new memory's text.
        neighbours: the nearest stored memories, most similar first.
    """
    words = set(rules.content_words(content))
    values = {v.lower() for v in rules.concrete_values(content)}
    key = rules.topic_key_for(content, "fact")
    for neighbour in neighbours:
        other = set(rules.content_words(neighbour.content))
        overlap = len(words & other) / max(1, len(words | other))
        same_values = values == {v.lower() for v in rules.concrete_values(neighbour.content)}
        if same_values and (neighbour.similarity >= 0.95 or overlap >= 0.9):
            return Decision(action="duplicate", target=neighbour.id)
    for neighbour in neighbours:
        other_key = neighbour.topic_key or rules.topic_key_for(neighbour.content, "fact")
        if key is not None and key == other_key:
            return Decision(action="supersede", target=neighbour.id)
    return Decision(action="add")


class RulesGenerator:
    """The embedded default: sentence segmentation, pattern classification, template questions."""

    name = "rules"

    async def extract(self, chunk: Chunk, *, focus: Focus = "full") -> list[Extracted]:
        """Items from every informative user sentence (full) or every value-bearing one (detail).

        Assistant turns contribute only tasks: what the assistant says is not
        evidence about the user.
        """
        items = []
        for line in chunk.lines:
            if line.role not in ("user", "assistant"):
                continue
            if focus == "full":
                if not rules.is_informative(line.text):
                    continue
                item = rules_item(line)
                if line.role == "user" or item.type == "task":
                    items.append(item)
            elif line.role == "user" and _has_detail(line.text):
                items.append(rules_item(line, detail=True))
        return items

    async def decide(self, content: str, neighbours: Sequence[Neighbour]) -> Decision:
        return decide_by_rules(content, neighbours)


def _has_detail(text: str) -> bool:
    if text.rstrip().endswith("?") or len(rules.WORD.findall(text)) < 3:
        return False
    return bool(rules.concrete_values(text))


# -------------------------------------------------------------- prompting

EXTRACT_SYSTEM = """You extract long-term memories about the user from a conversation transcript.
Each transcript line is "[line number] date role (speaker): text".
Answer with one JSON object and nothing else:
{"memories": [{"content": "one self-contained statement",
  "type": "fact" | "event" | "instruction" | "task",
  "lines": [line numbers that state it],
  "topic_key": "subject.attribute" for facts and instructions (e.g. "user.package_manager"), else null,
  "event_time": "YYYY-MM-DD" for events (resolve relative dates from the line's date), else null,
  "importance": 0.0-1.0, "confidence": 0.0-1.0,
  "questions": [3 to 5 questions this memory answers]}]}
Only state what the cited lines support. Instructions are how the user wants the assistant
to behave; tasks are things to do; events happened at a time; facts are lasting truths."""

DETAIL_FOCUS = """Focus only on concrete values: names of people, places, products and
organisations; prices; versions; quantities; dates. One memory per value, quoting it exactly."""

DECIDE_SYSTEM = """You keep a memory store current. Given a new memory and similar stored ones,
answer with one JSON object and nothing else:
{"decision": "add" | "duplicate" | "supersede", "target": "<id of the stored memory>" or null}
duplicate: a stored memory already says the same. supersede: the new memory updates the same
attribute of the same subject as the target. add: anything else."""


def extract_prompt(chunk: Chunk, focus: Focus) -> list[ChatMessage]:
    """The chat messages asking a model to extract memories from a chunk."""
    task = DETAIL_FOCUS if focus == "detail" else "Extract every memory worth keeping."
    # The task comes last: both passes over a chunk then start with the same
    # tokens, which a backend with a prompt cache computes once.
    return [
        {"role": "system", "content": EXTRACT_SYSTEM},
        {"role": "user", "content": f"Transcript:\n{chunk.render()}\n\n{task}"},
    ]


def decide_prompt(content: str, neighbours: Sequence[Neighbour]) -> list[ChatMessage]:
    """The chat messages asking a model how a new memory relates to stored ones."""
    stored = "\n".join(f'- id "{n.id}": {n.content}' for n in neighbours)
    return [
        {"role": "system", "content": DECIDE_SYSTEM},
        {"role": "user", "content": f"New memory: {content}\nStored memories:\n{stored}"},
    ]


def json_object(text: str) -> Any:
    """The JSON object in a model's answer, tolerating code fences and prose around it.

    Raises:
        MalformedAnswer: there is no parsable JSON object in ``text``.
    """
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise MalformedAnswer(f"no JSON object in the answer: {text[:200]!r}")
    try:
        return json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise MalformedAnswer(f"invalid JSON in the answer: {exc}") from exc


def parse_extract_answer(text: str) -> list[Extracted]:
    """Items from a model's extraction answer.

    Raises:
        MalformedAnswer: the answer is not ``{"memories": [...]}`` with valid items.
    """
    try:
        return msgspec.convert(json_object(text), ExtractAnswer, strict=False).memories
    except msgspec.ValidationError as exc:
        raise MalformedAnswer(f"extraction answer does not match the schema: {exc}") from exc


def parse_decision(text: str, neighbours: Sequence[Neighbour]) -> Decision:
    """A decision from a model's answer; a target must be one of the neighbours.

    Raises:
        MalformedAnswer: not a valid decision.
    """
    try:
        parsed = msgspec.convert(json_object(text), DecisionAnswer, strict=False)
    except msgspec.ValidationError as exc:
        raise MalformedAnswer(f"decision does not match the schema: {exc}") from exc
    decision = Decision(action=parsed.decision, target=parsed.target)
    known = {n.id for n in neighbours}
    if decision.action != "add" and decision.target not in known:
        raise MalformedAnswer(f"decision targets unknown memory {decision.target!r}")
    return decision


class LLMGenerator:
    """A Generator over any chat model: structured JSON prompts, parsed and validated answers."""

    def __init__(self, chat: ChatModel, *, name: str = "llm", max_tokens: int = 1024) -> None:
        self.name = name
        self._chat = chat
        self._max_tokens = max_tokens

    async def extract(self, chunk: Chunk, *, focus: Focus = "full") -> list[Extracted]:
        """Items the model proposes for a chunk.

        Raises:
            MalformedAnswer: the model's answer is not the JSON asked for.
        """
        answer = await self._chat.complete(
            extract_prompt(chunk, focus), max_tokens=self._max_tokens
        )
        return parse_extract_answer(answer)

    async def decide(self, content: str, neighbours: Sequence[Neighbour]) -> Decision:
        """The model's add / duplicate / supersede decision.

        Raises:
            MalformedAnswer: the model's answer is not a valid decision.
        """
        answer = await self._chat.complete(decide_prompt(content, neighbours), max_tokens=64)
        return parse_decision(answer, neighbours)


# ---------------------------------------------------------- chat backends


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
            wait=wait_exponential(multiplier=0.2, max=5),
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

        from raymem.models.locate import locate_model

        if threads:
            torch.set_num_threads(threads)  # under contention the default pool spins
        path = locate_model(name)
        self.name = name
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self._tokenizer = AutoTokenizer.from_pretrained(str(path))
        self._tokenizer.padding_side = "left"  # generation continues after the prompt
        if self._tokenizer.pad_token is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token
        self._model = AutoModelForCausalLM.from_pretrained(str(path)).to(self.device).eval()
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
                past_key_values=states,
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
        held, states = self.prompt_cache.lookup(prefix)
        with torch.inference_mode():
            if held < shared:
                rest = torch.tensor([prefix[held:]], device=self.device)
                states = self._model(input_ids=rest, past_key_values=states, use_cache=True)
                states = states.past_key_values
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


# ---------------------------------------------------------- configuration


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


def make_generator(models: ModelSettings) -> Generator:
    """The Generator that ``models.generator`` names, running in this process.

    ``rules`` needs nothing; ``openai`` calls its endpoint directly; ``transformers``
    loads the model here (in a cluster, prefer the Generator pool).
    """
    if models.generator == "rules":
        return RulesGenerator()
    return LLMGenerator(
        make_chat_model(models),
        name=models.generator,
        max_tokens=models.generator_max_tokens,
    )
