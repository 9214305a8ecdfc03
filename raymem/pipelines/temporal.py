"""Relative and absolute date expressions resolved against the time a message was written.

"We deployed v2.3 yesterday" written on 2026-04-15 happened on 2026-04-14. The
resolver is deterministic and needs no model: each expression is a regular
expression plus a rule that moves the message's date. Pure functions, no I/O.
"""

import calendar
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

import msgspec

from raymem.pipelines.types import Chunk, Extracted

WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
MONTHS = [
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
_NUMBER = r"(\d{1,3}|a couple of|a few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(day|week|month|year)s?"
_WEEKDAY = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTH = (
    r"(january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
)


class ResolvedDate(msgspec.Struct, frozen=True):
    """A date expression found in a text and the calendar date it denotes."""

    phrase: str
    start: int  # character offsets of the phrase in the text
    end: int
    day: date


def _number(text: str) -> int:
    text = text.lower()
    return int(text) if text.isdigit() else NUMBER_WORDS[text]


def _month_number(name: str) -> int:
    name = name.lower()
    return next(index + 1 for index, month in enumerate(MONTHS) if month.startswith(name[:3]))


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


def _explicit_year(year: str | None, anchor: date) -> int:
    if year is None:
        return anchor.year
    value = int(year)
    return value + 2000 if value < 100 else value


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


Rule = Callable[[re.Match[str], date, bool], date | None]

# (pattern, rule): the rule gets the match, the message's date and whether the
# sentence speaks about the future (a task or a plan), and returns the date.
RULES: list[tuple[re.Pattern[str], Rule]] = [
    (
        re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"),
        lambda m, a, f: _safe_date(int(m[1]), int(m[2]), int(m[3])),
    ),
    (
        re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?{_MONTH},? (\d{{4}})\b", re.I),
        lambda m, a, f: _safe_date(int(m[3]), _month_number(m[2]), int(m[1])),
    ),
    (
        re.compile(rf"\b{_MONTH} (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})\b", re.I),
        lambda m, a, f: _safe_date(int(m[3]), _month_number(m[1]), int(m[2])),
    ),
    (
        re.compile(rf"\b(?:in |since |until |by )?{_MONTH} (\d{{4}})\b", re.I),
        lambda m, a, f: _safe_date(int(m[2]), _month_number(m[1]), 1),
    ),
    (
        re.compile(r"\b(?:in|since|during) ((?:19|20)\d\d)\b", re.I),
        lambda m, a, f: date(int(m[1]), 1, 1),
    ),
    (re.compile(r"\bday before yesterday\b", re.I), lambda m, a, f: a - timedelta(days=2)),
    (re.compile(r"\bday after tomorrow\b", re.I), lambda m, a, f: a + timedelta(days=2)),
    (
        re.compile(r"\b(yesterday|last night)\b", re.I),
        lambda m, a, f: a - timedelta(days=1),
    ),
    (re.compile(r"\btomorrow\b", re.I), lambda m, a, f: a + timedelta(days=1)),
    (
        re.compile(r"\b(today|tonight|this (morning|afternoon|evening)|earlier today)\b", re.I),
        lambda m, a, f: a,
    ),
    (
        re.compile(rf"\b{_NUMBER} {_UNIT} ago\b", re.I),
        lambda m, a, f: _shift(a, -_number(m[1]), m[2]),
    ),
    (
        re.compile(rf"\b(?:in|within) {_NUMBER} {_UNIT}(?: time)?\b", re.I),
        lambda m, a, f: _shift(a, _number(m[1]), m[2]),
    ),
    (
        re.compile(rf"\b{_NUMBER} {_UNIT} from now\b", re.I),
        lambda m, a, f: _shift(a, _number(m[1]), m[2]),
    ),
    (
        re.compile(r"\blast weekend\b", re.I),
        lambda m, a, f: previous_weekday(a, 5),
    ),
    (re.compile(r"\bnext weekend\b", re.I), lambda m, a, f: next_weekday(a, 5)),
    (
        re.compile(r"\bthis weekend\b", re.I),
        lambda m, a, f: a + timedelta(days=(5 - a.weekday()) % 7),
    ),
    (
        re.compile(rf"\blast {_WEEKDAY}\b", re.I),
        lambda m, a, f: previous_weekday(a, WEEKDAYS.index(m[1].lower())),
    ),
    (
        re.compile(rf"\bnext {_WEEKDAY}\b", re.I),
        lambda m, a, f: next_weekday(a, WEEKDAYS.index(m[1].lower())),
    ),
    (
        re.compile(rf"\bthis {_WEEKDAY}\b", re.I),
        lambda m, a, f: a + timedelta(days=WEEKDAYS.index(m[1].lower()) - a.weekday()),
    ),
    (re.compile(r"\blast week\b", re.I), lambda m, a, f: a - timedelta(weeks=1)),
    (re.compile(r"\bnext week\b", re.I), lambda m, a, f: a + timedelta(weeks=1)),
    (re.compile(r"\blast month\b", re.I), lambda m, a, f: add_months(a, -1)),
    (re.compile(r"\bnext month\b", re.I), lambda m, a, f: add_months(a, 1)),
    (re.compile(r"\blast year\b", re.I), lambda m, a, f: add_months(a, -12)),
    (re.compile(r"\bnext year\b", re.I), lambda m, a, f: add_months(a, 12)),
    (
        # A bare weekday: the coming one in a plan, the latest one otherwise.
        re.compile(rf"\b(?:on )?{_WEEKDAY}\b", re.I),
        lambda m, a, f: (next_weekday if f else previous_weekday)(a, WEEKDAYS.index(m[1].lower())),
    ),
]


# Cheap pre-check: most sentences contain no date expression at all.
_TRIGGER = re.compile(
    rf"\d|\b(yesterday|today|tonight|tomorrow|ago|last|next|this|from now|weekend|within|"
    rf"{_WEEKDAY[1:-1]}|{_MONTH[1:-1]})\b|\bin {_NUMBER}\b",
    re.I,
)


def find_dates(text: str, anchor: date, *, future: bool = False) -> list[ResolvedDate]:
    """Every date expression in ``text``, resolved against ``anchor``, in text order.

    Longer, more specific expressions win where two overlap ("last Friday" over
    "Friday"); the order of ``RULES`` encodes that preference.

    Args:
        text: a sentence or a whole message.
        anchor: the date the text was written (the message's ``created_at``).
        future: the sentence is a plan or a task, so a bare weekday is the coming one.
    """
    if not _TRIGGER.search(text):
        return []
    taken: list[tuple[int, int]] = []
    found: list[ResolvedDate] = []
    for pattern, rule in RULES:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(start < t_end and t_start < end for t_start, t_end in taken):
                continue
            try:
                day = rule(match, anchor, future)
            except (OverflowError, ValueError):  # beyond the calendar: not a date we can use
                continue
            if day is None:
                continue
            taken.append((start, end))
            found.append(ResolvedDate(phrase=match[0], start=start, end=end, day=day))
    return sorted(found, key=lambda item: item.start)


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
        resolved = (from_content or from_lines or [None])[0]
        item.event_time = resolved.isoformat() if resolved is not None else None
    return items


def _parse_day(text: str | None) -> date | None:
    if not text:
        return None
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        return None


# ------------------------------------------------------ ranges for recall

QUERY_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH_RE = "|".join(sorted(QUERY_MONTHS, key=len, reverse=True))
DAY_MONTH_YEAR = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH_RE})\.?,?\s+((?:19|20)\d\d)\b", re.I
)
MONTH_DAY_YEAR = re.compile(
    rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+((?:19|20)\d\d)\b", re.I
)
MONTH_YEAR = re.compile(rf"\b({_MONTH_RE})\.?,?\s+((?:19|20)\d\d)\b", re.I)
MONTH_ONLY = re.compile(rf"\b(?:in|during|of|since)\s+({_MONTH_RE})\b", re.I)
ISO_DATE = re.compile(r"\b((?:19|20)\d\d)[-/](\d{1,2})[-/](\d{1,2})\b")
YEAR_ONLY = re.compile(r"\b(?:in|during|of)\s+((?:19|20)\d\d)\b", re.I)
RELATIVE = re.compile(
    r"\b(yesterday|today|tonight|this (?:morning|week|month|year)|last (week|month|year|weekend|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)|(\d+|a|an|one|two|three|four|five|"
    r"six|seven|eight|nine|ten) (day|week|month|year)s? ago)\b",
    re.I,
)

UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 30.4375, "year": 365.25}


class TimeRange(msgspec.Struct, frozen=True):
    start: datetime
    end: datetime
    text: str


def time_ranges(query: str, anchor: datetime) -> list[TimeRange]:
    """Dates and periods the query names, resolved to [start, end) ranges in UTC.

    Relative expressions ("last week", "3 days ago") count back from ``anchor``;
    a month without a year is its latest occurrence at or before the anchor.
    """
    anchor = anchor.astimezone(UTC)
    today = anchor.replace(hour=0, minute=0, second=0, microsecond=0)
    found: list[TimeRange] = []
    spans: list[tuple[int, int]] = []

    def add(match: re.Match[str], start: datetime, end: datetime) -> None:
        if any(a <= match.start() < b for a, b in spans):  # inside a longer date already read
            return
        spans.append(match.span())
        found.append(TimeRange(start=start, end=end, text=match.group(0)))

    for m in DAY_MONTH_YEAR.finditer(query):
        _add_day(add, m, int(m.group(3)), QUERY_MONTHS[m.group(2).lower()], int(m.group(1)))
    for m in MONTH_DAY_YEAR.finditer(query):
        _add_day(add, m, int(m.group(3)), QUERY_MONTHS[m.group(1).lower()], int(m.group(2)))
    for m in ISO_DATE.finditer(query):
        _add_day(add, m, int(m.group(1)), int(m.group(2)), int(m.group(3)))
    for m in MONTH_YEAR.finditer(query):
        start = datetime(int(m.group(2)), QUERY_MONTHS[m.group(1).lower()], 1, tzinfo=UTC)
        add(m, start, _next_month(start))
    for m in MONTH_ONLY.finditer(query):
        month = QUERY_MONTHS[m.group(1).lower()]
        year = today.year if month <= today.month else today.year - 1
        start = datetime(year, month, 1, tzinfo=UTC)
        add(m, start, _next_month(start))
    for m in YEAR_ONLY.finditer(query):
        add(
            m,
            datetime(int(m.group(1)), 1, 1, tzinfo=UTC),
            datetime(int(m.group(1)) + 1, 1, 1, tzinfo=UTC),
        )
    for m in RELATIVE.finditer(query):
        start, end = _relative(m, today)
        add(m, start, end)
    return found


