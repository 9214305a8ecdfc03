"""The answer: date arithmetic computed here, then an extractive synthesis of the best hits.

"How many days between A and B", "how long ago / since A", "which came first,
A or B" are answered by dating each event (a date it names, else the turn that
best matches it) and stating the result as a sentence, rather than leaving the
arithmetic to a generator. The answer puts those facts first, then the
best-supported sentences of the hits.
"""

import re
from collections.abc import Sequence
from datetime import UTC, datetime

import msgspec

from raymem.pipelines.fusion import Scored
from raymem.pipelines.language import split_sentences
from raymem.pipelines.query import fts_query
from raymem.pipelines.temporal import UNIT, UNIT_DAYS, time_ranges
from raymem.store import ProfileStore

# Questions that ask for date arithmetic.
BETWEEN = re.compile(
    rf"\bhow (?:many|much) {UNIT}\b.*?\bbetween\s+(.+?)\s+and\s+(.+?)\s*\??$", re.I
)
SINCE = re.compile(
    rf"\bhow (?:many {UNIT}|long)\b.*?\b(?:since|ago|after|before)\b\s*(.*?)\s*\??$", re.I
)
AGO_DID = re.compile(
    rf"\bhow (?:many {UNIT} ago|long ago)\s+(?:did|was|were|had)\s+(.+?)\s*\??$", re.I
)
FIRST = re.compile(r"\b(?:first|earlier|before)\b[,:]?\s*(.+?)\s*,?\s+or\s+(.+?)\s*\??$", re.I)
# The extractive answer: at most this many sentences, taken from the hits that score
# at least this share of the best one, so a clear winner is not diluted by weaker ones.
ANSWER_SENTENCES = 3
ANSWER_SCORE_FLOOR = 0.5


class DatedEvent(msgspec.Struct, frozen=True):
    phrase: str
    at: datetime


async def event_time(
    store: ProfileStore, phrase: str, anchor: datetime, session_id: str | None
) -> DatedEvent | None:
    """When ``phrase`` happened: a date it names, else the time of the turn that best matches it."""
    phrase = phrase.strip(" ,.?")
    named = time_ranges(phrase, anchor)
    if named:
        return DatedEvent(phrase=phrase, at=named[0].start)
    query = fts_query(phrase)
    if query is None:
        return None
    seqs = store.search.messages_text(query, limit=1, session_id=session_id)
    rows = store.search.messages_by_seq(seqs)
    if not seqs or seqs[0] not in rows:
        return None
    return DatedEvent(phrase=phrase, at=rows[seqs[0]].created_at)


async def date_facts(
    store: ProfileStore, query: str, anchor: datetime, session_id: str | None = None
) -> list[str]:
    """Date arithmetic the question asks for, computed here rather than left to a generator.

    "How many days between A and B", "how long ago / since A", "which came
    first, A or B": each event is dated by a date it names or by the turn that
    best matches it, and the result is stated as a sentence.
    """
    anchor = anchor.astimezone(UTC)
    if match := BETWEEN.search(query):
        first, second = [
            await event_time(store, match.group(i), anchor, session_id) for i in (2, 3)
        ]
        if first and second:
            return [_span_fact(first, second, match.group(1).lower())]
    elif match := AGO_DID.search(query) or SINCE.search(query):
        unit = (match.group(1) or "day").lower()
        event = await event_time(store, match.group(2), anchor, session_id)
        if event:
            now = DatedEvent(phrase="the latest conversation", at=anchor)
            return [_span_fact(event, now, unit)]
    elif match := FIRST.search(query):
        first, second = [
            await event_time(store, match.group(i), anchor, session_id) for i in (1, 2)
        ]
        if first and second:
            early, late = sorted((first, second), key=lambda e: e.at)
            return [
                f"{early.phrase} ({_day(early.at)}) came before {late.phrase} ({_day(late.at)})."
            ]
    return []


def _span_fact(a: DatedEvent, b: DatedEvent, unit: str) -> str:
    days = abs((b.at - a.at).total_seconds()) / 86400
    amount = round(days / UNIT_DAYS.get(unit, 1.0), 1)
    shown = int(amount) if amount == int(amount) else amount
    return f"{a.phrase}: {_day(a.at)}; {b.phrase}: {_day(b.at)}; {shown} {unit}s apart."


def _day(moment: datetime) -> str:
    return f"{moment.day} {moment.strftime('%B %Y')}"


def synthesize(query: str, items: Sequence[Scored], facts: Sequence[str]) -> str:
    """The extractive answer: computed date facts first, then the best-supported sentences.

    A "when" question also gets the date of its best hit, since the evidence
    often says "yesterday" and only the message time says when that was.
    """
    parts = list(facts)
    if items and query.strip().lower().startswith("when") and not facts:
        parts.append(f"({_day(items[0].when)})")
    extract = _best_sentences(items)
    if extract:
        parts.append(extract)
    return " ".join(parts)


def _best_sentences(items: Sequence[Scored]) -> str:
    """Distinct sentences of the best hits, in rank order, from the hits that score well."""
    if not items:
        return ""
    best = items[0].score
    picked: list[str] = []
    for item in items:
        if item.score < best * ANSWER_SCORE_FLOOR:
            break
        for sentence in split_sentences(item.content):
            if sentence not in picked:
                picked.append(sentence)
            if len(picked) == ANSWER_SENTENCES:
                return " ".join(picked)
    return " ".join(picked)
