"""Verification: every extracted item must be supported by the transcript lines it cites.

An item passes when most of its content words, and every concrete value in it
(names, numbers, versions, prices, places), appear in its cited lines. An item
that cites the wrong lines is corrected to the lines that do support it; an
item that nothing in its chunk supports is dropped. Deterministic, no model:
the check that keeps a model's invention out of the store.
"""

import logging
import re
from datetime import date

from raymem.pipelines import rules, temporal
from raymem.pipelines.language import content_words, split_speaker
from raymem.pipelines.types import Chunk, Extracted, Line

log = logging.getLogger(__name__)

MIN_COVERAGE = 0.6  # share of an item's content words found in its source lines
# An item that cited the wrong lines is trusted less, however sure its generator was.
MISCITED_CONFIDENCE = 0.7
CALENDAR_WORDS = {*temporal.WEEKDAYS, *temporal.MONTH_NAMES, "user"}


def stem(word: str) -> str:
    """A crude stem, enough to match "deployed" with "deploy" and "kids" with "kid"."""
    word = word.lower().replace("’", "'").removesuffix("'s")
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _stems(text: str) -> set[str]:
    return {stem(word) for word in content_words(text)}


def _claims(item: Extracted, speakers: set[str]) -> tuple[set[str], list[str]]:
    """The content stems and the concrete values an item asserts, minus names of speakers."""
    _, text = split_speaker(item.content)
    words = _stems(text) - {stem(s) for s in speakers} - CALENDAR_WORDS
    dated = [(d.start, d.end) for d in temporal.find_dates(text, date(2000, 1, 1))]
    values = []
    for value in rules.concrete_values(text):
        at = text.find(value)
        if any(start <= at < end for start, end in dated):
            continue  # dates are checked against the lines by date resolution
        if value.lower() in CALENDAR_WORDS or value.lower() in speakers:
            continue
        values.append(value)
    return words, values


def supports(lines: list[Line], words: set[str], values: list[str]) -> float:
    """How well ``lines`` support an item: the share of its words found, 0 if a value is missing."""
    if not lines:
        return 0.0
    source = " ".join(line.text for line in lines)
    lowered = source.lower()
    for value in values:
        if value.lower() not in lowered:
            return 0.0
    if not words:
        return 1.0
    found = _stems(source) | {stem(w) for w in re.findall(r"[\w'’-]+", lowered)}
    return len(words & found) / len(words)


def _windows(chunk: Chunk) -> list[list[Line]]:
    """Candidate supports: each line, and each pair of consecutive lines."""
    lines = chunk.lines
    return [[line] for line in lines] + [lines[i : i + 2] for i in range(len(lines) - 1)]


def verify_item(item: Extracted, chunk: Chunk) -> Extracted | None:
    """The item, with its citations corrected if needed, or None when nothing supports it.

    Args:
        item: one generator item.
        chunk: the chunk it was extracted from.
    """
    by_index = {line.index: line for line in chunk.lines}
    cited = [by_index[i] for i in item.lines if i in by_index]
    _, text = split_speaker(item.content)
    if cited and any(line.text == text.strip() for line in cited):
        return item  # quoted verbatim (the rules generator): nothing to check
    speakers = {line.speaker.lower() for line in chunk.lines if line.speaker}
    words, values = _claims(item, speakers)
    if supports(cited, words, values) >= MIN_COVERAGE:
        return item
    best, best_score = None, MIN_COVERAGE
    for window in _windows(chunk):
        score = supports(window, words, values)
        if score > best_score or (best is not None and score == best_score and len(window) < 2):
            best, best_score = window, score
    if best is None:
        log.info("verification dropped %r: no line of chunk %d supports it", text, chunk.number)
        return None
    item.lines = [line.index for line in best]
    item.confidence = min(item.confidence or MISCITED_CONFIDENCE, MISCITED_CONFIDENCE)
    temporal.resolve_item_dates([item], chunk)  # dates follow the corrected lines
    return item


def verify_items(items: list[Extracted], chunk: Chunk) -> list[Extracted]:
    """The items that their chunk supports, citations corrected; the rest dropped."""
    kept = []
    for item in items:
        if not item.content.strip():
            continue
        checked = verify_item(item, chunk)
        if checked is not None:
            kept.append(checked)
    return kept
