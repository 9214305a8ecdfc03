"""Classification: type, importance, confidence, topic key and search questions per memory.

Whatever a model proposed is normalised and checked here; what it left out is
filled in by the rules, so every memory leaves this stage complete: one of the
four types, scores in [0, 1], a ``subject.attribute`` key for facts and
instructions where one applies, an ISO date for events, and 3–5 questions.
"""

from raymem.models import rules
from raymem.models.generator import MEMORY_TYPES, Extracted
from raymem.models.rules import Candidate

MIN_QUESTIONS, MAX_QUESTIONS = 3, 5


def _clamp(value: float | None, default: float) -> float:
    return default if value is None else max(0.0, min(1.0, float(value)))


def _subject(content: str) -> tuple[str, str]:
    """Key segment and question wording of whom a memory is about."""
    speaker, _ = rules.split_speaker(content)
    return rules.subject_key(speaker), speaker or "the user"


def classify_item(
    item: Extracted,
    *,
    source_message_ids: list[str],
    source_spans: list[tuple[int, int]],
    message_date: str | None,
) -> Candidate:
    """A complete candidate memory from a verified item.

    Args:
        item: a verified item (its event_time already resolved).
        source_message_ids: the messages it came from.
        source_spans: (first, last) sentence index within each of those messages.
        message_date: the date of its first source message, for events without a date phrase.
    """
    _, text = rules.split_speaker(item.content)
    ruled_type, ruled_importance = rules.classify(text)
    memory_type = item.type if item.type in MEMORY_TYPES else ruled_type
    key_subject, named = _subject(item.content)
    topic_key = None
    if memory_type in ("fact", "instruction"):
        topic_key = rules.normalise_topic_key(item.topic_key, subject=key_subject)
        topic_key = topic_key or rules.topic_key_for(text, memory_type, subject=key_subject)
    event_time = None
    if memory_type == "event":
        # An event with no date phrase is dated by the turn that reports it.
        event_time = (item.event_time or message_date or "")[:10] or None
    questions = [q.strip() for q in item.questions if q.strip().endswith("?")]
    questions = list(dict.fromkeys(questions))[:MAX_QUESTIONS]
    if len(questions) < MIN_QUESTIONS:
        templated = rules.search_questions(text, memory_type, topic_key, subject=named)
        questions = list(dict.fromkeys([*questions, *templated]))[:MAX_QUESTIONS]
    return Candidate(
        type=memory_type,
        content=item.content.strip(),
        topic_key=topic_key,
        event_time=event_time,
        importance=_clamp(item.importance, ruled_importance),
        confidence=_clamp(item.confidence, 0.8),
        source_message_ids=source_message_ids,
        source_spans=source_spans,
        search_queries=questions,
    )
