"""Fusion: the channels' rankings into one ranked list of evidence turns.

Weighted reciprocal rank fusion of every channel's ranking; then each memory is
folded into the turn it was extracted from (one turn, one slot), turns said by
the person the query names and turns among other found turns are lifted, and
the list is ordered by score with ties broken by recency. No I/O, no Ray.
"""

from collections.abc import Sequence
from datetime import datetime

import msgspec

from raymem.pipelines.language import split_speaker
from raymem.pipelines.query import Analysis
from raymem.types import Memory, StoredMessage


class Ranked(msgspec.Struct):
    """A memory or a raw message some channel found, with each channel's contribution."""

    kind: str  # "memory", "message" or "episode"
    seq: int
    parts: dict[str, float] = {}  # channel -> its weighted reciprocal-rank contribution

    @property
    def score(self) -> float:
        return sum(self.parts.values())

    @property
    def channels(self) -> list[str]:
        return list(self.parts)


def fuse(
    rankings: dict[str, list[tuple[str, int]]], weights: dict[str, float], k: float
) -> list[Ranked]:
    """Weighted reciprocal rank fusion of ranked lists of (kind, seq)."""
    fused: dict[tuple[str, int], Ranked] = {}
    for channel, ranked in rankings.items():
        weight = weights.get(channel, 1.0)
        for rank, (kind, seq) in enumerate(ranked):
            candidate = fused.setdefault((kind, seq), Ranked(kind=kind, seq=seq, parts={}))
            candidate.parts[channel] = candidate.parts.get(channel, 0.0) + weight / (k + rank + 1)
    return list(fused.values())


class Scored(msgspec.Struct):
    """A loaded candidate: a memory or a raw message, with its fused score per channel."""

    parts: dict[str, float]
    memory: Memory | None = None
    message: StoredMessage | None = None
    message_seq: int | None = None  # of the message, or of the turn a memory came from
    turn_at: datetime | None = None  # message time of the evidence turn, once known
    stale: bool = False  # a turn whose memories were all replaced (see ``currency``)
    replaced_by: str | None = None  # the memory that holds now what a stale turn said
    currency_checked: bool = False

    @property
    def score(self) -> float:
        return sum(self.parts.values())

    @property
    def channels(self) -> list[str]:
        return list(self.parts)

    @property
    def turn_id(self) -> str:
        """The evidence turn: a message's own id, or the first source of a memory."""
        if self.message is not None:
            return self.message.id
        assert self.memory is not None
        return (
            self.memory.source_message_ids[0] if self.memory.source_message_ids else self.memory.id
        )

    @property
    def content(self) -> str:
        """The text of the memory or the message."""
        source = self.memory if self.memory is not None else self.message
        assert source is not None
        return source.content

    @property
    def when(self) -> datetime:
        """Message time of the evidence, for recency ties and date arithmetic."""
        if self.message is not None:
            return self.message.created_at
        assert self.memory is not None
        return self.turn_at or self.memory.created_at


def group_by_turn(items: Sequence[Scored]) -> list[Scored]:
    """One entry per evidence turn: a memory and the turn it came from share one slot.

    Per channel the turn keeps its best contribution (a turn split into five
    sentences must not count five times); across channels they add up, so a
    turn found both whole and by one of its sentences ranks higher. The entry
    shows the item that scored best on its own.
    """
    groups: dict[str, list[Scored]] = {}
    for item in items:
        groups.setdefault(item.turn_id, []).append(item)
    merged = []
    for members in groups.values():
        if len(members) == 1:
            merged.append(members[0])
            continue
        best = max(members, key=lambda m: m.score)
        parts: dict[str, float] = {}
        for member in members:
            for channel, value in member.parts.items():
                if value > parts.get(channel, 0.0):
                    parts[channel] = value
        seq = next((m.message_seq for m in members if m.message_seq is not None), None)
        turn_at = next(
            (m.message.created_at for m in members if m.message is not None), best.turn_at
        )
        merged.append(
            Scored(
                parts,
                memory=best.memory,
                message=best.message,
                message_seq=seq,
                turn_at=turn_at,
            )
        )
    return merged


def speaker_of(item: Scored) -> str | None:
    """Who said the evidence: a name given inside the turn ("Dave: ..."), else its role."""
    speaker, _ = split_speaker(item.content)
    if speaker is not None:
        return speaker.split()[0].lower()
    return item.message.role if item.message is not None else None


def favour_speakers(items: Sequence[Scored], analysis: Analysis, share: float) -> None:
    """Lift the turns said by whom the query asks about, by ``share`` of their score.

    "What is Dave's main passion?" is answered by what Dave said far more often
    than by what was said to him; "what did you recommend" by the assistant.
    """
    wanted = set(analysis.names) | ({"assistant"} if analysis.asks_assistant else set())
    if not wanted or share <= 0:
        return
    for item in items:
        if speaker_of(item) in wanted:
            item.parts["speaker"] = item.score * share


def _session(item: Scored) -> str | None:
    source = item.memory if item.memory is not None else item.message
    return source.session_id if source is not None else None


def context_lifts(items: Sequence[Scored], window: int, share: float) -> list[float]:
    """How much each item is lifted by the other found turns around it in its session.

    A conversation talks about one thing for a while: the turn that answers a
    question is usually close to other turns the channels found (the question,
    the follow-ups), while a stray match stands alone. Each turn gains ``share``
    of the scores of the found turns within ``window`` turns of it, the nearer
    counting more. Scores are taken before any neighbour lift.
    """
    lifts = [0.0] * len(items)
    if window <= 0 or share <= 0 or not items:
        return lifts
    found: dict[tuple[str | None, int], float] = {}
    for item in items:
        if item.message_seq is not None:
            key = (_session(item), item.message_seq)
            found[key] = found.get(key, 0.0) + item.score
    for index, item in enumerate(items):
        seq = item.message_seq
        if seq is None:
            continue
        session = _session(item)
        lifts[index] = share * sum(
            (found.get((session, seq - distance), 0.0) + found.get((session, seq + distance), 0.0))
            / distance
            for distance in range(1, window + 1)
        )
    return lifts


def favour_recent(items: Sequence[Scored], analysis: Analysis, share: float) -> None:
    """Lift newer evidence when the query asks about the present ("how many ... now?").

    Each item gains ``share`` of its score times how recent its evidence is among
    the items found (1 for the newest, 0 for the oldest), so of two statements of
    the same thing the later one ranks higher.
    """
    if not analysis.asks_current or share <= 0 or len(items) < 2:
        return
    times = sorted({item.when for item in items})
    if len(times) < 2:
        return
    position = {moment: index / (len(times) - 1) for index, moment in enumerate(times)}
    for item in items:
        item.parts["recent"] = item.score * share * position[item.when]


def order(items: Sequence[Scored]) -> list[Scored]:
    """Best score first; equal scores: the more recent evidence first."""
    return sorted(items, key=lambda item: (item.score, item.when), reverse=True)
