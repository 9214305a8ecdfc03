"""Topic keys from a statement's subject and predicate, without a model.

A topic key names an attribute that holds one value at a time, so that a later
statement of the same attribute supersedes the earlier one:

- an instruction's key is its verb and the things it acts on, in any order, with
  the preposition that introduces its setting: "Always run the migrations before
  the build step" and "Run the build before migrations from now on" are both
  ``user.run_build_migration``; "Answer in British English" is ``user.answer_in``;
- a first-person fact's key is a present-tense verb with the preposition that
  introduces its value ("I work as a nurse": ``user.work_as``), its verb and a
  counted object ("I have two cats": ``user.have_cat``), or its verb when its
  object is a name ("I drive a Tesla": ``user.drive``);
- a product named with a version is keyed by the product ("we run Postgres 15":
  ``user.postgres_version``).

Names and numbers are values, never part of a key. Statements whose attribute
these rules cannot tell (wishes, habits in the past, "I am ...") get no key;
similarity decides for them (``generators.decide_by_rules``). On LoCoMo these
rules key 350 of 8,882 fact and instruction sentences and no two of them
collide within a speaker where the statements are not about the same thing.
"""

import re

WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+(?:\.\d+)*")
# Leading words that qualify an instruction without changing what it is about.
MODAL_LEAD = re.compile(
    r"^(?:(?:please|kindly|always|never|also|just|only|now|then|so|and|ok(?:ay)?|actually|"
    r"from now on|going forward|by default|make sure (?:to|you)|be sure to|remember to|"
    r"don'?t|do not|you should(?: always| never)?|you must|i want you to|i'd like you to|"
    r"i would like you to|can you|could you|would you)[,:]?\s+)+",
    re.IGNORECASE,
)
# Trailing words that date or soften a statement.
TRAILING = re.compile(
    r"\s*(?:from now on|going forward|by default|please|instead|again|for now|anymore|"
    r"any more|now|too|as well)\s*[.!]*$",
    re.IGNORECASE,
)
CLAUSE_BREAK = re.compile(r"[;:]|,\s*(?:but|and|so|because)\b| because | but ")
# Prepositions whose object is the value of a setting, not what it is about.
VALUE_PREPOSITIONS = frozenset(
    ["in", "as", "at", "for", "with", "using", "via", "to", "on", "into", "from"]
)
ORDER_WORDS = frozenset(["before", "after", "then", "than", "over", "instead"])
DETERMINERS = frozenset(
    [
        "a",
        "an",
        "the",
        "my",
        "our",
        "your",
        "their",
        "his",
        "her",
        "its",
        "this",
        "that",
        "these",
        "those",
        "some",
        "any",
        "every",
        "each",
        "all",
        "no",
    ]
)
NOT_OBJECTS = frozenset(
    [
        "step",
        "steps",
        "thing",
        "things",
        "stuff",
        "way",
        "time",
        "times",
        "first",
        "always",
        "never",
        "please",
        "also",
        "just",
        "only",
        "really",
        "very",
        "not",
        "don't",
        "do",
        "does",
        "be",
        "it",
        "them",
        "me",
        "you",
        "us",
        "and",
        "or",
        "but",
        "one",
        "ones",
        "lot",
        "lots",
        "bit",
        "more",
        "less",
        "most",
        "least",
        "again",
        "every",
        "any",
        "each",
        "other",
        "same",
        "new",
        "old",
        "now",
        "too",
        "so",
        "as",
        "sure",
        "well",
        "still",
        "even",
        "ever",
    ]
)
QUANTITIES = frozenset(
    [
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "several",
        "many",
        "few",
    ]
)
# A product with a version: "Postgres 15.2", "Python v3", or "on/to/running Postgres 15".
VERSION = re.compile(
    r"\b(?:(?:on|to|run|runs|running|use|uses|using|version of)\s+([A-Z][\w+#-]*)\s+v?\d+(?:\.\d+)*"
    r"|([A-Z][\w+#-]*)\s+v?\d+\.\d+(?:\.\d+)*|([A-Z][\w+#-]*)\s+v\d+)\b"
)
FIRST_PERSON = re.compile(r"^(?:i|we)(?:['’](m|re|ve|d|ll))?\s+", re.IGNORECASE)
CONTRACTED = {"m": "am", "re": "are", "ve": "have", "d": "would", "ll": "will"}
COPULAS = frozenset(["am", "are", "is", "was", "were", "be", "been", "being"])
ADVERBS = frozenset(
    [
        "do",
        "does",
        "did",
        "will",
        "would",
        "can",
        "could",
        "should",
        "still",
        "really",
        "also",
        "just",
        "now",
        "currently",
        "usually",
        "always",
        "never",
        "recently",
        "finally",
        "actually",
        "mostly",
        "often",
    ]
)
# Verbs that carry a wish, a past habit or an aspect rather than a state: what follows
# them is not one attribute ("I want to travel", "I used to dance").
NOT_STATE_VERBS = frozenset(
    [
        "want",
        "wanted",
        "need",
        "needed",
        "used",
        "had",
        "have",
        "has",
        "love",
        "like",
        "hope",
        "plan",
        "try",
        "tried",
        "going",
        "gonna",
        "would",
        "could",
        "can",
        "can't",
        "couldn't",
        "wish",
        "think",
        "feel",
        "guess",
        "mean",
        "know",
        "agree",
        "appreciate",
        "get",
        "got",
        "go",
        "went",
        "let",
        "keep",
        "started",
        "start",
        "began",
        "decided",
        "managed",
        "learned",
        "learnt",
        "finally",
    ]
)
MAX_OBJECTS = 3


