"""The embedded rules: classification, topic keys, questions, values, and date resolution."""

from datetime import date

import pytest

from raymem.pipelines import rules, temporal
from raymem.pipelines.language import split_speaker

WEDNESDAY = date(2026, 4, 15)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We deployed v2.3 yesterday", "2026-04-14"),
        ("Last Friday we signed the lease", "2026-04-10"),
        ("The audit starts in two weeks", "2026-04-29"),
        ("We move offices next month", "2026-05-15"),
        ("Two days ago the build broke", "2026-04-13"),
        ("I saw her on Monday", "2026-04-13"),
        ("I moved to Vienna in May 2026", "2026-05-01"),
        ("It happened on 8 May, 2023", "2023-05-08"),
        ("Nothing dated here", None),
    ],
)
def test_relative_dates_resolve_from_the_message_date(text, expected):
    resolved = temporal.resolve_event_date(text, WEDNESDAY)
    assert (resolved.isoformat() if resolved else None) == expected


def test_a_bare_weekday_in_a_plan_points_forward():
    assert temporal.resolve_event_date("I will call on Monday", WEDNESDAY, future=True) == date(
        2026, 4, 20
    )
    assert temporal.add_months(date(2026, 1, 31), 1) == date(2026, 2, 28)


@pytest.mark.parametrize(
    ("text", "memory_type", "key"),
    [
        ("Use pnpm, not npm.", "instruction", "user.package_manager"),
        ("Actually, switch back to npm.", "instruction", "user.package_manager"),
        ("User lives in Budapest", "fact", "user.location"),
        ("My favourite colour is teal.", "fact", "user.favourite_colour"),
        ("Remind me to renew the passport.", "task", None),
        ("We deployed v2.3 yesterday.", "event", None),
    ],
)
def test_types_and_topic_keys(text, memory_type, key):
    found_type, importance = rules.classify(text)
    assert found_type == memory_type and 0 < importance <= 1
    assert rules.topic_key_for(text, found_type) == key


def test_a_named_speaker_owns_the_key_and_the_questions():
    speaker, text = split_speaker("Caroline: I moved to Denver last year.")
    assert (speaker, text) == ("Caroline", "I moved to Denver last year.")
    assert rules.topic_key_for(text, "fact", subject=rules.subject_key(speaker)) == (
        "caroline.location"
    )
    assert split_speaker("Note: the wiki moved.") == (None, "Note: the wiki moved.")
    questions = rules.search_questions(text, "fact", "caroline.location", subject="Caroline")
    assert 3 <= len(questions) <= 5 and questions[0] == "What is Caroline's location?"
    assert any("Denver" in q for q in questions)


def test_concrete_values_and_small_talk():
    values = rules.concrete_values("We paid $1,200 for v2.3 of the Acme licence in Berlin.")
    assert {"$1,200", "v2.3", "Acme", "Berlin"} <= set(values)
    assert not rules.is_informative("That's so great!")
    assert not rules.is_informative("Where did you park?")
    assert rules.is_informative("I park behind the old brewery.")


def test_topic_keys_normalise():
    assert rules.normalise_topic_key("User / Package Manager") == "user.package_manager"
    assert rules.normalise_topic_key("editor", subject="mia") == "mia.editor"
    assert rules.normalise_topic_key("  ") is None
