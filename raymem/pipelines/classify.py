"""Classification: type, importance, confidence, topic key and search questions per memory.

Whatever a model proposed is normalised and checked here; what it left out is
filled in by the rules, so every memory leaves this stage complete: one of the
four types, scores in [0, 1], a ``subject.attribute`` key for facts and
instructions where one applies, an ISO date for events, and 3–5 questions.
"""

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from raymem.pipelines import rules
from raymem.pipelines.language import split_speaker
from raymem.pipelines.types import MEMORY_TYPES, Candidate, Extracted
from raymem.types import MemoryType

# An inferred memory whose generator gave no confidence: as sure as the rules are.
DEFAULT_CONFIDENCE = 0.8

EmbedFn = Callable[[list[str]], Awaitable[np.ndarray]]

# Example sentences of each memory type. Their mean embeddings are the prototypes
# that tell an event from a fact where no pattern does ("I caught a huge trout at
# the lake" has no dated or listed verb). Instructions and tasks compete, so an
# imperative is not pulled towards "event", but are never adopted from here: on
# chit-chat such as LoCoMo's, encouragement ("keep pushing on!") and thanks
# resembled them too often, and both need explicit wording (see
# ``rules.classify_by_pattern``).
TYPE_EXAMPLES: dict[MemoryType, tuple[str, ...]] = {
    "fact": (
        "My sister is a nurse in Toronto.",
        "I have two cats named Miso and Tofu.",
        "I love painting landscapes.",
        "Our team uses PostgreSQL for the billing service.",
        "I am vegetarian.",
        "My favourite band is Radiohead.",
        "The office is on the third floor.",
        "He is allergic to peanuts.",
        "I speak Spanish and a little Japanese.",
        "Music helps me focus when I work.",
        "She works as a software engineer at a bank.",
        "Family is the most important thing to me.",
    ),
    "event": (
        "I ran my first marathon last spring.",
        "We got married on the beach in June.",
        "I adopted a puppy from the shelter.",
        "The server crashed during the demo.",
        "My grandmother passed away when I was ten.",
        "I painted a sunset over the lake for my mother.",
        "We celebrated her birthday at an Italian restaurant.",
        "I took my kids to the museum.",
        "The team released version 2 to customers.",
        "I got a promotion at work.",
        "I fed a horse a carrot at the farm.",
        "I signed up for a pottery class.",
    ),
    "instruction": (
        "Always answer in British English.",
        "Keep your replies under three sentences.",
        "Don't use emojis in your answers.",
        "Write code examples in TypeScript.",
        "Please address me by my first name.",
        "Format dates as day, month, year.",
        "Explain things step by step without jargon.",
        "Cite your sources when you give facts.",
        "Never share my phone number with anyone.",
        "Use metric units in every answer.",
        "Answers should be short and in bullet points.",
        "Be blunt with feedback on my drafts.",
    ),
    "task": (
        "Remind me to call the dentist on Monday.",
        "I need to renew my passport before the trip.",
        "Book a table for four on Friday night.",
        "The report is due at the end of the month.",
        "We have to migrate the database next sprint.",
        "Send the invoice to the client tomorrow.",
        "Buy milk and eggs on the way home.",
        "I still have to finish the slides for Thursday.",
        "Schedule a meeting with the design team.",
        "Don't forget to water the plants while I'm away.",
        "Pick up the dry cleaning before six.",
        "Fix the login bug before the release.",
    ),
}
# How much closer to the event prototype than to the fact prototype a sentence
# must be to become an event: at 0.05 cosine, 18 of the 20 held-out sentences of
# tests/test_classify.py (10 events, 10 facts) are settled right.
EVENT_MARGIN = 0.05


