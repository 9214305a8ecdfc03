"""The rules behind the embedded ``rules`` generator and classification. No model, no I/O.

Which sentences are worth remembering, which of the four memory types a
sentence is by its wording, the topic key of a preference or a personal
attribute, the concrete values a statement asserts, and search questions written
from templates filled with the sentence's own names and keywords. A fresh
install extracts with these alone; with a model they fill in what it left out.
"""

import re

from raymem.pipelines.language import STATEMENT_STOPWORDS, WORD, content_words, split_speaker
from raymem.pipelines.topic_keys import general_topic_key
from raymem.types import MemoryType

# Fewer words than this: a fragment or a greeting ("Sounds good.", "Thanks a lot!").
MIN_WORDS = 3
# Fewer content words than this: small talk ("That's so great!" has one).
MIN_CONTENT_WORDS = 2
# Importance by what the patterns found: an instruction steers every later answer,
# a personal attribute (where someone lives or works) stays true for long, a task
# matters until it is done; other facts and events start mid-scale.
INSTRUCTION_IMPORTANCE = 0.8
ATTRIBUTE_IMPORTANCE = 0.7
TASK_IMPORTANCE = 0.6
DEFAULT_IMPORTANCE = 0.5
# Search questions per memory (the design's 3-5), and the keywords one quotes.
MIN_QUESTIONS, MAX_QUESTIONS = 3, 5
KEYWORDS_PER_QUESTION = 4
# A topic key is subject.attribute, with at most one more level ("user.pet.name").
MAX_KEY_PARTS = 3

GREETINGS = {
    "hi",
    "hello",
    "hey",
    "thanks",
    "thank you",
    "ok",
    "okay",
    "sure",
    "great",
    "cool",
    "yes",
    "no",
    "bye",
    "goodbye",
    "nice",
    "wow",
    "awesome",
    "got it",
    "sounds good",
}
INSTRUCTION_START = re.compile(
    r"^(please\s+)?(always|never|don'?t|do not|use|avoid|prefer|make sure|remember to|"
    r"stop|keep|switch|set|default to|only|call me|write|format|respond|reply|answer)\b",
    re.IGNORECASE,
)
INSTRUCTION_ANYWHERE = re.compile(
    r"\b(i prefer|i'd prefer|i would prefer|i want you to|you should always|by default|"
    r"from now on|going forward|instead of)\b",
    re.IGNORECASE,
)
TASK_PATTERN = re.compile(
    r"\b(todo|to-do|remind me|need to|needs to|have to|has to|must|should|i'll|i will|"
    r"we'll|we will|going to|plan to|planning to|deadline|due (by|on)|by (monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday|tomorrow|next week))\b",
    re.IGNORECASE,
)
EVENT_PATTERN = re.compile(
    r"\b(yesterday|today|tonight|last (night|week|month|year|weekend|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday)|ago|this morning|earlier|recently|"
    r"on (monday|tuesday|wednesday|thursday|friday|saturday|sunday)|in (19|20)\d\d|"
    r"(january|february|march|april|may|june|july|august|september|october|november|"
    r"december)( \d{1,2})?,? (19|20)?\d\d|deployed|launched|released|shipped|went|visited|"
    r"moved|started|finished|met|bought|attended|joined|graduated|married|born)\b",
    re.IGNORECASE,
)

