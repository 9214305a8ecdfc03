"""A dream's rules: near-duplicates merged, contradictions resolved, lost and stale memories retired.

Each function reads the current memories (``Item``s) and returns the changes to
make, without writing anything. Similarity is the cosine of memory vectors,
compared only among memories of one subject and type: "Caroline moved to
Paris" and "Melanie moved to Paris" are close vectors about different people.
"""

import math
import re
from collections.abc import Iterable, Sequence
from datetime import datetime

import msgspec
import numpy as np

from raymem.pipelines.dream.items import Item
from raymem.pipelines.language import split_speaker
from raymem.store.dreams import Change

#: Rows of the similarity matrix computed at a time: 1,024 x 10K cosines take 40 MB.
BLOCK_ROWS = 1024
#: A merged memory answers the search questions of every statement it folds in, up to this many.
MAX_MERGED_QUESTIONS = 10
#: Types whose statements can contradict each other. Two events with other values
#: are two happenings; tasks have no vectors and come and go on their own.
CONTRADICTABLE = ("fact", "instruction")


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Words that make a statement about someone: the speaker, the people they speak of.
#: "You"/"your" are left out: a remark to the listener ("That sounds amazing, you
#: deserve it!") reacts to what the listener said, which their own turn holds.
PERSON = re.compile(
    r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|we'd|we'll|us|our|ours"
    r"|ourselves|he|he's|she|she's|him|his|her|hers|himself|herself|they|they're|they've"
    r"|them|their|theirs|themselves)\b",
    re.IGNORECASE,
)
#: A statement whose subject is left out is about its speaker when it opens, past a
#: few adverbs, with what they did ("Just got back from a road trip."), or with a
#: bracketed act of theirs ("[shares a photo: a dog in a party hat]").
OPENING_ADVERBS = _word_set(
    "just recently finally also still actually yeah yep yes nope oh well so and but plus"
    " lately yesterday today tonight btw then already even only mostly really totally indeed"
)
PAST_TENSE = _word_set(
    "got went had was were been made saw took bought found met ran began came did felt"
    " gave kept left lost read sold spent told won wrote built drove flew grew heard knew"
    " led paid put said sat sent sang slept spoke stood taught thought threw wore"
)
REGULAR_PAST = re.compile(r"^[a-z]{3,}ed$")  # "started", "tried"; not "red" or "bed"
ACT = re.compile(r"^\s*\[")
WORDS = re.compile(r"[\w'’-]+")
#: Only statements of what is or what happened can be empty; an instruction or a task
#: is the user's even when it names no one ("Keep answers short.").
FILLER_TYPES = ("fact", "event")


def _groups(items: Iterable[Item], types: Sequence[str]) -> list[list[Item]]:
    """Items with vectors, grouped by (subject, type): only these are compared."""
    groups: dict[tuple[str, str], list[Item]] = {}
    for item in items:
        if item.vector is not None and item.record.type in types:
            groups.setdefault((item.subject, item.record.type), []).append(item)
    return list(groups.values())