class TypePrototypes:
    """The prototype vector of each memory type, embedded once on first use."""

    def __init__(self, examples: dict[MemoryType, tuple[str, ...]] = TYPE_EXAMPLES) -> None:
        self.types: list[MemoryType] = list(examples)
        self._examples = examples
        self._matrix: np.ndarray | None = None  # one unit row per type
        self._lock = asyncio.Lock()

    async def _prototypes(self, embed: EmbedFn) -> np.ndarray:
        async with self._lock:
            if self._matrix is None:
                rows = []
                for memory_type in self.types:
                    mean = np.asarray(await embed(list(self._examples[memory_type]))).mean(axis=0)
                    rows.append(mean / np.linalg.norm(mean))
                self._matrix = np.stack(rows).astype(np.float32)
        return self._matrix

    async def settle(self, texts: Sequence[str], embed: EmbedFn) -> list[MemoryType]:
        """Event or fact for each text whose type no pattern gave.

        Args:
            texts: the memories' contents, exactly as they will be embedded
                (a caching ``embed`` then computes each vector once).
            embed: texts -> unit vectors.
        """
        if not texts:
            return []
        prototypes = await self._prototypes(embed)
        scores = np.asarray(await embed(list(texts))) @ prototypes.T
        fact, event = self.types.index("fact"), self.types.index("event")
        best = scores.argmax(axis=1)
        return [
            "event" if best[i] == event and row[event] - row[fact] >= EVENT_MARGIN else "fact"
            for i, row in enumerate(scores)
        ]


def needs_type(item: Extracted) -> bool:
    """Whether neither the generator, a pattern nor a topic key settled the item's type."""
    if item.type in MEMORY_TYPES or item.topic_key:
        return False
    _, text = split_speaker(item.content)
    return rules.classify_by_pattern(text) is None


async def settle_types(
    items: Sequence[Extracted], prototypes: TypePrototypes | None, embed: EmbedFn | None
) -> None:
    """Give every item that still needs a type the one its embedding is closest to, in place.

    Without prototypes or an embedder the items stay open and classify as facts.
    """
    if prototypes is None or embed is None:
        return
    open_items = [item for item in items if needs_type(item)]
    settled = await prototypes.settle([item.content.strip() for item in open_items], embed)
    for item, memory_type in zip(open_items, settled, strict=True):
        item.type = memory_type


def _clamp(value: float | None, default: float) -> float:
    return default if value is None else max(0.0, min(1.0, float(value)))


def _subject(content: str) -> tuple[str, str]:
    """Key segment and question wording of whom a memory is about."""
    speaker, _ = split_speaker(content)
    return rules.subject_key(speaker), speaker or "the user"


def classify_item(
    item: Extracted,
    *,
    source_message_ids: list[str],
    source_spans: list[tuple[int, int]],
    message_date: str | None,
) -> Candidate:
    """A complete candidate memory from a verified item.

    Args:
        item: a verified item (its event_time already resolved).
        source_message_ids: the messages it came from.
        source_spans: (first, last) sentence index within each of those messages.
        message_date: the date of its first source message, for events without a date phrase.
    """
    _, text = split_speaker(item.content)
    ruled_type, ruled_importance = rules.classify(text)
    memory_type = item.type if item.type in MEMORY_TYPES else ruled_type
    key_subject, named = _subject(item.content)
    topic_key = None
    if memory_type in ("fact", "instruction"):
        topic_key = rules.normalise_topic_key(item.topic_key, subject=key_subject)
        topic_key = topic_key or rules.topic_key_for(text, memory_type, subject=key_subject)
    event_time = None
    if memory_type == "event":
        # An event with no date phrase is dated by the turn that reports it.
        event_time = (item.event_time or message_date or "")[:10] or None
    elif memory_type == "task":
        event_time = (item.event_time or "")[:10] or None  # when it is due, if it says

    questions = [q.strip() for q in item.questions if q.strip().endswith("?")]
    questions = list(dict.fromkeys(questions))[: rules.MAX_QUESTIONS]
    if len(questions) < rules.MIN_QUESTIONS:
        templated = rules.search_questions(text, memory_type, topic_key, subject=named)
        questions = list(dict.fromkeys([*questions, *templated]))[: rules.MAX_QUESTIONS]
    return Candidate(
        type=memory_type,
        content=item.content.strip(),
        topic_key=topic_key,
        event_time=event_time,
        importance=_clamp(item.importance, ruled_importance),
        confidence=_clamp(item.confidence, DEFAULT_CONFIDENCE),
        source_message_ids=source_message_ids,
        source_spans=source_spans,
        search_queries=questions,
    )