# Categories of things people state preferences about, for stable topic keys:
# "use pnpm, not npm" and "switch back to npm" both concern user.package_manager.
CATEGORY_LEXICON = {
    "package_manager": {"npm", "pnpm", "yarn", "bun", "pip", "poetry", "uv", "conda", "cargo"},
    "ui_theme": {"dark mode", "light mode", "dark theme", "light theme"},
    "editor": {"vim", "neovim", "emacs", "vscode", "vs code", "cursor", "intellij", "pycharm"},
    "language": {"python", "typescript", "javascript", "rust", "go", "golang", "java", "kotlin"},
    "indentation": {"tabs", "spaces"},
    "test_runner": {"pytest", "unittest", "jest", "vitest", "mocha"},
    "formatter": {"black", "ruff", "prettier", "gofmt", "rustfmt"},
    "shell": {"bash", "zsh", "fish", "powershell"},
    "os": {"linux", "macos", "windows", "ubuntu", "debian", "arch"},
}
# One alternation per category, compiled once: classification runs per sentence.
_CATEGORY_PATTERNS = {
    category: re.compile(
        r"(?<![\w-])(" + "|".join(re.escape(name) for name in sorted(names)) + r")(?![\w-])"
    )
    for category, names in CATEGORY_LEXICON.items()
}
PERSONAL_ATTRIBUTES = [
    (
        re.compile(
            r"\b(i live in|i'm based in|i am based in|i moved to|moved to|lives in|"
            r"relocated to)\b",
            re.I,
        ),
        "user.location",
    ),
    (re.compile(r"\b(i work (at|for)|my employer is|works (at|for))\b", re.I), "user.employer"),
    (re.compile(r"\b(my name is|call me)\b", re.I), "user.name"),
    (re.compile(r"\b(my birthday is|i was born on)\b", re.I), "user.birthday"),
    (re.compile(r"\b(i'm allergic to|i am allergic to)\b", re.I), "user.allergies"),
    (re.compile(r"\b(my (time ?zone|timezone) is)\b", re.I), "user.timezone"),
]
# "My phone number is 555-0100", "my daughter's name is Lila", "my favourite band is ...":
# an attribute of the speaker and its value. Only a favourite, or a value that is a
# concrete thing (a number, a name, a title), makes it an attribute that holds one value:
# "my family is my motivation" is not one.
MY_ATTRIBUTE = re.compile(
    r"\bmy ((?:[a-z]+ ){0,2}?[a-z]+(?:['’]s [a-z]+)?) (?:is|are)\b(.*)", re.IGNORECASE
)
ATTRIBUTE_QUALIFIERS = {"new", "current", "old", "latest", "present", "actual", "real"}
# Names in the lexicon that are also everyday words ("let's go", "a black cat"): in a
# fact they count only when written as a name, or in an instruction.
AMBIGUOUS_NAMES = {
    "go",
    "rust",
    "java",
    "black",
    "arch",
    "fish",
    "cursor",
    "bun",
    "uv",
    "tabs",
    "spaces",
    "windows",
}
# A fact names a tool as one the speaker uses or prefers, not in passing.
USAGE = re.compile(
    r"\b(use[sd]?|using|prefer(?:s|red)?|switch(?:ed|ing)?|moved to|love|like|write|writing|"
    r"code|coding|program(?:ming)?|run(?:s|ning)?|install(?:ed)?|develop(?:ing)?|work(?:s|ing)? "
    r"(?:in|with)|on)\b",
    re.IGNORECASE,
)


# A sentence about someone in the third person: "User lives in ...", "Mia plays ...".
THIRD_PERSON_SUBJECT = re.compile(
    r"^(?:the )?(user|[A-Z][a-z]+)(?:'s)? (?:\w+s|is|was|has|had|moved|lives|works|loves)\b"
)
# Concrete values: the targets of the detail pass and of verification.
VALUE_PATTERNS = [
    re.compile(r"[$€£¥]\s?\d[\d,.]*(?:\s?(?:k|m|bn|million|billion))?", re.I),  # prices
    re.compile(r"\b\d[\d,.]*\s?(?:%|percent|euros?|dollars?|usd|eur|gbp|pounds?|yen)\b", re.I),
    re.compile(r"\bv?\d+\.\d+(?:\.\d+)*(?:[-+][\w.]+)?\b"),  # versions and decimals
    re.compile(
        r"\b\d+(?:[:/-]\d+)*\s?(?:am|pm|kg|g|km|m|cm|mm|mi|miles?|lbs?|gb|mb|tb|"
        r"hours?|hrs?|minutes?|mins?|days?|weeks?|months?|years?|people|times)?\b",
        re.I,
    ),
    re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.]+\b"),  # e-mail addresses
    re.compile(r"\bhttps?://\S+"),
    re.compile(r"[\"“][^\"”]{2,60}[\"”]"),  # quoted names and titles
]
NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-zA-Z0-9'’&-]+(?: [A-Z][a-zA-Z0-9'’&-]+)*)")


def concrete_values(text: str) -> list[str]:
    """Names, prices, versions, quantities, dates and quoted titles mentioned in ``text``."""
    values: list[str] = []
    for pattern in VALUE_PATTERNS:
        values.extend(m.group(0).strip() for m in pattern.finditer(text) if m.group(0).strip())
    values.extend(
        m.group(1) for m in NAME.finditer(text) if m.group(1).lower() not in STATEMENT_STOPWORDS
    )
    kept: list[str] = []
    for value in dict.fromkeys(v for v in values if any(c.isalnum() for c in v)):
        if not any(value in longer for longer in kept):  # "1" inside "$1,200"
            kept.append(value)
    return kept


