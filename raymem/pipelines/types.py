"""The data the pipelines pass between their stages. No Ray imports.

A conversation is cut into ``Chunk``s of numbered ``Line``s; a generator proposes
``Extracted`` items citing those lines; classification turns each into a complete
``Candidate``; reconciliation compares it with ``Neighbour``s and reaches a
``Decision``.
"""

from typing import Literal

import msgspec

from raymem.types import MemoryRecord, MemoryType

Focus = Literal["full", "detail"]  # an extraction pass: everything, or concrete values only
Action = Literal["add", "duplicate", "supersede"]
MEMORY_TYPES: tuple[MemoryType, ...] = ("fact", "event", "instruction", "task")


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
    type: MemoryType | None = None  # None: left to classification
    topic_key: str | None = None
    event_time: str | None = None
    importance: float | None = None
    confidence: float | None = None
    questions: list[str] = []


class Candidate(MemoryRecord, kw_only=True):
    """A classified memory on its way to the store, before reconciliation.

    A memory's fields with where in each source message it was said and the
    questions it answers (``MemoryRecord``); the store adds its id and time.
    """


class Neighbour(msgspec.Struct, frozen=True, kw_only=True):
    """A stored memory close to a new one, with their cosine similarity."""

    id: str
    content: str
    similarity: float
    topic_key: str | None = None


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """What reconciliation does with a new memory: add it, skip it, or supersede ``target``."""

    action: Action
    target: str | None = None
