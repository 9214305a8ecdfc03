"""The wire schema of dreams and the review queue (see ``raymem.types`` for the rest).

A dream re-organises a copy of a profile into a candidate that a person reviews
(its diff) and then adopts or discards; the review queue holds low-confidence
supersessions and merges until a person approves or rejects them.
"""

import re
from typing import Annotated, Literal

import msgspec

from raymem.errors import InvalidRequest
from raymem.types import Fraction, Request, Schema

DreamState = Literal["running", "ready", "adopted", "discarded", "failed", "cancelled"]
DreamAction = Literal["merge", "replace", "retire", "insight"]
ReviewModeName = Literal["apply", "review"]
ProposalAction = Literal["supersede", "merge"]
ProposalState = Literal["pending", "approved", "rejected"]

#: Plain-text instructions for a dream ("focus on coding preferences"), at most this long.
MAX_INSTRUCTIONS_CHARS = 4_000
#: Dream and proposal ids, as the server makes them (uuid4 hex).
ID_PATTERN = re.compile(r"[0-9a-f]{32}")


def check_id(value: str, kind: str) -> str:
    """A dream or proposal id, or ``InvalidRequest`` (it names a file: never a path)."""
    if not ID_PATTERN.fullmatch(value):
        raise InvalidRequest(f"Invalid {kind} id {value[:40]!r}: ids are 32 hex digits")
    return value


class DreamRequest(Request, kw_only=True):
    """Start a dream; ``max_sessions`` bounds the recent sessions it reads (the
    server's ``dreams.max_sessions`` is the default and the maximum)."""

    instructions: Annotated[str, msgspec.Meta(max_length=MAX_INSTRUCTIONS_CHARS)] = ""
    max_sessions: Annotated[int, msgspec.Meta(ge=1)] | None = None


class DreamProgress(Schema, kw_only=True):
    """How far a dream got: the last step it completed, of ``total``."""

    step: str
    done: int
    total: int


class DreamStatus(Schema, kw_only=True):
    """A dream: its state, progress and counts (memories read, merged, replaced, ...)."""

    id: str
    state: DreamState
    progress: DreamProgress
    counts: dict[str, int]
    instructions: str
    max_sessions: int
    started_at: str
    finished_at: str | None = None
    error: str | None = None


class DreamList(Schema, kw_only=True):
    dreams: list[DreamStatus]


class DreamChange(Schema, kw_only=True):
    """One change of a dream, with why.

    ``merge`` and ``replace`` keep ``kept`` and supersede the other ``memory_ids``
    by it; ``retire`` hides ``memory_ids`` from recall (never deletes them);
    ``insight`` adds a new statement drawn from ``memory_ids``. ``content`` is what
    holds afterwards (for ``retire``, what was retired); ``evidence`` the turns
    that support it.
    """

    action: DreamAction
    memory_ids: list[str]
    content: str
    reason: str
    kept: str | None = None
    evidence: list[str] = msgspec.field(default_factory=list)


class DreamDiff(Schema, kw_only=True):
    """Every change a ready (or adopted) dream makes to its profile, in order."""

    id: str
    state: DreamState
    changes: list[DreamChange]


class SkippedChange(Schema, kw_only=True):
    """A change adopting left out: a write during the dream changed its memories."""

    change: DreamChange
    reason: str


class DreamAdopted(Schema, kw_only=True):
    dream: DreamStatus
    applied: int
    skipped: list[SkippedChange]


class ReviewMode(Schema, kw_only=True):
    """``review``: supersessions and merges with a confidence under ``below`` wait as
    proposals; ``apply``: reconciliation makes them at once."""

    mode: ReviewModeName
    below: Fraction


class ReviewModeRequest(Request, kw_only=True):
    mode: ReviewModeName
    below: Fraction | None = None  # None: keep the profile's threshold


class Proposal(Schema, kw_only=True):
    """A change waiting for review: ``memory_id`` (new) would supersede ``target_id``
    (``supersede``) or be folded into it (``merge``)."""

    id: str
    action: ProposalAction
    memory_id: str
    target_id: str
    confidence: float
    reason: str
    state: ProposalState
    created_at: str
    decided_at: str | None = None


class ProposalList(Schema, kw_only=True):
    proposals: list[Proposal]
