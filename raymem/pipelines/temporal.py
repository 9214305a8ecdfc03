"""Dates in text: one grammar of date expressions, read two ways. Pure functions, no I/O.

Each expression of the grammar is a regular expression with up to two readings:

- the day it names, counted from the day it was written (ingest): "We deployed
  v2.3 yesterday", written on 2026-04-15, happened on 2026-04-14;
- the stretch of time it names, counted back from now (recall): "what did I cook
  yesterday?" asks about that day's turns, "in March" about the latest March, and
  "last month" about a generous window, since speech is loose about such spans.

An expression with one reading is passed over by the other: a question looks
back, so "tomorrow" names no time to search, and a month alone ("in May") names
a time to search but no day. Where two expressions overlap, the longer, more
specific one wins ("last Friday" over "Friday", "8 May 2023" over "May 2023");
the order of ``EXPRESSIONS`` encodes that preference.
"""

import calendar
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import NamedTuple, TypeVar

import msgspec

from raymem.pipelines.types import Chunk, Extracted

# ------------------------------------------------------------- vocabulary

WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
MONTH_NAMES = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
MONTH_ABBREVIATIONS = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "sept": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
# Month names and their abbreviations -> the month's number.
MONTHS = {name: number for number, name in enumerate(MONTH_NAMES, start=1)} | MONTH_ABBREVIATIONS
NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a few": 3,
    "several": 3,
}
# Average lengths, for spans counted in days ("how many weeks since ...", "3 months ago").
UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 30.4375, "year": 365.25}


def _alternatives(words: list[str]) -> str:
    """A regex group of the words, longest first (so "sept" is tried before "sep")."""
    return "(" + "|".join(sorted(words, key=len, reverse=True)) + ")"


MONTH = _alternatives(list(MONTHS))
WEEKDAY = _alternatives(WEEKDAYS)
NUMBER = r"(\d{1,3}|" + _alternatives(list(NUMBER_WORDS))[1:]
UNIT = r"(day|week|month|year)s?"
YEAR = r"(\d{4})"
ORDINAL = r"(?:st|nd|rd|th)?"


class ResolvedDate(msgspec.Struct, frozen=True):
    """A date expression found in a text and the calendar date it denotes."""

    phrase: str
    start: int  # character offsets of the phrase in the text
    end: int
    day: date


class TimeRange(msgspec.Struct, frozen=True):
    """A stretch of time a question names: [start, end) in UTC."""

    start: datetime
    end: datetime
    phrase: str


def _number(text: str) -> int:
    text = text.lower()
    return int(text) if text.isdigit() else NUMBER_WORDS[text]


def add_months(day: date, months: int) -> date:
    """The same day of the month ``months`` later (or earlier), clamped to the month's end."""
    total = day.year * 12 + day.month - 1 + months
    year, month = divmod(total, 12)
    last = calendar.monthrange(year, month + 1)[1]
    return date(year, month + 1, min(day.day, last))


def _shift(anchor: date, amount: int, unit: str) -> date:
    unit = unit.lower().rstrip("s")
    if unit == "day":
        return anchor + timedelta(days=amount)
    if unit == "week":
        return anchor + timedelta(weeks=amount)
    if unit == "month":
        return add_months(anchor, amount)
    return add_months(anchor, 12 * amount)


def previous_weekday(anchor: date, weekday: int) -> date:
    """The latest ``weekday`` strictly before ``anchor`` ("last Friday" said on a Friday: a week ago)."""
    back = (anchor.weekday() - weekday) % 7 or 7
    return anchor - timedelta(days=back)


def next_weekday(anchor: date, weekday: int) -> date:
    """The first ``weekday`` strictly after ``anchor``."""
    ahead = (weekday - anchor.weekday()) % 7 or 7
    return anchor + timedelta(days=ahead)


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


# ---------------------------------------------------------------- grammar

# The day an expression names: (match, the day it was written, whether the sentence
# speaks of the future) -> the day, or None when the match is no date (31 February).
DayRule = Callable[[re.Match[str], date, bool], date | None]
# The time an expression names: (match, today at midnight UTC) -> [start, end).
PeriodRule = Callable[[re.Match[str], datetime], tuple[datetime, datetime] | None]

# "3 weeks ago" is rarely exact in speech: the window reaches this share of the
# distance either side of the day it names (at least a day).
AGO_SLACK = 0.25
# The days a question's "this week" or "last week" counts: "last month" reaches
# back two months, since people say it of anything from a few weeks to two months.
PERIOD_DAYS = {"week": 7, "weekend": 7, "month": 31, "year": 366}


