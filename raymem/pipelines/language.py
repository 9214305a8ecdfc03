"""Words and sentences: the one word list, tokenising, sentence and speaker splitting.

Statements (what extraction keeps, verification compares, reconciliation
matches) and questions (what recall searches for) share one list of words
that carry no topic, ``STOPWORDS``. Each side drops a few more words, named
below with the reason, because a word that is filler in a statement can be
the very topic of a question ("what does Melanie love?"). No Ray imports.
"""

import re

WORD = re.compile(r"[\w'’-]+", re.UNICODE)  # a statement's words keep their apostrophes
TERM = re.compile(r"\w+", re.UNICODE)  # as FTS5's unicode61 tokenizer splits a query
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])|\n+")
# "Caroline: I went to ..." (transcripts that name the speaker inside the turn).
SPEAKER_PREFIX = re.compile(r"^([A-Z][\w'’.-]{0,30}(?: [A-Z][\w'’.-]{0,30})?):\s+(?=\S)")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Function words and contractions: no topic in a statement or a question.
STOPWORDS = _words(
    """
    a about again all also am an and any anything are as at be because been being both but
    by can could did do does down each ever for from get got had has have he here how i if
    in into is it its just know many me more most much my no not now of off on only or other
    our out over own same she should so some something such than that the their them then
    there these they thing things this those to too up very was we were what when where
    which while who whom why will with would you your
    can't didn't doesn't don't he's how's i'd i'll i'm i've isn't it's let's she's that's
    they're wasn't we're what's won't you're
    """
)
# Also dropped from statements: small talk, intensifiers, vague verbs and nouns.
# A sentence needs two words outside this list to be worth remembering ("That's so
# great!" has one), and search questions are written from the words left. A
# question keeps them: "what does Melanie love?", "what did Dave make?", "in May";
# dropping them there too changes the search terms of 421 of the 2,084 LoCoMo and
# LongMemEval (dev) questions.
STATEMENT_STOPWORDS = STOPWORDS | _words(
    """
    absolutely ah amazing awesome cool definitely glad good great hello hey hi lovely nice oh
    pretty really super sure thank thanks totally well wow yeah yes
    done feel felt go going keep let like look looks love made make mean means saw see sound
    sounds think
    always even may might must never shall still though
    day everything im lot lots mine one time us way
    """
)
# Also dropped from questions: the scaffolding of asking about a memory ("do you
# remember", "what kind of", "did she mention"), "user", and pronouns and
# prepositions that narrow no full-text search. A statement keeps them: they count
# towards its informative words and its search questions; dropping them there too
# loses 145 of the 11,542 memories the rules extract from LoCoMo and changes the
# questions of 956 more.
QUERY_STOPWORDS = STOPWORDS | _words(
    """
    kind long mention mentioned often recall remember said say sort tell type user users
    above after against before below between during further once through under until
    doing few having nor
    her hers herself him himself his itself myself ours ourselves theirs themselves whose
    yours yourself yourselves
    """
)


def content_words(text: str) -> list[str]:
    """The lower-cased words of a statement that carry meaning, in order, repeats kept."""
    words = (w.lower().strip("'’-") for w in WORD.findall(text))
    return [w for w in words if w and w not in STATEMENT_STOPWORDS]


def query_words(text: str) -> list[str]:
    """The distinct lower-case words of a query that carry its topic, in order.

    Split as the full-text index splits text (at apostrophes too), so that each
    is a term the index holds; single letters other than digits are dropped.
    """
    words: list[str] = []
    for word in TERM.findall(text.lower()):
        if word in QUERY_STOPWORDS or word in words or not any(c.isalnum() for c in word):
            continue
        if len(word) > 1 or word.isdigit():
            words.append(word)
    return words


def split_sentences(text: str) -> list[str]:
    """Sentences of a turn, stripped; bullet markers removed."""
    parts = (part.strip(" \t-*•") for part in SENTENCE_END.split(text))
    return [part for part in parts if part]


NOT_SPEAKERS = _words(
    "note update warning error todo example summary q a re edit fyi ps tip step answer"
    " question important reminder"
)


def split_speaker(content: str) -> tuple[str | None, str]:
    """A turn's speaker named inside it ("Caroline: I went ...") and the rest of the turn."""
    match = SPEAKER_PREFIX.match(content)
    if match is None or match.group(1).lower() in NOT_SPEAKERS:
        return None, content
    return match.group(1), content[match.end() :]
