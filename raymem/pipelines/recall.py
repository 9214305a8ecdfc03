"""Recall: query analysis, retrieval channels, weighted reciprocal rank fusion, synthesis.

Pure async code over a ``ProfileStore``; query embeddings come from an ``embed``
coroutine that the caller provides (a model pool, or a local model). Every
model-dependent stage degrades: without vectors the text channels still answer.

The pipeline:
1. analyse the query (deterministic): content words with inflection variants for
   FTS, candidate topic keys, a HyDE statement, and time ranges for its dates;
2. run the channels: memory FTS, topic keys, raw-message FTS, raw messages in the
   query's time range, and vector search of memories and messages with both the
   query and the HyDE statement;
3. fuse with weighted reciprocal rank fusion, then fold every memory into the
   turn it was extracted from (one turn, one slot), add the neighbours of the
   strongest turns, and order by score with ties broken by recency;
4. synthesise an extractive answer, with date arithmetic computed here.
"""

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import numpy as np

from raymem.config import RecallSettings
from raymem.models import rules
from raymem.pipelines.prior import apply_prior
from raymem.pipelines.temporal import NUMBER_WORDS, WEEKDAYS
from raymem.store import ProfileStore, to_db_time, utc_now
from raymem.types import Memory, RecallHit, RecallRequest, RecallResult, StoredMessage

log = logging.getLogger(__name__)

EmbedFn = Callable[[list[str]], Awaitable[np.ndarray]]