def is_informative(sentence: str) -> bool:
    """Worth remembering: not a question, a greeting, small talk or a fragment."""
    words = WORD.findall(sentence)
    if len(words) < MIN_WORDS or sentence.rstrip().endswith("?"):
        return False
    if " ".join(w.lower() for w in words) in GREETINGS:
        return False
    return len(content_words(sentence)) >= MIN_CONTENT_WORDS


def _category_of(sentence: str, memory_type: str = "instruction") -> str | None:
    """The preference category a sentence names a tool of, if it states a use or preference."""
    if memory_type != "instruction" and not USAGE.search(sentence):
        return None
    lowered = sentence.lower()
    for category, pattern in _CATEGORY_PATTERNS.items():
        for match in pattern.finditer(lowered):
            name = match.group(1)
            written = sentence[match.start(1) : match.end(1)]
            if name in AMBIGUOUS_NAMES and memory_type != "instruction" and written.islower():
                continue
            return category
    return None


def _my_attribute(sentence: str) -> str | None:
    """The attribute of "my <attribute> is <value>", when the value is a concrete thing."""
    match = MY_ATTRIBUTE.search(sentence)
    if match is None:
        return None
    words = [w for w in match.group(1).lower().split() if w not in ATTRIBUTE_QUALIFIERS]
    if not words:
        return None
    if not words[0].startswith(("favourite", "favorite")) and not concrete_values(match.group(2)):
        return None
    return _slug(" ".join(words))


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def subject_key(name: str | None) -> str:
    """A person's name as a topic-key segment ("Mary Ann" -> "mary_ann"); None is the user."""
    return (_slug(name) or "user") if name else "user"


def subject_of(sentence: str, default: str = "user") -> str:
    """Whom a sentence is about, as a key segment: ``default`` for first-person sentences.

    "User lives in Budapest" is about ``user``; "Mia plays the violin" about
    ``mia``; "I live in Paris" said by Caroline about ``caroline`` (the default).
    """
    match = THIRD_PERSON_SUBJECT.match(sentence.strip())
    if match is None:
        return default
    name = match.group(1)
    if name.lower() in STATEMENT_STOPWORDS or name.lower() in ("user", "we", "they"):
        return "user" if name.lower() == "user" else default
    return _slug(name) or default


def topic_key_for(sentence: str, memory_type: str, *, subject: str = "user") -> str | None:
    """A normalised subject.attribute key: a statement with the same key replaces this one.

    Personal attributes (where one lives, works, ...), the tool a preference is about
    (package manager, editor, ...) and "my X is <value>" come first; any other
    instruction or first-person fact is keyed by its subject and predicate
    (``topic_keys.general_topic_key``).

    Args:
        sentence: the memory's text.
        memory_type: only facts and instructions get keys.
        subject: who a first-person sentence is about (the speaker; ``user`` by default).
    """
    if memory_type not in ("fact", "instruction"):
        return None
    for pattern, key in PERSONAL_ATTRIBUTES:
        if pattern.search(sentence):
            return f"{subject_of(sentence, subject)}.{key.split('.', 1)[1]}"
    category = _category_of(sentence, memory_type)
    if category is not None:
        return f"{subject}.{category}"
    attribute = _my_attribute(sentence)
    if attribute:
        return f"{subject}.{attribute}"
    return general_topic_key(sentence, memory_type, subject=subject)


# A statement of the speaker's state ("I'm vegetarian", "we are on call"), not of what
# they are doing ("I'm painting ..."): what it says of them holds until a new one.
STATE = re.compile(r"^(?:i|we)(?:['’](?:m|re)| am| are)\s+(?!\w+ing\b)", re.IGNORECASE)
# Words that mark a statement as replacing an earlier one.
UPDATE_MARKER = re.compile(
    r"\b(?:now|anymore|any more|no longer|these days|nowadays|since then|from now on|switched)\b",
    re.IGNORECASE,
)