class Expression(NamedTuple):
    pattern: re.Pattern[str]
    day: DayRule | None  # None: names no day (a month alone)
    period: PeriodRule | None  # None: names no time to search (the future)


def _expression(
    regex: str,
    *,
    day: DayRule | None = None,
    period: PeriodRule | None = None,
    whole: Callable[[date], date] | None = None,
    recent: bool = False,
) -> Expression:
    """An expression with its readings.

    Args:
        regex: the pattern, matched case-insensitively.
        day: its day reading.
        period: its period reading, or:
        whole: the period is the whole day, month or year its day starts; this maps
            that day to the first day after the period.
        recent: a day after today (in a question) stands for its latest occurrence
            (see ``_not_after``).
    """
    if whole is not None and day is not None:
        period = _whole(day, whole, recent=recent)
    return Expression(re.compile(regex, re.I), day, period)


def _whole(day: DayRule, after: Callable[[date], date], *, recent: bool) -> PeriodRule:
    def period(match: re.Match[str], today: datetime) -> tuple[datetime, datetime] | None:
        first = day(match, today.date(), False)
        if first is None:
            return None
        if recent:
            first = _not_after(first, today.date())
        return _midnight(first), _midnight(after(first))

    return period


def _not_after(day: date, today: date) -> date:
    """``day``, or when it is after today, the latest date with its month and day before it.

    Nothing is stored from after today, so a question naming a later date has its
    year wrong: LoCoMo asks about "December 2023" of a conversation that ended in
    August 2023 and spoke of December 2022.
    """
    if day <= today:
        return day
    year = today.year if (day.month, day.day) <= (today.month, today.day) else today.year - 1
    return day.replace(year=year)


def _next_day(day: date) -> date:
    return day + timedelta(days=1)


def _next_month(day: date) -> date:
    return add_months(day, 1)


def _next_year(day: date) -> date:
    return add_months(day, 12)


def _latest_month(match: re.Match[str], today: datetime) -> tuple[datetime, datetime]:
    """A month without a year: its latest occurrence at or before today."""
    first = _not_after(date(today.year, MONTHS[match[1].lower()], 1), today.date())
    return _midnight(first), _midnight(_next_month(first))


def _around_ago(match: re.Match[str], today: datetime) -> tuple[datetime, datetime]:
    """The days around the one "3 weeks ago" names, ``AGO_SLACK`` of the distance either side."""
    days = _number(match[1]) * UNIT_DAYS[match[2].lower()]
    centre = today - timedelta(days=days)
    slack = timedelta(days=max(1.0, days * AGO_SLACK))
    return centre - slack, centre + slack + timedelta(days=1)


def _this_period(match: re.Match[str], today: datetime) -> tuple[datetime, datetime]:
    """The days "this week" (month, year) names: from a week ago to the end of today."""
    return today - timedelta(days=PERIOD_DAYS[match[1].lower()]), today + timedelta(days=1)


def _last_period(match: re.Match[str], today: datetime) -> tuple[datetime, datetime]:
    """The days "last month" (week, weekend, year) names: back two of them, up to today."""
    return today - timedelta(days=2 * PERIOD_DAYS[match[1].lower()]), today


def _weekday(match: re.Match[str], group: int = 1) -> int:
    return WEEKDAYS.index(match[group].lower())


