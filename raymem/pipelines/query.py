"""Query analysis: what recall's channels need from a question, computed without a model.

The full-text terms (content words, their other verb forms and a few synonyms),
the topic keys it is probably about, a HyDE statement (the question rephrased as
its answer would be), the time ranges it names (``temporal``), the people it
names and whether it asks about the assistant's own words. No I/O, no Ray.
"""

import re
from collections.abc import Sequence
from datetime import datetime

import msgspec

from raymem.pipelines import rules
from raymem.pipelines.language import QUERY_STOPWORDS, query_words
from raymem.pipelines.temporal import TimeRange, is_relative, time_ranges
from raymem.store import utc_now

MAX_TERMS = 32  # FTS5 phrases per query: the content words and their variants, in order
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
# The words a HyDE statement is built around: "When did Caroline go ..." has a
# wh-word, an auxiliary, then a subject.
WH_WORDS = frozenset(["what", "when", "where", "who", "whom", "whose", "which", "why", "how"])
AUXILIARIES = frozenset(
    [
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
    ]
)
BE_FORMS = frozenset(["is", "are", "was", "were"])
SUBJECT_WORDS = frozenset(
    [
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
    ]
)


class Analysis(msgspec.Struct):
    """Everything the channels need from a query."""

    topic_keys: list[str]
    fts_terms: list[str] = []  # quoted FTS5 phrases: content words and their variants, in order
    hyde: str | None = None
    time_ranges: list[TimeRange] = []
    names: list[str] = []  # people the query names, lower case: their own turns are favoured
    asks_assistant: bool = False  # "what did you recommend": the assistant's turns are favoured
    asks_current: bool = False  # "now", "currently", "most recently": newer evidence is favoured


def expand_terms(words: Sequence[str]) -> list[str]:
    """The words plus their other verb forms and a few synonyms, original words first."""
    expanded = list(words)
    for word in words:
        for extra in (*VERB_FORMS.get(word, ()), *SYNONYMS.get(word, ())):
            if extra not in expanded and extra not in QUERY_STOPWORDS:
                expanded.append(extra)
    return expanded


def fts_terms(text: str) -> list[str]:
    """The content words of ``text`` and their variants, each quoted as an FTS5 phrase.

    Quoting makes every FTS5 operator, column filter, prefix star and quote in
    user text a plain term, so no query can be a syntax error.
    """
    return [f'"{term}"' for term in expand_terms(query_words(text))[:MAX_TERMS]]


def fts_query(text: str) -> str | None:
    """An FTS5 query that ORs the content words of ``text`` and their variants."""
    return " OR ".join(fts_terms(text)) or None


def within_budget(phrases: Sequence[str], counts: Sequence[int], budget: int) -> list[str]:
    """The rarest phrases whose matching rows add up to at most ``budget``, in query order.

    A phrase no row holds is dropped. The rarest phrase is always kept, so a query
    of common words still searches; ``counts`` may be capped just above ``budget``.
    """
    by_rarity = sorted((count, position) for position, count in enumerate(counts) if count > 0)
    kept: set[int] = set()
    total = 0
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
    head = [
        w for w in words[1:aux_at] if w.lower() not in QUERY_STOPWORDS
    ]  # "kind of car" -> "car"
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
        if match.start() == 0 or word in QUERY_STOPWORDS or word in names:
            continue
        names.append(word)
    return names


# A question about the present state, or the latest of several: newer evidence answers it.
ASKS_CURRENT = re.compile(
    r"\b(?:now|currently|current|these days|at the moment|still|latest|most recent(?:ly)?|"
    r"lately|anymore|any more|so far|up to now|by now)\b",
    re.IGNORECASE,
)


def widen(analysis: Analysis, terms: Sequence[str]) -> Analysis:
    """``analysis`` with more full-text terms (a model's synonyms), after the query's own."""
    extra = [phrase for term in terms for phrase in fts_terms(term)]
    merged = list(dict.fromkeys([*analysis.fts_terms, *extra]))[:MAX_TERMS]
    return msgspec.structs.replace(analysis, fts_terms=merged)


def analyse(query: str, anchor: datetime | None = None) -> Analysis:
    """Everything the channels need from the query, computed without a model.

    Args:
        query: the question.
        anchor: "now" for the relative dates it names (the request's ``as_of``, or the clock).
    """
    ranges = time_ranges(query, anchor or utc_now())
    return Analysis(
        fts_terms=fts_terms(_without_relative_times(query, ranges)),
        topic_keys=query_topic_keys(query),
        hyde=hyde_statement(query),
        time_ranges=ranges,
        names=query_names(query),
        asks_assistant=bool(ASKS_ASSISTANT.search(query)),
        asks_current=bool(ASKS_CURRENT.search(query)),
    )


def _without_relative_times(query: str, ranges: Sequence[TimeRange]) -> str:
    """The query less its relative time phrases, which the time channels read by date."""
    for time_range in ranges:
        if is_relative(time_range.phrase):
            query = query.replace(time_range.phrase, " ")
    return query
