"""The embedded ``rules`` generator: deterministic extraction, classification and synthesis.

It needs no model, so a fresh install works offline. It splits turns into
sentences, keeps the informative ones, classifies each into one of the four
memory types with pattern rules, derives a topic key for preferences and
personal attributes, and writes template search questions.
"""

import re
from collections.abc import Sequence

import msgspec

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])|\n+")
WORD = re.compile(r"[\w'’-]+", re.UNICODE)

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
PERSONAL_ATTRIBUTES = [
    (
        re.compile(
            r"\b(i live in|i'm based in|i am based in|i moved to|moved to|lives in|"
            r"relocated to)\b",
            re.I,
        ),
        "user.location",
    ),
    (re.compile(r"\b(i work (at|for)|my employer is|i joined|works at)\b", re.I), "user.employer"),
    (re.compile(r"\b(my name is|call me)\b", re.I), "user.name"),
    (re.compile(r"\b(my birthday is|i was born on)\b", re.I), "user.birthday"),
    (re.compile(r"\b(i'm allergic to|i am allergic to)\b", re.I), "user.allergies"),
    (re.compile(r"\b(my (time ?zone|timezone) is)\b", re.I), "user.timezone"),
]
MY_ATTRIBUTE = re.compile(r"\bmy (favou?rite [a-z]+|[a-z]+) (is|are)\b", re.I)


class Candidate(msgspec.Struct, kw_only=True):
    """A memory proposed by extraction, before reconciliation with the store."""

    type: str
    content: str
    topic_key: str | None = None
    event_time: str | None = None
    importance: float = 0.5
    confidence: float = 0.8
    source_message_ids: list[str] = []
    source_spans: list[tuple[int, int]] = []
    search_queries: list[str] = []


def split_sentences(text: str) -> list[str]:
    """Sentences of a turn, stripped; bullet markers removed."""
    parts = (part.strip(" \t-*•") for part in SENTENCE_END.split(text))
    return [part for part in parts if part]


def is_informative(sentence: str) -> bool:
    """Worth remembering: not a question, a greeting or a fragment of under three words."""
    words = WORD.findall(sentence)
    if len(words) < 3 or sentence.rstrip().endswith("?"):
        return False
    return " ".join(w.lower() for w in words) not in GREETINGS


def _category_of(sentence: str) -> str | None:
    lowered = sentence.lower()
    for category, names in CATEGORY_LEXICON.items():
        if any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", lowered) for name in names):
            return category
    return None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def topic_key_for(sentence: str, memory_type: str) -> str | None:
    """A normalised subject.attribute key for preferences and personal attributes."""
    if memory_type not in ("fact", "instruction"):
        return None
    for pattern, key in PERSONAL_ATTRIBUTES:
        if pattern.search(sentence):
            return key
    category = _category_of(sentence)
    if category is not None:
        return f"user.{category}"
    match = MY_ATTRIBUTE.search(sentence)
    if match:
        return f"user.{_slug(match.group(1))}"
    return None


def classify(sentence: str) -> tuple[str, float]:
    """The memory type of a sentence and its importance."""
    if INSTRUCTION_START.search(sentence) or INSTRUCTION_ANYWHERE.search(sentence):
        return "instruction", 0.8
    if TASK_PATTERN.search(sentence):
        return "task", 0.6
    if any(pattern.search(sentence) for pattern, _ in PERSONAL_ATTRIBUTES):
        return "fact", 0.7  # a dated change of state ("moved to Vienna in May") is still a fact
    if EVENT_PATTERN.search(sentence):
        return "event", 0.5
    return "fact", 0.5


def search_questions(sentence: str, memory_type: str, topic_key: str | None) -> list[str]:
    """Template questions this memory answers; they widen full-text and vector matches."""
    questions = []
    if topic_key is not None:
        attribute = topic_key.split(".", 1)[-1].replace("_", " ")
        questions.append(f"What is the user's preferred {attribute}?")
        questions.append(f"Which {attribute} does the user use?")
    templates = {
        "instruction": ["What did the user ask me to do?", "What are the user's preferences?"],
        "task": ["What does the user need to do?", "What tasks are open?"],
        "event": ["What happened?", "When did it happen?"],
        "fact": ["What do I know about the user?"],
    }
    questions.extend(templates[memory_type])
    return questions[:5]


def extract_from_turn(
    content: str, *, role: str, message_id: str, first_line: int = 0
) -> list[Candidate]:
    """Candidates from one turn; user turns fully, others only for instructions and tasks."""
    if role not in ("user", "assistant"):
        return []
    candidates = []
    line = first_line
    for sentence in split_sentences(content):
        if is_informative(sentence):
            memory_type, importance = classify(sentence)
            if role == "user" or memory_type in ("task",):
                key = topic_key_for(sentence, memory_type)
                candidates.append(
                    Candidate(
                        type=memory_type,
                        content=sentence,
                        topic_key=key,
                        importance=importance,
                        source_message_ids=[message_id],
                        source_spans=[(line, line)],
                        search_queries=search_questions(sentence, memory_type, key),
                    )
                )
        line += 1
    return candidates


def synthesize(
    query: str, ranked: Sequence[tuple[str, float]], *, max_sentences: int = 3, floor: float = 0.5
) -> str:
    """An extractive answer: distinct sentences of the best hits, in rank order.

    Only hits scoring at least ``floor`` times the best score contribute, so a
    clear winner is not diluted by weaker neighbours.
    """
    if not ranked:
        return ""
    best = ranked[0][1]
    picked: list[str] = []
    for content, score in ranked:
        if score < best * floor:
            break
        for sentence in split_sentences(content):
            if sentence not in picked:
                picked.append(sentence)
            if len(picked) == max_sentences:
                return " ".join(picked)
    return " ".join(picked)