# In order of preference where two overlap.
EXPRESSIONS: list[Expression] = [
    _expression(  # 2026-04-15, 2026/4/15
        rf"\b{YEAR}[-/](\d{{1,2}})[-/](\d{{1,2}})\b",
        day=lambda m, a, f: _safe_date(int(m[1]), int(m[2]), int(m[3])),
        whole=_next_day,
        recent=True,
    ),
    _expression(  # 8 May 2023, 8th of May, 2023
        rf"\b(\d{{1,2}}){ORDINAL}\s+(?:of\s+)?{MONTH}\.?,?\s+{YEAR}\b",
        day=lambda m, a, f: _safe_date(int(m[3]), MONTHS[m[2].lower()], int(m[1])),
        whole=_next_day,
        recent=True,
    ),
    _expression(  # May 8, 2023
        rf"\b{MONTH}\.?\s+(\d{{1,2}}){ORDINAL},?\s+{YEAR}\b",
        day=lambda m, a, f: _safe_date(int(m[3]), MONTHS[m[1].lower()], int(m[2])),
        whole=_next_day,
        recent=True,
    ),
    _expression(  # May 2023
        rf"\b{MONTH}\.?,?\s+{YEAR}\b",
        day=lambda m, a, f: _safe_date(int(m[2]), MONTHS[m[1].lower()], 1),
        whole=_next_month,
        recent=True,
    ),
    _expression(rf"\b(?:in|during|of|since)\s+{MONTH}\b", period=_latest_month),  # in May
    _expression(  # in 2023
        r"\b(?:in|since|during|of)\s+((?:19|20)\d\d)\b",
        day=lambda m, a, f: date(int(m[1]), 1, 1),
        whole=_next_year,
    ),
    _expression(
        r"\bday before yesterday\b", day=lambda m, a, f: a - timedelta(days=2), whole=_next_day
    ),
    _expression(r"\bday after tomorrow\b", day=lambda m, a, f: a + timedelta(days=2)),
    _expression(
        r"\b(yesterday|last night)\b", day=lambda m, a, f: a - timedelta(days=1), whole=_next_day
    ),
    _expression(r"\btomorrow\b", day=lambda m, a, f: a + timedelta(days=1)),
    _expression(
        r"\b(today|tonight|this (morning|afternoon|evening)|earlier today)\b",
        day=lambda m, a, f: a,
        whole=_next_day,
    ),
    _expression(r"\bthis (week|month|year)\b", period=_this_period),
    _expression(
        rf"\b{NUMBER} {UNIT} ago\b",
        day=lambda m, a, f: _shift(a, -_number(m[1]), m[2]),
        period=_around_ago,
    ),
    _expression(
        rf"\b(?:in|within) {NUMBER} {UNIT}(?: time)?\b",
        day=lambda m, a, f: _shift(a, _number(m[1]), m[2]),
    ),
    _expression(
        rf"\b{NUMBER} {UNIT} from now\b", day=lambda m, a, f: _shift(a, _number(m[1]), m[2])
    ),
    _expression(
        r"\blast (weekend)\b", day=lambda m, a, f: previous_weekday(a, 5), period=_last_period
    ),
    _expression(r"\bnext weekend\b", day=lambda m, a, f: next_weekday(a, 5)),
    _expression(r"\bthis weekend\b", day=lambda m, a, f: a + timedelta(days=(5 - a.weekday()) % 7)),
    _expression(
        rf"\blast {WEEKDAY}\b",
        day=lambda m, a, f: previous_weekday(a, _weekday(m)),
        whole=_next_day,
    ),
    _expression(rf"\bnext {WEEKDAY}\b", day=lambda m, a, f: next_weekday(a, _weekday(m))),
    _expression(
        rf"\bthis {WEEKDAY}\b",
        day=lambda m, a, f: a + timedelta(days=_weekday(m) - a.weekday()),
    ),
    _expression(
        r"\blast (week|month|year)\b",
        day=lambda m, a, f: _shift(a, -1, m[1]),
        period=_last_period,
    ),
    _expression(r"\bnext (week|month|year)\b", day=lambda m, a, f: _shift(a, 1, m[1])),
    _expression(
        # A bare weekday: the coming one in a plan, the latest one otherwise.
        rf"\b(?:on )?{WEEKDAY}\b",
        day=lambda m, a, f: (next_weekday if f else previous_weekday)(a, _weekday(m)),
    ),
]

_Value = TypeVar("_Value")

# Cheap pre-check: most sentences contain no date expression at all. Every
# expression above contains a digit or one of these words.
_TRIGGER = re.compile(
    rf"\d|\b(yesterday|today|tonight|tomorrow|ago|last|next|this|from now|weekend|within|"
    rf"{WEEKDAY[1:-1]}|{MONTH[1:-1]})\b|\bin {NUMBER}\b",
    re.I,
)


def _read(
    text: str, reading: Callable[[Expression, re.Match[str]], _Value | None]
) -> list[tuple[re.Match[str], _Value]]:
    """Every expression in ``text`` that ``reading`` gives a value, most specific first.

    An expression that overlaps one read before it (an earlier one in
    ``EXPRESSIONS``) is passed over.
    """
    if not _TRIGGER.search(text):
        return []
    taken: list[tuple[int, int]] = []
    found: list[tuple[re.Match[str], _Value]] = []
    for expression in EXPRESSIONS:
        for match in expression.pattern.finditer(text):
            start, end = match.span()
            if any(start < t_end and t_start < end for t_start, t_end in taken):
                continue
            try:
                value = reading(expression, match)
            except (OverflowError, ValueError):  # beyond the calendar: not a date we can use
                continue
            if value is None:
                continue
            taken.append((start, end))
            found.append((match, value))
    return found


