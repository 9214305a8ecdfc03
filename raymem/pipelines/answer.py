"""The answer: date arithmetic computed here, then an extractive synthesis of the best hits.

"How many days between A and B", "how long ago / since A", "which came first,
A or B" are answered by dating each event (a date it names, else the turn that
best matches it) and stating the result as a sentence, rather than leaving the
arithmetic to a generator. The answer puts those facts first, then the
best-supported sentences of the hits.
"""

import re
from collections.abc import Sequence
from datetime import UTC, date, datetime

import msgspec

from raymem.pipelines.fusion import Scored
from raymem.pipelines.language import split_sentences
from raymem.pipelines.query import fts_query
from raymem.pipelines.rules import is_informative
from raymem.pipelines.temporal import UNIT, UNIT_DAYS, find_dates, time_ranges
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
# The answer: at most this many lines (and characters), from the hits that score at
# least this share of the best one, so a clear winner is not diluted by weaker ones.
ANSWER_LINES = 3
ANSWER_CHARS = 600
ANSWER_SCORE_FLOOR = 0.6
ANSWER_TURN_SENTENCES = 2  # a raw turn answers with at most this many of its sentences
EVIDENCE_LINES = 8  # the hits a model answers from
#: Channels through which words of the question found a hit.
LEXICAL_CHANNELS = {"topic_key", "memory_fts", "message_fts", "message_time", "update"}
ABSOLUTE_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|.*\b(?:19|20)\d\d\b.*")


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
            now = DatedEvent(phrase="now", at=anchor)
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


def compose(
    query: str,
    items: Sequence[Scored],
    facts: Sequence[str],
    *,
    max_lines: int = ANSWER_LINES,
    max_chars: int = ANSWER_CHARS,
) -> str:
    """The answer without a model: computed date facts, then one line per current fact.

    The best hit always answers; a further hit joins only when it scores at least
    ``ANSWER_SCORE_FLOOR`` of the best and some word of the question found it (a
    hit that only the vectors found may merely be the nearest thing in a small
    store). Stale turns never answer: their replacement ranks above them. A memory
    is stated whole; a raw turn by its informative sentences (no questions, no
    greetings). Relative dates are resolved in place: "next Friday (2026-03-06)".
    """
    lines = list(facts)
    current = [item for item in items if not item.stale]
    if current:
        best = current[0].score
        lines.append(_line(query, current[0]))
        for item in current[1:]:
            if len(lines) >= max_lines or item.score < best * ANSWER_SCORE_FLOOR:
                break
            if LEXICAL_CHANNELS & set(item.parts):
                lines.append(_line(query, item))
    return _fit([line for line in dict.fromkeys(lines) if line], max_chars)


def evidence_lines(query: str, items: Sequence[Scored], limit: int = EVIDENCE_LINES) -> list[str]:
    """The current hits as dated lines, best first, for a model to answer from."""
    return [_line(query, item) for item in items if not item.stale][:limit]


def _line(query: str, item: Scored) -> str:
    """One hit as an answer line, its relative dates resolved against when it was said."""
    if item.memory is not None:
        text = item.memory.content
    else:
        sentences = [s for s in split_sentences(item.content) if is_informative(s)]
        text = " ".join(sentences[:ANSWER_TURN_SENTENCES]) or item.content.strip()
    memory = item.memory
    said = item.when.astimezone(UTC).date()
    dated = annotate_dates(text, said, future=memory is not None and memory.type == "task")
    if dated != text:
        return dated.strip()
    if memory is not None and memory.type in ("event", "task") and memory.event_time:
        return f"{text.rstrip()} ({memory.event_time[:10]})"
    if query.strip().lower().startswith("when") and not find_dates(text, said):
        return f"{text.rstrip()} ({said.isoformat()})"  # only the message time says when
    return text.strip()


def annotate_dates(text: str, said: date, *, future: bool = False) -> str:
    """``text`` with each relative date followed by the day it denotes: "yesterday (2026-03-09)"."""
    out, last = [], 0
    for found in find_dates(text, said, future=future):
        if ABSOLUTE_DATE.fullmatch(found.phrase.strip()):
            continue  # "2026-03-06" or "6 March 2026" needs no gloss
        out.append(text[last : found.end])
        out.append(f" ({found.day.isoformat()})")
        last = found.end
    out.append(text[last:])
    return "".join(out)


def _fit(lines: Sequence[str], max_chars: int) -> str:
    """The lines, one per line, within ``max_chars`` (a line that does not fit is cut)."""
    kept: list[str] = []
    used = 0
    for line in lines:
        room = max_chars - used - (1 if kept else 0)
        if room <= 0:
            break
        kept.append(line if len(line) <= room else line[: max(room - 1, 0)].rstrip() + "…")
        used += len(kept[-1]) + (1 if len(kept) > 1 else 0)
    return "\n".join(kept)