# Words that carry no topic in a question: function words, question scaffolding,
# and verbs of asking and remembering.
_STOPWORD_TEXT = """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom whose why will with would you your yours yourself
    yourselves user users tell know remember ever kind type sort much many long often also
    something anything thing things get got recall mention mentioned say said"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
# Irregular English verb forms: the porter stemmer keeps "went" and "go" apart,
# so a question in one tense would miss a statement in another.
IRREGULAR_VERBS = """go went gone|buy bought|make made|meet met|see saw seen|take took taken|
give gave given|run ran|write wrote written|begin began begun|find found|lose lost|win won|
teach taught|think thought|bring brought|feel felt|leave left|eat ate eaten|drive drove driven|
ride rode ridden|fly flew flown|sing sang sung|swim swam swum|draw drew drawn|grow grew grown|
speak spoke spoken|tell told|sell sold|build built|spend spent|send sent|hold held|keep kept|
sleep slept|fall fell fallen|choose chose chosen|break broke broken|wear wore worn|
catch caught|pay paid|lead led|become became|come came|hear heard|sit sat|stand stood|
understand understood|have had|be was been|learn learnt learned|get got gotten|do did done|know knew known|
throw threw thrown|forget forgot forgotten|hide hid hidden|shake shook shaken|wake woke woken|
bake baked|dig dug|feed fed|fight fought|hang hung|lend lent|light lit|seek sought|shoot shot|
sink sank sunk|steal stole stolen|stick stuck|strike struck|swing swung|tear tore torn|
weave wove woven|bite bit bitten|blow blew blown|freeze froze frozen|rise rose risen"""
VERB_FORMS: dict[str, tuple[str, ...]] = {}
for _group in IRREGULAR_VERBS.replace("\n", "").split("|"):
    _forms = tuple(_group.split())
    for _form in _forms:
        VERB_FORMS[_form] = _forms
PAST_TENSE = {forms[0]: forms[1] for forms in VERB_FORMS.values()}
# A few everyday synonyms; a configured model expands queries far better.
SYNONYMS = {
    "kids": ("children", "son", "daughter"),
    "children": ("kids", "son", "daughter"),
    "mom": ("mother",),
    "mother": ("mom",),
    "dad": ("father",),
    "father": ("dad",),
    "job": ("work", "career"),
    "career": ("job", "work"),
    "movie": ("film",),
    "film": ("movie",),
    "car": ("vehicle",),
    "pet": ("dog", "cat"),
    "pets": ("dog", "cat"),
    "hobby": ("hobbies", "enjoy"),
    "hobbies": ("hobby", "enjoy"),
    "trip": ("travel", "vacation"),
    "vacation": ("trip", "holiday"),
    "book": ("read", "novel"),
    "books": ("read", "novel"),
    "friend": ("friends", "buddy"),
    "married": ("wedding", "husband", "wife"),
    "birthday": ("born",),
}
TERM = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 32

WH_WORDS = {"what", "when", "where", "who", "whom", "whose", "which", "why", "how"}
AUXILIARIES = {
    "did",
    "does",
    "do",
    "is",
    "are",
    "was",
    "were",
    "has",
    "have",
    "had",
    "will",
    "would",
    "can",
    "could",
    "should",
}
BE_FORMS = {"is", "are", "was", "were"}
SUBJECT_WORDS = {
    "i",
    "you",
    "he",
    "she",
    "we",
    "they",
    "it",
    "my",
    "his",
    "her",
    "their",
    "our",
    "the",
    "a",
    "an",
}

MONTHS = {
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
_MONTH_RE = "|".join(sorted(MONTHS, key=len, reverse=True))
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

BETWEEN = re.compile(
    r"\bhow (?:many|much) (day|week|month|year)s?\b.*?\bbetween\s+(.+?)\s+and\s+(.+?)\s*\??$", re.I
)
SINCE = re.compile(
    r"\bhow (?:many (day|week|month|year)s?|long)\b.*?\b(?:since|ago|after|before)\b\s*(.*?)\s*\??$",
    re.I,
)
AGO_DID = re.compile(
    r"\bhow (?:many (day|week|month|year)s? ago|long ago)\s+(?:did|was|were|had)\s+(.+?)\s*\??$",
    re.I,
)
FIRST = re.compile(r"\b(?:first|earlier|before)\b[,:]?\s*(.+?)\s*,?\s+or\s+(.+?)\s*\??$", re.I)
UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 30.4375, "year": 365.25}


class TimeRange(msgspec.Struct, frozen=True):
    start: datetime
    end: datetime
    text: str


class Analysis(msgspec.Struct):
    fts_query: str | None
    topic_keys: list[str]
    fts_terms: list[str] = []  # the quoted phrases that ``fts_query`` ORs, in query order
    hyde: str | None = None
    time_ranges: list[TimeRange] = []
    names: list[str] = []  # people the query names, lower case: their own turns are favoured
    asks_assistant: bool = False  # "what did you recommend": the assistant's turns are favoured


# ------------------------------------------------------------ query analysis


def content_words(text: str) -> list[str]:
    """Distinct lower-case words of ``text`` that carry a topic, in order."""
    words: list[str] = []
    for word in TERM.findall(text.lower()):
        if word in STOPWORDS or word in words or not any(c.isalnum() for c in word):
            continue
        if len(word) > 1 or word.isdigit():
            words.append(word)
    return words


def expand_terms(words: Sequence[str]) -> list[str]:
    """The words plus their other verb forms and a few synonyms, original words first."""
    expanded = list(words)
    for word in words:
        for extra in (*VERB_FORMS.get(word, ()), *SYNONYMS.get(word, ())):
            if extra not in expanded and extra not in STOPWORDS:
                expanded.append(extra)
    return expanded


def fts_terms(text: str) -> list[str]:
    """The content words of ``text`` and their variants, each quoted as an FTS5 phrase.

    Quoting makes every FTS5 operator, column filter, prefix star and quote in
    user text a plain term, so no query can be a syntax error.
    """
    return [f'"{term}"' for term in expand_terms(content_words(text))[:MAX_TERMS]]


def fts_query(text: str) -> str | None:
    """An FTS5 query that ORs the content words of ``text`` and their variants."""
    return " OR ".join(fts_terms(text)) or None


def within_budget(phrases: Sequence[str], counts: Sequence[int], budget: int) -> list[str]:
    """The rarest phrases whose matching rows add up to at most ``budget``, in query order.

    A phrase no row holds is dropped. The rarest phrase is always kept, so a query
    of common words still searches; ``counts`` may be capped just above ``budget``.
    """
    by_rarity = sorted((count, position) for position, count in enumerate(counts) if count > 0)
    kept, total = set(), 0
    for count, position in by_rarity:
        if kept and total + count > budget:
            break
        kept.add(position)
        total += count
    return [phrase for position, phrase in enumerate(phrases) if position in kept]


def query_topic_keys(query: str) -> list[str]:
    """Topic keys a question is probably about, best first."""
    keys = []
    lowered = query.lower()
    for category, names in rules.CATEGORY_LEXICON.items():
        spelled = category.replace("_", " ")
        if spelled in lowered or any(re.search(rf"\b{re.escape(n)}\b", lowered) for n in names):
            keys.append(f"user.{category}")
    direct = rules.topic_key_for(query, "fact")
    if direct and direct not in keys:
        keys.insert(0, direct)
    return keys


def _past(verb: str) -> str:
    if verb in PAST_TENSE:
        return PAST_TENSE[verb]
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def hyde_statement(query: str) -> str | None:
    """A declarative sentence phrased as the answer would be (Hypothetical Document Embedding).

    "When did Caroline go to the support group?" -> "Caroline went to the support
    group". Only wh-questions with an auxiliary are rewritten; None otherwise.
    """
    words = query.strip().rstrip("?!. ").split()
    if len(words) < 3 or words[0].lower() not in WH_WORDS:
        return None
    aux_at = next((i for i, w in enumerate(words[:5]) if i > 0 and w.lower() in AUXILIARIES), None)
    if aux_at is None:
        return None
    head = [w for w in words[1:aux_at] if w.lower() not in STOPWORDS]  # "kind of car" -> "car"
    aux, rest = words[aux_at].lower(), words[aux_at + 1 :]
    if not rest:
        return None
    if rest[0][:1].islower() and rest[0].lower() not in SUBJECT_WORDS:
        # The wh-phrase is the subject: "What damages have happened to the car"
        return " ".join([*head, *([] if aux in ("do", "does", "did") else [aux]), *rest])
    if aux in BE_FORMS:  # "What is Melanie's favourite book" -> "Melanie's favourite book is"
        return " ".join([*rest, aux, *head])
    verb_at = _verb_position(rest)
    subject, predicate = (rest, []) if verb_at is None else (rest[:verb_at], rest[verb_at:])
    if aux == "did" and predicate:
        predicate = [_past(predicate[0].lower()), *predicate[1:]]
    elif aux not in ("do", "does"):  # "has Maria made" -> "Maria has made"
        predicate = [aux, *predicate]
    return " ".join([*subject, *predicate, *head])


def _verb_position(rest: Sequence[str]) -> int | None:
    """Where the main verb is after the subject: the first lower-case word past it."""
    for index, word in enumerate(rest):
        after_possessive = index > 0 and rest[index - 1].endswith("'s")
        if index == 0 or after_possessive or word[:1].isupper() or word.lower() in SUBJECT_WORDS:
            continue
        if word.lower() in ("and", "or", "both"):  # "John and Maria both done"
            continue
        return index
    return None


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
        _add_day(add, m, int(m.group(3)), MONTHS[m.group(2).lower()], int(m.group(1)))
    for m in MONTH_DAY_YEAR.finditer(query):
        _add_day(add, m, int(m.group(3)), MONTHS[m.group(1).lower()], int(m.group(2)))
    for m in ISO_DATE.finditer(query):
        _add_day(add, m, int(m.group(1)), int(m.group(2)), int(m.group(3)))
    for m in MONTH_YEAR.finditer(query):
        start = datetime(int(m.group(2)), MONTHS[m.group(1).lower()], 1, tzinfo=UTC)
        add(m, start, _next_month(start))
    for m in MONTH_ONLY.finditer(query):
        month = MONTHS[m.group(1).lower()]
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


NAME_WORD = re.compile(r"(?<![\w'’])([A-Z][a-z][\w-]*)(?:['’]s)?\b")
ASKS_ASSISTANT = re.compile(
    r"\byou(?:'d| had| have)? (?:mention|recommend|suggest|list|creat|propos|explain|describ|"
    r"shar|nam|provid|said|say|told|tell|gave|give|wrote|write|came up with|come up with)"
    r"(?:e|ed|d|s)?\b",
    re.I,
)


def query_names(query: str) -> list[str]:
    """Capitalised words of the query that may name people, lower case, possessives stripped.

    The first word of the query is capitalised anyway and is skipped, and so are
    words that carry no topic ("What", "I"); a month or a place that slips
    through does no harm, since it only ever matches a speaker's name.
    """
    names = []
    for match in NAME_WORD.finditer(query):
        word = match.group(1).lower()
        if match.start() == 0 or word in STOPWORDS or word in names:
            continue
        names.append(word)
    return names


def analyse(query: str, anchor: datetime | None = None) -> Analysis:
    """Everything the channels need from the query, computed without a model."""
    terms = fts_terms(query)
    return Analysis(
        fts_query=" OR ".join(terms) or None,
        fts_terms=terms,
        topic_keys=query_topic_keys(query),
        hyde=hyde_statement(query),
        time_ranges=time_ranges(query, anchor or utc_now()),
        names=query_names(query),
        asks_assistant=bool(ASKS_ASSISTANT.search(query)),
    )


# ------------------------------------------------------------------- fusion


class Candidate(msgspec.Struct):
    kind: str  # "memory" or "message"
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
) -> list[Candidate]:
    """Weighted reciprocal rank fusion of ranked lists of (kind, seq)."""
    fused: dict[tuple[str, int], Candidate] = {}
    for channel, ranked in rankings.items():
        weight = weights.get(channel, 1.0)
        for rank, (kind, seq) in enumerate(ranked):
            candidate = fused.setdefault((kind, seq), Candidate(kind=kind, seq=seq, parts={}))
            candidate.parts[channel] = candidate.parts.get(channel, 0.0) + weight / (k + rank + 1)
    return list(fused.values())


class Scored(msgspec.Struct):
    """A loaded candidate: a memory or a raw message, with its fused score per channel."""

    parts: dict[str, float]
    memory: Memory | None = None
    message: StoredMessage | None = None
    message_seq: int | None = None  # of the message, or of the turn a memory came from
    turn_at: datetime | None = None  # message time of the evidence turn, once known

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
    speaker, _ = rules.split_speaker(_content(item))
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


def order(items: Sequence[Scored]) -> list[Scored]:
    """Best score first; equal scores: the more recent evidence first."""
    return sorted(items, key=lambda item: (item.score, item.when), reverse=True)


# ------------------------------------------------------------------- recall


class Recaller:
    """Runs recall over one store; the profile actor keeps one."""

    def __init__(
        self, store: ProfileStore, settings: RecallSettings, embed: EmbedFn | None
    ) -> None:
        self.store = store
        self.settings = settings
        self.embed = embed

    def weights(self) -> dict[str, float]:
        s = self.settings
        return {
            "topic_key": s.topic_key_weight,
            "memory_fts": s.memory_fts_weight,
            "memory_vector": s.memory_vector_weight,
            "message_fts": s.message_fts_weight,
            "message_vector": s.message_vector_weight,
            "message_time": s.message_time_weight,
            "hyde_memory_vector": s.hyde_memory_vector_weight,
            "hyde_message_vector": s.hyde_message_vector_weight,
        }

    async def recall(
        self, request: RecallRequest, *, query_vector: np.ndarray | None = None
    ) -> RecallResult:
        """Answer ``request``: channels in parallel, fused, grouped by turn, synthesised."""
        timings: dict[str, float] = {}
        started = time.perf_counter()
        anchor = self.store.search.latest_activity() or utc_now()
        analysis = analyse(request.query, anchor)
        timings["analyse"] = _ms(started)

        weights = self.weights()
        hyde = (
            analysis.hyde
            if weights["hyde_memory_vector"] or weights["hyde_message_vector"]
            else None
        )
        # The query is embedded by the model pool while the text channels run here.
        embed_task = asyncio.ensure_future(
            self._embed_query(request.query, hyde, query_vector, timings)
        )
        try:
            await asyncio.sleep(0)  # the embedding request leaves before the text channels run
            text_rankings = await self._text_channels(request, analysis, timings)
            query_vec, hyde_vec = await embed_task
        finally:
            embed_task.cancel()  # a no-op once it is done
        vector_rankings = await self._vector_channels(request, query_vec, hyde_vec, timings)

        fuse_started = time.perf_counter()
        fused = fuse({**text_rankings, **vector_rankings}, weights, self.settings.rrf_k)
        items = group_by_turn(await self._load(fused, request))
        favour_speakers(items, analysis, self.settings.speaker_share)
        apply_prior(items, self.settings, anchor, self.store.quick)
        items = await self._add_neighbours(items, request)
        items = order(items)[: request.limit]
        hits = [_hit(item) for item in items]
        timings["fuse"] = _ms(fuse_started)

        synth_started = time.perf_counter()
        answer = ""
        if request.synthesize:
            facts = await date_facts(self.store, request.query, anchor, request.session_id)
            answer = synthesize(request.query, items, facts)
        timings["synthesize"] = _ms(synth_started)
        timings["total"] = _ms(started)
        channels = sorted({c for hit in hits for c in hit.channels})
        return RecallResult(
            answer=answer,
            memories=hits,
            method="hybrid:" + "+".join(channels) if channels else "hybrid",
            latency_ms=timings,
        )

    async def _embed_query(
        self,
        query: str,
        hyde: str | None,
        given: np.ndarray | None,
        timings: dict[str, float],
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Vectors of the query and the HyDE statement, one model call; (None, None) on failure."""
        texts = ([] if given is not None else [query]) + ([hyde] if hyde else [])
        if self.embed is None or not texts:
            return given, None
        started = time.perf_counter()
        try:
            vectors = await self.embed(texts)
        except Exception:  # a failed model stage degrades to the text channels
            log.exception("query embedding failed; recalling without vectors")
            return given, None
        finally:
            timings["embed"] = _ms(started)
        query_vec = given if given is not None else vectors[0]
        return query_vec, (vectors[-1] if hyde else None)

    async def _text_channels(
        self, request: RecallRequest, analysis: Analysis, timings: dict[str, float]
    ) -> dict[str, list[tuple[str, int]]]:
        started = time.perf_counter()
        parts = [
            await self._topic_channel(request, analysis),
            await self._memory_text_channel(request, analysis),
            await self._message_text_channels(request, analysis),
        ]
        timings["text_channels"] = _ms(started)
        return {name: ranking for part in parts for name, ranking in part.items()}

    async def _topic_channel(
        self, request: RecallRequest, analysis: Analysis
    ) -> dict[str, list[tuple[str, int]]]:
        if not analysis.topic_keys or (
            request.types and not {"fact", "instruction"} & set(request.types)
        ):
            return {}
        seqs = self.store.search.topic_heads(analysis.topic_keys)
        return {"topic_key": [("memory", seq) for seq in seqs]}

    async def _memory_text_channel(
        self, request: RecallRequest, analysis: Analysis
    ) -> dict[str, list[tuple[str, int]]]:
        memory_query = await self._budgeted_query("memories", analysis.fts_terms)
        if memory_query is None:
            return {}
        seqs = self.store.search.memories_text(
            memory_query,
            limit=self._limit(request),
            types=request.types,
            session_id=request.session_id,
        )
        return {"memory_fts": [("memory", seq) for seq in seqs]}

    async def _message_text_channels(
        self, request: RecallRequest, analysis: Analysis
    ) -> dict[str, list[tuple[str, int]]]:
        if not _wants_messages(request):
            return {}
        message_query = await self._budgeted_query("messages", analysis.fts_terms)
        if message_query is None:
            return {}
        limit = self._limit(request)
        seqs = self.store.search.messages_text(
            message_query, limit=limit, session_id=request.session_id
        )
        rankings = {"message_fts": [("message", seq) for seq in seqs]}
        in_range: list[tuple[str, int]] = []
        for period in analysis.time_ranges:
            seqs = self.store.search.messages_text(
                message_query,
                limit=limit,
                session_id=request.session_id,
                between=(to_db_time(period.start), to_db_time(period.end)),
            )
            in_range.extend(("message", seq) for seq in seqs)
        if in_range:
            rankings["message_time"] = list(dict.fromkeys(in_range))
        return rankings

    def _limit(self, request: RecallRequest) -> int:
        return max(self.settings.candidates_per_channel, request.limit)

    async def _budgeted_query(self, table: str, phrases: Sequence[str]) -> str | None:
        """An FTS5 query over ``table`` without the phrases too common to be worth scoring."""
        budget = self.settings.fts_postings_budget
        counts = self.store.search.term_counts(table, phrases, cap=budget + 1)
        return " OR ".join(within_budget(phrases, counts, budget)) or None

    async def _vector_channels(
        self,
        request: RecallRequest,
        query_vec: np.ndarray | None,
        hyde_vec: np.ndarray | None,
        timings: dict[str, float],
    ) -> dict[str, list[tuple[str, int]]]:
        started = time.perf_counter()
        limit = max(self.settings.candidates_per_channel, request.limit)
        rankings: dict[str, list[tuple[str, int]]] = {}
        for prefix, vector in (("", query_vec), ("hyde_", hyde_vec)):
            if vector is None:
                continue
            for kind, table in (("memory", "memory_vectors"), ("message", "message_vectors")):
                if kind == "message" and not _wants_messages(request):
                    continue
                found = await self.store.search.vectors(table, vector, limit=limit)
                rankings[f"{prefix}{kind}_vector"] = [(kind, seq) for seq, _ in found]
        timings["vector_channels"] = _ms(started)
        return rankings

    async def _load(self, fused: list[Candidate], request: RecallRequest) -> list[Scored]:
        """Rows for the fused candidates, filtered by type, session and supersession."""
        memories = self.store.search.memories_with_turns(
            [c.seq for c in fused if c.kind == "memory"]
        )
        messages = self.store.search.messages_by_seq([c.seq for c in fused if c.kind == "message"])
        items = []
        for candidate in fused:
            if candidate.kind == "memory":
                memory, turn_seq, turn_at = memories.get(candidate.seq, (None, None, None))
                if memory is not None and _memory_matches(memory, request):
                    items.append(
                        Scored(
                            dict(candidate.parts),
                            memory=memory,
                            message_seq=turn_seq,
                            turn_at=turn_at,
                        )
                    )
            else:
                message = messages.get(candidate.seq)
                if message is not None and (
                    request.session_id is None or message.session_id == request.session_id
                ):
                    items.append(
                        Scored(dict(candidate.parts), message=message, message_seq=candidate.seq)
                    )
        return items

    async def _add_neighbours(self, items: list[Scored], request: RecallRequest) -> list[Scored]:
        """Add the turns next to the strongest ones: an answer often sits beside its question."""
        if not _wants_messages(request) or not items:
            return items
        lifts = context_lifts(items, self.settings.context_window, self.settings.context_share)
        top = sorted(items, key=lambda item: item.score, reverse=True)[
            : self.settings.neighbour_top
        ]
        parents = {item.message_seq: item for item in top if item.message_seq is not None}
        adjacent = self.store.search.adjacent_messages(
            list(parents), window=self.settings.neighbour_window
        )
        by_seq = {item.message_seq: item for item in items if item.message_seq is not None}
        for parent_seq, neighbours in adjacent.items():
            parent = parents[parent_seq]
            asks = _content(parent).rstrip().endswith("?")
            for seq, message in neighbours:
                share = (
                    self.settings.reply_share
                    if asks and seq == parent_seq + 1
                    else self.settings.neighbour_share
                )
                bonus = parent.score * share
                if seq not in by_seq:
                    by_seq[seq] = Scored({}, message=message, message_seq=seq)
                    items.append(by_seq[seq])
                # Several strong turns around one: it keeps the largest lift.
                parts = by_seq[seq].parts
                parts["neighbour"] = max(parts.get("neighbour", 0.0), bonus)
        # The found turns (the neighbours were appended after them): being near a
        # strong turn is one reason, so a turn keeps the larger of the two lifts.
        for item, lift in zip(items, lifts, strict=False):
            if lift > item.parts.get("neighbour", 0.0):
                item.parts.pop("neighbour", None)
                item.parts["context"] = lift
        return items