def _add_day(
    add: Callable[..., None], match: re.Match[str], year: int, month: int, day: int
) -> None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:  # "31 February": not a date
        return
    add(match, start, start + timedelta(days=1))


def _next_month(start: datetime) -> datetime:
    return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)


def _relative(match: re.Match[str], today: datetime) -> tuple[datetime, datetime]:
    text = match.group(1).lower()
    day = timedelta(days=1)
    if text == "yesterday":
        return today - day, today
    if text in ("today", "tonight", "this morning"):
        return today, today + day
    if text.startswith("this "):
        span = {"week": 7, "month": 31, "year": 366}[text.split()[1]]
        return today - span * day, today + day
    if text.startswith("last "):
        unit = match.group(2).lower()
        if unit in WEEKDAYS:
            back = (today.weekday() - WEEKDAYS.index(unit)) % 7 or 7
            return today - back * day, today - (back - 1) * day
        span = {"week": 7, "weekend": 7, "month": 31, "year": 366}[unit]
        return today - 2 * span * day, today  # "last month" is loose in speech: a generous window
    count = NUMBER_WORDS.get(match.group(3).lower()) or int(match.group(3))
    centre = today - timedelta(days=count * UNIT_DAYS[match.group(4).lower()])
    slack = timedelta(days=max(1.0, count * UNIT_DAYS[match.group(4).lower()] * 0.25))
    return centre - slack, centre + slack + day