def singular(word: str) -> str:
    """A rough singular: "migrations" -> "migration", "boxes" -> "box"; "glass" stays."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _clause(text: str) -> str:
    """The first clause of ``text``, without leading qualifiers and trailing time words."""
    text = CLAUSE_BREAK.split(text.strip().split("\n")[0])[0]
    text = MODAL_LEAD.sub("", text.strip())
    previous = None
    while previous != text:
        previous, text = text, TRAILING.sub("", text)
    return text.strip(" .!")


def _frame(tokens: list[str]) -> str | None:
    """verb + sorted objects (+ value preposition) from the words after the subject.

    Names (capitalised words past the first) are values, not what a statement is
    about: "I drive a Tesla" and "I drive a Volvo now" share ``drive``.
    """
    kept = [token for i, token in enumerate(tokens) if i == 0 or not token[:1].isupper()]
    named = len(kept) < len(tokens)
    words = [token.lower() for token in kept]
    while words and words[0] in ADVERBS:
        words = words[1:]
    if not words or words[0] in COPULAS:
        return None  # "I am X": what X is an attribute of is not in the words
    verb = words[0]
    if verb in DETERMINERS or verb in NOT_OBJECTS or verb.isdigit():
        return None
    objects: list[str] = []
    preposition = ""
    counted = False
    for word in words[1:]:
        if word in VALUE_PREPOSITIONS:
            preposition = word
            break
        if word in ORDER_WORDS:
            continue  # "before", "after": both sides are what the rule is about
        if word.isdigit() or word in QUANTITIES:
            counted = True
            continue
        if word in DETERMINERS or word in NOT_OBJECTS or len(word) < 3 or word.endswith("ly"):
            continue
        objects.append(singular(word))
    if preposition == "to":
        return None  # "forget to ...", "happy to ...": an infinitive, not a setting
    objects = sorted(dict.fromkeys(objects))[:MAX_OBJECTS]
    if preposition or objects:
        return "_".join([verb, *objects, *([preposition] if preposition else [])])
    return verb if counted or named else None


def _fact_frame(tokens: list[str]) -> str | None:
    """A first-person fact's key: a present-tense verb with its value's preposition, a
    counted object ("have two cats"), or a named value ("drive a Tesla")."""
    words = [token.lower() for token in tokens]
    while words and words[0] in ADVERBS:
        words, tokens = words[1:], tokens[1:]
    if not words:
        return None
    verb = words[0]
    if verb == "have" and len(words) > 1 and (words[1].isdigit() or words[1] in QUANTITIES):
        return _frame(tokens)  # "have two cats": the count is the value
    if verb in NOT_STATE_VERBS or verb in COPULAS or verb.endswith(("ed", "ing", "n't")):
        return None
    frame = _frame(tokens)
    if frame is None or frame.count("_") > 2:
        return None
    named = any(token[:1].isupper() for token in tokens[1:])
    return (
        frame if frame.rsplit("_", 1)[-1] in VALUE_PREPOSITIONS or frame == verb or named else None
    )


def general_topic_key(sentence: str, memory_type: str, *, subject: str = "user") -> str | None:
    """A ``subject.attribute`` key from the sentence's predicate, or None when it has none."""
    if memory_type not in ("fact", "instruction"):
        return None
    version = VERSION.search(sentence)
    if version:
        product = next(group for group in version.groups() if group)
        return f"{subject}.{_slug(product)}_version"
    clause = _clause(sentence)
    if memory_type == "instruction":
        frame = _frame(WORD.findall(clause))
        return f"{subject}.{frame}" if frame else None
    match = FIRST_PERSON.match(clause)
    if match is None:
        return None
    tokens = WORD.findall(clause[match.end() :])
    if match.group(1):
        tokens.insert(0, CONTRACTED[match.group(1).lower()])
    frame = _fact_frame(tokens)
    return f"{subject}.{frame}" if frame else None