def similar(vectors: np.ndarray, gate: float) -> list[dict[int, float]]:
    """For each row, the other rows at least ``gate`` cosine-similar to it: row -> cosine."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms == 0, 1, norms)
    found: list[dict[int, float]] = [{} for _ in range(len(unit))]
    for start in range(0, len(unit), BLOCK_ROWS):
        cosines = unit[start : start + BLOCK_ROWS] @ unit.T
        for row, column in zip(*np.nonzero(cosines >= gate), strict=True):
            if start + row != column:
                found[start + int(row)][int(column)] = float(cosines[row, column])
    return found


def _day(moment: datetime) -> str:
    return moment.date().isoformat()


# ------------------------------------------------------------------ merges


def merges(items: Sequence[Item], gate: float) -> list[Change]:
    """Statements of one fact, phrased several ways, folded into the best-supported one.

    Leader clustering: the best-supported memory (most source turns, then highest
    confidence, then newest) takes every memory at least ``gate`` similar to it
    that names the same concrete values ("room 14" and "room 15" embed almost
    alike); the next best unclaimed memory leads the next cluster. So every member
    of a cluster is close to the memory it folds into, with no chaining.
    """
    changes = []
    for group in _groups(items, ("fact", "event", "instruction")):
        group.sort(key=lambda item: item.support, reverse=True)
        near = similar(np.stack([item.vector for item in group]), gate)  # type: ignore[misc]
        claimed: set[int] = set()
        for leader, item in enumerate(group):
            if leader in claimed:
                continue
            members = [
                other
                for other in sorted(near[leader])
                if other not in claimed and group[other].values == item.values
            ]
            if not members:
                continue
            claimed.update([leader, *members])
            lowest = min(near[leader][other] for other in members)
            changes.append(merged(item, [group[other] for other in members], lowest))
    return changes


def merged(kept: Item, members: Sequence[Item], lowest: float) -> Change:
    """The change that folds ``members`` into ``kept``: it gains their sources and questions."""
    sources = list(kept.record.source_message_ids)
    spans = list(kept.record.source_spans)
    for member in members:
        for source, span in zip(
            member.record.source_message_ids, member.record.source_spans, strict=False
        ):
            if source not in sources:
                sources.append(source)
                spans.append(span)
    questions = list(
        dict.fromkeys(q for item in (kept, *members) for q in item.record.search_queries)
    )
    record = msgspec.structs.replace(
        kept.record,
        source_message_ids=sources,
        source_spans=spans,
        search_queries=questions[:MAX_MERGED_QUESTIONS],
        importance=max(item.record.importance for item in (kept, *members)),
        confidence=max(item.record.confidence for item in (kept, *members)),
    )
    return Change(
        action="merge",
        memory_ids=[kept.id, *(member.id for member in members)],
        kept=kept.id,
        content=kept.record.content,
        reason=(
            f"{len(members) + 1} statements say the same (cosine {lowest:.2f} or more, the same"
            f" values); kept the best supported ({len(kept.record.source_message_ids)} source"
            f" turns, confidence {kept.record.confidence:.2f}, said {_day(kept.said_at)})"
        ),
        memory=record,
        evidence=sources,
    )


# ---------------------------------------------------------- contradictions


def contradictions(items: Sequence[Item], gate: float) -> list[Change]:
    """Statements that cannot all hold: the newest wins, the older ones are replaced by it.

    Two kinds: current memories that share a topic key (the per-fact path keeps one
    head per key, so these came from imports, races or a key given later), and
    facts or instructions of one subject at least ``gate`` similar that name
    different concrete values ("I live in Vienna" and "I live in Budapest").
    """
    changes = _same_topic(items)
    replaced = {memory_id for change in changes for memory_id in change.memory_ids}
    rest = [item for item in items if item.id not in replaced]
    return changes + _similar_values(rest, gate)


def _same_topic(items: Sequence[Item]) -> list[Change]:
    by_key: dict[str, list[Item]] = {}
    for item in items:
        if item.record.topic_key and item.record.type in CONTRADICTABLE:
            by_key.setdefault(item.record.topic_key, []).append(item)
    changes = []
    for key, group in by_key.items():
        if len(group) > 1:
            reason = f"the same topic ({key}): the newest statement holds"
            changes.append(_replaced(group, reason))
    return changes


def _similar_values(items: Sequence[Item], gate: float) -> list[Change]:
    changes = []
    for group in _groups(items, CONTRADICTABLE):
        group.sort(key=lambda item: (item.said_at, item.record.created_at), reverse=True)
        near = similar(np.stack([item.vector for item in group]), gate)  # type: ignore[misc]
        claimed: set[int] = set()
        for newest, item in enumerate(group):
            if newest in claimed or not item.values:
                continue
            older = [
                other
                for other in sorted(near[newest])
                if other > newest
                and other not in claimed
                and group[other].values
                and group[other].values != item.values
            ]
            if not older:
                continue
            claimed.update([newest, *older])
            lowest = min(near[newest][other] for other in older)
            reason = (
                f"about the same (cosine {lowest:.2f} or more) with other values: the newest"
                f" statement, said {_day(item.said_at)}, holds"
            )
            changes.append(_replaced([item, *(group[other] for other in older)], reason))
    return changes


def _replaced(group: Sequence[Item], reason: str) -> Change:
    ordered = sorted(group, key=lambda item: (item.said_at, item.record.created_at), reverse=True)
    newest = ordered[0]
    return Change(
        action="replace",
        memory_ids=[item.id for item in ordered],
        kept=newest.id,
        content=newest.record.content,
        reason=reason,
        evidence=list(newest.record.source_message_ids),
    )


# --------------------------------------------------------------- retiring


def lost_evidence(items: Sequence[Item]) -> list[Change]:
    """Memories whose evidence was erased: none of their source turns is stored any more.

    Only where the session went too (deleted or erased): the retention purge
    deletes old turns on purpose and keeps the memories drawn from them.
    """
    return [
        Change(
            action="retire",
            memory_ids=[item.id],
            content=item.record.content,
            reason=(
                f"its evidence was erased: none of its {len(item.record.source_message_ids)}"
                " source turns is stored and its session was deleted"
            ),
        )
        for item in items
        if item.record.source_message_ids and not item.sources_found and not item.session_exists
    ]


def names_no_fact(item: Item) -> bool:
    """Whether a statement says nothing about anyone: no person, no name, no value.

    "Melanie: That sounds amazing!" and "Jon: Change is possible!" react or
    generalise; "Melanie: I ran a charity race." (a person), "Jon: The studio
    opens on 5 May." (values) and "Tim: Just got back from Rome." (the speaker,
    left out) state something.
    """
    _, said = split_speaker(item.record.content)
    if item.values or PERSON.search(said) or ACT.match(said):
        return False
    return not _opens_with_a_deed(said)


def _opens_with_a_deed(said: str) -> bool:
    """Whether the statement opens with a past-tense verb: its left-out subject is the
    speaker ("Been busy volunteering at the shelter.", "Started learning the piano.")."""
    for word in WORDS.findall(said.lower()):
        if word not in OPENING_ADVERBS:
            return word in PAST_TENSE or REGULAR_PAST.match(word) is not None
    return False


def no_fact(items: Sequence[Item]) -> list[Change]:
    """Facts and events that name no person and no value: retired, their turns stay."""
    return [
        Change(
            action="retire",
            memory_ids=[item.id],
            content=item.record.content,
            reason="states no fact: it names no person and no value (a reaction or remark)",
        )
        for item in items
        if item.record.type in FILLER_TYPES and names_no_fact(item)
    ]


def strength(item: Item, now: datetime, half_life_days: float) -> float:
    """How much a memory still weighs: its importance, halving every ``half_life_days`` idle.

    Idle means since raymem learned it or last recalled it, whichever is later
    (not since it was said: an imported year-old conversation is not stale on
    arrival); each recall adds weight on a log scale.
    """
    last = item.learned_at
    recalls = 0
    if item.use is not None:
        last = max(last, datetime.fromisoformat(item.use.last_recalled_at))
        recalls = item.use.recalled_count
    idle_days = max(0.0, (now - last).total_seconds() / 86_400)
    decay: float = 0.5 ** (idle_days / half_life_days)
    return item.record.importance * decay * (1 + math.log1p(recalls))


def stale(
    items: Sequence[Item], now: datetime, half_life_days: float, below: float
) -> list[Change]:
    """Memories whose strength decayed below ``below``: retired, never deleted.

    Instructions never go stale: a rule the user set holds until they change it.
    """
    changes = []
    for item in items:
        if item.record.type == "instruction":
            continue
        weight = strength(item, now, half_life_days)
        if weight < below:
            recalls = item.use.recalled_count if item.use is not None else 0
            changes.append(
                Change(
                    action="retire",
                    memory_ids=[item.id],
                    content=item.record.content,
                    reason=(
                        f"stale: strength {weight:.3f} is below {below} (importance"
                        f" {item.record.importance:.2f}, recalled {recalls} times)"
                    ),
                )
            )
    return changes
