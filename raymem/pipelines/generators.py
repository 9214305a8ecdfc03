"""Generators: extraction and reconciliation decisions, behind one protocol. No Ray imports.

Two kinds, chosen by ``models.generator`` in the configuration:

- ``rules``: the embedded default (``RulesGenerator``), deterministic and offline.
- ``openai`` or ``transformers``: ``LLMGenerator`` over a chat model
  (``raymem.models.chat``): structured JSON prompts, parsed and validated answers.

An answer that is not the JSON asked for raises ``MalformedAnswer``; the ingest
pipeline then uses the rules result for that chunk, so a bad model answer never
fails an ingest.
"""

import json
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec

from raymem.config import ModelSettings
from raymem.models.chat import ChatMessage, ChatModel, MalformedAnswer, make_chat_model
from raymem.pipelines import rules
from raymem.pipelines.language import WORD, content_words, split_speaker
from raymem.pipelines.types import Action, Chunk, Decision, Extracted, Focus, Line, Neighbour

# The rules generator's scores: an item of the detail pass quotes a concrete value
# (a name, a price, a version), so it is a little more important and more certain.
RULES_CONFIDENCE = 0.8
DETAIL_CONFIDENCE = 0.9
DETAIL_IMPORTANCE_BONUS = 0.1
# Near-identical by rules: this cosine similarity, or this share of shared content
# words (Jaccard), and the same concrete values ("room 14" and "room 15" embed almost
# alike, yet say different things).
DUPLICATE_SIMILARITY = 0.95
DUPLICATE_WORD_OVERLAP = 0.9
# A new state of the speaker replaces an older one at least this similar ("I'm fully
# vegan now" and "I'm vegetarian, so no meat for me": 0.61; "I'm married now" and
# "I'm single": 0.58; unrelated states such as "I'm really tired now" and "I'm so
# happy with my new job": 0.22).
STATE_UPDATE_SIMILARITY = 0.55
# Answer lengths: an extraction of about 20 memories with their questions (models.
# generator_max_tokens configures it), and a decision, one short JSON object
# ({"decision": "supersede", "target": "<32 hex digits>"}).
EXTRACT_MAX_TOKENS = 1024
DECISION_MAX_TOKENS = 64


class ExtractAnswer(msgspec.Struct):
    memories: list[Extracted]


class DecisionAnswer(msgspec.Struct, frozen=True):
    """A model's decision, as the prompt asks for it."""

    decision: Action
    target: str | None = None


class Generator(Protocol):
    """Proposes memories from a chunk and decides how a new memory relates to stored ones.

    ``known`` is what the agent already holds (the core blocks' entries, for a
    flush): a model is shown it and asked not to extract it again; the rules
    ignore it here, and ingest leaves out what repeats it afterwards, whoever
    extracted it (``pipelines.known``).
    """

    name: str

    async def extract(
        self, chunk: Chunk, *, focus: Focus = "full", known: Sequence[str] = ()
    ) -> list[Extracted]: ...

    async def decide(self, content: str, neighbours: Sequence[Neighbour]) -> Decision: ...


def rules_item(line: Line, *, detail: bool = False) -> Extracted:
    """The rules generator's item for one transcript line.

    Its type is left open (None) when no pattern fires, so that classification
    can settle it with the embedding prototypes; until then it reads as a fact.
    """
    by_pattern = rules.classify_by_pattern(line.text)
    memory_type, importance = by_pattern or ("fact", rules.DEFAULT_IMPORTANCE)
    subject = rules.subject_key(line.speaker)
    key = rules.topic_key_for(line.text, memory_type, subject=subject)
    content = f"{line.speaker}: {line.text}" if line.speaker else line.text
    return Extracted(
        content=content,
        lines=[line.index],
        type=memory_type if by_pattern else None,
        topic_key=key,
        importance=min(1.0, importance + DETAIL_IMPORTANCE_BONUS) if detail else importance,
        confidence=DETAIL_CONFIDENCE if detail else RULES_CONFIDENCE,
        questions=rules.search_questions(
            line.text, memory_type, key, subject=line.speaker or "the user"
        ),
    )