def _wants_messages(request: RecallRequest) -> bool:
    return request.include_messages and not request.types


def _memory_matches(memory: Memory, request: RecallRequest) -> bool:
    if memory.superseded_by is not None or memory.forgotten_at is not None:
        return False
    if request.types and memory.type not in request.types:
        return False
    return request.session_id is None or memory.session_id == request.session_id


def _hit(item: Scored) -> RecallHit:
    if item.memory is not None:
        fields: dict[str, Any] = msgspec.structs.asdict(item.memory)
        return RecallHit(**fields, score=round(item.score, 6), channels=item.channels)
    message = item.message
    assert message is not None
    return RecallHit(
        id=message.id,
        type="message",
        content=message.content,
        session_id=message.session_id,
        source_message_ids=[message.id],
        created_at=message.created_at,
        role=message.role,
        score=round(item.score, 6),
        channels=item.channels,
    )


# ---------------------------------------------------------- date arithmetic


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
    extract = rules.synthesize(query, [(_content(item), item.score) for item in items])
    parts = list(facts)
    if items and query.strip().lower().startswith("when") and not facts:
        parts.append(f"({_day(items[0].when)})")
    if extract:
        parts.append(extract)
    return " ".join(parts)


def _content(item: Scored) -> str:
    source = item.memory if item.memory is not None else item.message
    assert source is not None
    return source.content


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