def updates_state(new: str, old: str) -> bool:
    """Whether ``new`` states, as an update, the same speaker's state that ``old`` stated.

    "I'm fully vegan now" updates "I'm vegetarian"; whether the two are about the
    same state is left to their similarity (``decide_by_rules``).
    """
    new_speaker, new_text = split_speaker(new)
    old_speaker, old_text = split_speaker(old)
    if new_speaker != old_speaker or new_text.rstrip().endswith("?"):
        return False
    return bool(
        UPDATE_MARKER.search(new_text)
        and STATE.match(new_text.strip())
        and STATE.match(old_text.strip())
    )


def normalise_topic_key(key: str | None, *, subject: str = "user") -> str | None:
    """``"User / Package Manager"`` -> ``"user.package_manager"``; a bare attribute gets ``subject``."""
    if not key:
        return None
    parts = [_slug(part) for part in re.split(r"[./:>]+", key)]
    parts = [part for part in parts if part]
    if not parts:
        return None
    if len(parts) == 1:
        parts.insert(0, subject)
    return ".".join(parts[:MAX_KEY_PARTS])


LEADING_FILLER = re.compile(
    r"^((actually|ok(ay)?|so|well|hmm+|oh|and|also|alright|right|now|hey|btw|by the way|"
    r"one more thing|on second thought)[,.!:]?\s+)+",
    re.IGNORECASE,
)


def classify_by_pattern(sentence: str) -> tuple[MemoryType, float] | None:
    """The memory type and importance the patterns give a sentence; None when none fires.

    Instructions and tasks are only ever given by patterns: an instruction is
    handed to agents as a rule and a task is kept out of vector search, so both
    need explicit wording ("always ...", "remind me to ...").
    """
    sentence = LEADING_FILLER.sub("", sentence.strip())  # "Actually, switch back to npm."
    if INSTRUCTION_START.search(sentence) or INSTRUCTION_ANYWHERE.search(sentence):
        return "instruction", INSTRUCTION_IMPORTANCE
    if TASK_PATTERN.search(sentence):
        return "task", TASK_IMPORTANCE
    if any(pattern.search(sentence) for pattern, _ in PERSONAL_ATTRIBUTES):
        return (
            "fact",
            ATTRIBUTE_IMPORTANCE,
        )  # a dated change of state ("moved to Vienna in May") is still a fact
    if EVENT_PATTERN.search(sentence):
        return "event", DEFAULT_IMPORTANCE
    return None


def classify(sentence: str) -> tuple[MemoryType, float]:
    """The memory type of a sentence and its importance: a fact where no pattern fires."""
    return classify_by_pattern(sentence) or ("fact", DEFAULT_IMPORTANCE)


def _keyword_phrase(sentence: str, limit: int = KEYWORDS_PER_QUESTION) -> str:
    words = [w for w in content_words(sentence) if not w.isdigit()]
    return " ".join(dict.fromkeys(words[:limit]))


def search_questions(
    sentence: str, memory_type: str, topic_key: str | None, *, subject: str = "the user"
) -> list[str]:
    """Three to five questions this memory answers; they widen full-text and vector matches.

    Templates are filled with the sentence's own names and keywords, so the
    questions of different memories differ (identical generic questions would
    pull every embedding towards the same point).

    Args:
        sentence: the memory's text.
        memory_type: fact, event, instruction or task.
        topic_key: its key, when it has one.
        subject: who it is about, as a person would name them in a question.
    """
    questions: list[str] = []
    if topic_key is not None:
        attribute = topic_key.split(".", 1)[-1].replace("_", " ").replace(".", " ")
        questions.append(f"What is {subject}'s {attribute}?")
        questions.append(f"Which {attribute} does {subject} prefer?")
    for name in [v for v in concrete_values(sentence) if v[:1].isupper()][:1]:
        questions.append(f"What about {name}?")
    phrase = _keyword_phrase(sentence) or "this"
    by_type = {
        "instruction": [
            f"How should I handle {phrase}?",
            f"What did {subject} ask about {phrase}?",
        ],
        "task": [f"What needs to be done about {phrase}?", f"When is {phrase} due?"],
        "event": [f"When did {phrase} happen?", f"What happened with {phrase}?"],
        "fact": [f"What do we know about {phrase}?", f"What is true of {phrase}?"],
    }
    questions.extend(by_type[memory_type])
    questions.append(f"What does {subject} say about {phrase}?")
    return list(dict.fromkeys(questions))[:MAX_QUESTIONS]