def find_dates(text: str, anchor: date, *, future: bool = False) -> list[ResolvedDate]:
    """Every date expression in ``text``, resolved against ``anchor``, in text order.

    Args:
        text: a sentence or a whole message.
        anchor: the date the text was written (the message's ``created_at``).
        future: the sentence is a plan or a task, so a bare weekday is the coming one.
    """

    def day(expression: Expression, match: re.Match[str]) -> date | None:
        return None if expression.day is None else expression.day(match, anchor, future)

    found = [
        ResolvedDate(phrase=match[0], start=match.start(), end=match.end(), day=value)
        for match, value in _read(text, day)
    ]
    return sorted(found, key=lambda resolved: resolved.start)


def time_ranges(query: str, anchor: datetime) -> list[TimeRange]:
    """Dates and periods a question names, as [start, end) ranges in UTC, most specific first.

    Relative expressions ("last week", "3 days ago") count back from ``anchor``; a
    month without a year, or a date after the anchor, is its latest occurrence at
    or before the anchor. A named date comes before a relative expression, since
    it says more exactly when ("last Friday, on 23 January 2022").
    """
    today = anchor.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)

    def period(expression: Expression, match: re.Match[str]) -> tuple[datetime, datetime] | None:
        return None if expression.period is None else expression.period(match, today)

    return [
        TimeRange(start=start, end=end, phrase=match[0])
        for match, (start, end) in _read(query, period)
    ]


# Words that make a time expression relative to when it is said: "yesterday" in a
# stored turn is another day than "yesterday" in a question, so such a phrase is
# matched by date, never as words.
_DEICTIC = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago|last|next|this|past|within)\b", re.I
)


def is_relative(phrase: str) -> bool:
    """Whether a time phrase counts from the moment it is said ("last week", "3 days ago")."""
    return bool(_DEICTIC.search(phrase))


def resolve_event_date(text: str, anchor: date, *, future: bool = False) -> date | None:
    """The date an event sentence refers to: its first date expression, else None.

    Args:
        text: the sentence.
        anchor: the date it was written.
        future: the sentence describes a plan (bare weekdays point forward).
    """
    found = find_dates(text, anchor, future=future)
    return found[0].day if found else None


FUTURE_HINT = re.compile(
    r"\b(will|going to|gonna|plan(?:ning)? to|want to|next|tomorrow|upcoming|soon|"
    r"remind me|need to|have to)\b|'ll\b",
    re.I,
)


def resolve_item_dates(items: list[Extracted], chunk: Chunk) -> list[Extracted]:
    """Give each item the date its text (or, failing that, its source lines) refers to.

    Relative expressions are resolved from the date of the item's first cited
    line. A date a model supplied is kept when the text or the lines support it
    (one of their resolved dates, or the message's own date) and replaced
    otherwise, so an invented date never survives.

    Args:
        items: a generator's items for ``chunk``.
        chunk: the chunk whose line numbers the items cite.
    """
    by_index = {line.index: line for line in chunk.lines}
    for item in items:
        cited = [by_index[i] for i in item.lines if i in by_index]
        if not cited:
            continue  # verification re-cites or drops it; dates follow the lines
        anchor = date.fromisoformat(cited[0].date)
        future = item.type == "task" or bool(FUTURE_HINT.search(item.content))
        from_content = [d.day for d in find_dates(item.content, anchor, future=future)]
        claimed = _parse_day(item.event_time)
        if claimed is None and from_content:
            item.event_time = from_content[0].isoformat()
            continue
        from_lines = [
            d.day
            for line in cited
            for d in find_dates(line.text, date.fromisoformat(line.date), future=future)
        ]
        supported = {*from_content, *from_lines, *(date.fromisoformat(c.date) for c in cited)}
        if claimed is not None and claimed in supported:
            continue
        resolved = next(iter(from_content or from_lines), None)
        item.event_time = resolved.isoformat() if resolved is not None else None
    return items


def _parse_day(text: str | None) -> date | None:
    if not text:
        return None
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        return None