def decide_by_rules(content: str, neighbours: Sequence[Neighbour]) -> Decision:
    """Near-identical text is a duplicate; the same subject and attribute supersedes; else add.

    Near-identical means a very high similarity or word overlap *and* the same
    concrete values: "room 14" and "room 15" embed almost alike, yet say different
    things. The same attribute: the same topic key (of the same speaker), or a new
    state of the speaker ("I'm fully vegan now") close to an older one ("I'm
    vegetarian"): see ``rules.updates_state``.

    Args:
        content: the new memory's text.
        neighbours: the nearest stored memories, most similar first.
    """
    words = set(content_words(content))
    values = {v.lower() for v in rules.concrete_values(content)}
    key = _speaker_key(content)
    for neighbour in neighbours:
        other = set(content_words(neighbour.content))
        overlap = len(words & other) / max(1, len(words | other))
        same_values = values == {v.lower() for v in rules.concrete_values(neighbour.content)}
        near = neighbour.similarity >= DUPLICATE_SIMILARITY or overlap >= DUPLICATE_WORD_OVERLAP
        if same_values and near:
            return Decision(action="duplicate", target=neighbour.id)
    for neighbour in neighbours:
        other_key = neighbour.topic_key or _speaker_key(neighbour.content)
        if key is not None and key == other_key:
            return Decision(action="supersede", target=neighbour.id)
    for neighbour in neighbours:
        if neighbour.similarity >= STATE_UPDATE_SIMILARITY and rules.updates_state(
            content, neighbour.content
        ):
            return Decision(action="supersede", target=neighbour.id)
    return Decision(action="add")


def _speaker_key(content: str) -> str | None:
    """The fact key of a statement, about whoever says it ("Caroline: I live in ...")."""
    speaker, text = split_speaker(content)
    return rules.topic_key_for(text, "fact", subject=rules.subject_key(speaker))


class RulesGenerator:
    """The embedded default: sentence segmentation, pattern classification, template questions."""

    name = "rules"

    async def extract(
        self, chunk: Chunk, *, focus: Focus = "full", known: Sequence[str] = ()
    ) -> list[Extracted]:
        """Items from every informative user sentence (full) or every value-bearing one (detail).

        Assistant turns contribute only tasks: what the assistant says is not
        evidence about the user. ``known`` is not consulted: ingest leaves out
        what repeats it, by text and by embedding (``pipelines.known``).
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
    if text.rstrip().endswith("?") or len(WORD.findall(text)) < rules.MIN_WORDS:
        return False
    return bool(rules.concrete_values(text))


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

KNOWN_CONTEXT = """Already known (the agent's core memory). Do not extract anything these entries
already state, even in other words; extract only what is new, or what changes one of them:"""

DECIDE_SYSTEM = """You keep a memory store current. Given a new memory and similar stored ones,
answer with one JSON object and nothing else:
{"decision": "add" | "duplicate" | "supersede", "target": "<id of the stored memory>" or null}
duplicate: a stored memory already says the same. supersede: the new memory updates the same
attribute of the same subject as the target. add: anything else."""


def extract_prompt(chunk: Chunk, focus: Focus, known: Sequence[str] = ()) -> list[ChatMessage]:
    """The chat messages asking a model to extract memories from a chunk.

    Args:
        chunk: the transcript to extract from.
        focus: the pass (everything, or concrete values only).
        known: entries the agent already holds, listed before the transcript
            with the instruction not to extract them again.
    """
    task = DETAIL_FOCUS if focus == "detail" else "Extract every memory worth keeping."
    context = "".join(f"- {' '.join(entry.split())}\n" for entry in known)
    shown = f"{KNOWN_CONTEXT}\n{context}\n" if context else ""
    # The known entries come first and the task last: every pass over every chunk
    # of a request then starts with the same tokens, and both passes over a chunk
    # share its transcript too, which a backend with a prompt cache computes once.
    return [
        {"role": "system", "content": EXTRACT_SYSTEM},
        {"role": "user", "content": f"{shown}Transcript:\n{chunk.render()}\n\n{task}"},
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

    def __init__(
        self, chat: ChatModel, *, name: str = "llm", max_tokens: int = EXTRACT_MAX_TOKENS
    ) -> None:
        self.name = name
        self._chat = chat
        self._max_tokens = max_tokens

    @property
    def chat(self) -> ChatModel:
        """The chat model behind it (recall asks it too: ``recall_model``)."""
        return self._chat

    async def extract(
        self, chunk: Chunk, *, focus: Focus = "full", known: Sequence[str] = ()
    ) -> list[Extracted]:
        """Items the model proposes for a chunk, told not to repeat what ``known`` states.

        Raises:
            MalformedAnswer: the model's answer is not the JSON asked for.
        """
        answer = await self._chat.complete(
            extract_prompt(chunk, focus, known), max_tokens=self._max_tokens
        )
        return parse_extract_answer(answer)

    async def decide(self, content: str, neighbours: Sequence[Neighbour]) -> Decision:
        """The model's add / duplicate / supersede decision.

        Raises:
            MalformedAnswer: the model's answer is not a valid decision.
        """
        answer = await self._chat.complete(
            decide_prompt(content, neighbours), max_tokens=DECISION_MAX_TOKENS
        )
        return parse_decision(answer, neighbours)


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
