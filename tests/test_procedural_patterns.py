"""Pass 2 on real SQLite files: each threshold and lifecycle rule, with an injected clock."""

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

import msgspec
import pytest
from procedural_helpers import CREATE, FAIL, UPDATE, at, enabled_store, run_session

from raymem.errors import PatternNotFound
from raymem.pipelines.procedural import capture, patterns
from raymem.store import ProfileStore
from raymem.store.procedural import patterns as stored
from raymem.types_procedural import AnnotateRequest, Pattern

DIM = 8
Steps = Sequence[tuple[str, str, str | None]]


@pytest.fixture
async def store(tmp_path: Path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=DIM)
    await enabled_store(store)
    yield store
    await store.close()


class Sessions:
    """Numbered sessions of actions on a clock of their own."""

    def __init__(self, store: ProfileStore) -> None:
        self.store, self.count = store, 0

    async def run(
        self, steps: Steps, *, times: int, start: datetime, target: str = "n1"
    ) -> datetime:
        """Run ``times`` sessions of ``steps`` a minute apart from ``start``; returns the time after."""
        for index in range(times):
            self.count += 1
            await run_session(
                self.store,
                f"s{self.count}",
                steps,
                start=start + timedelta(minutes=index),
                target=target,
            )
        return start + timedelta(minutes=times)


async def current(store: ProfileStore) -> list[Pattern]:
    return await stored.current_patterns(store.reader)


async def test_promotion_needs_five_sequences(store: ProfileStore) -> None:
    sessions = Sessions(store)
    after = await sessions.run([FAIL], times=4, start=at(0))
    changes = await patterns.evaluate_patterns(store, after)
    assert changes.promoted == 0 and await current(store) == []
    after = await sessions.run([FAIL], times=1, start=after)
    changes = await patterns.evaluate_patterns(store, after)
    assert changes.promoted == 1
    [pattern] = await current(store)
    key = (pattern.action_type, pattern.target_type, pattern.error_code, pattern.outcome)
    assert key == ("update_node", "node", "NodeNotFoundError", "failure")
    assert (pattern.samples, pattern.hits, pattern.confidence) == (5, 5, 1.0)
    assert pattern.target_ids == ["n1"]


async def test_promotion_needs_sixty_percent_of_them(store: ProfileStore) -> None:
    sessions = Sessions(store)
    after = await sessions.run([FAIL], times=2, start=at(0))
    after = await sessions.run([UPDATE], times=2, start=after)
    await sessions.run([FAIL], times=1, start=after)  # 3 of 5: 60%
    assert (await patterns.evaluate_patterns(store, at(60))).promoted == 1
    [pattern] = await current(store)
    assert (pattern.samples, pattern.hits, pattern.confidence) == (5, 3, 0.6)


async def test_below_sixty_percent_nothing_is_promoted(store: ProfileStore) -> None:
    sessions = Sessions(store)
    after = await sessions.run([FAIL], times=3, start=at(0))
    await sessions.run([UPDATE], times=3, start=after)  # 50%
    assert (await patterns.evaluate_patterns(store, at(60))).promoted == 0


async def test_the_recommendation_names_a_precondition(store: ProfileStore) -> None:
    sessions = Sessions(store)
    after = await sessions.run([FAIL, CREATE, UPDATE], times=3, start=at(0))
    after = await sessions.run([FAIL], times=2, start=after)
    await patterns.evaluate_patterns(store, after)
    [pattern] = await current(store)
    assert pattern.precondition == "create_node"
    assert pattern.recommendation == (
        "update_node on node targets failed with NodeNotFoundError in 100% of 5 sequences;"
        " it succeeded in 100% of attempts after create_node on the same target:"
        " run create_node first."
    )


async def test_without_a_precondition_the_recommendation_says_to_check(store: ProfileStore) -> None:
    await Sessions(store).run([FAIL], times=5, start=at(0))
    await patterns.evaluate_patterns(store, at(10))
    [pattern] = await current(store)
    assert pattern.precondition is None
    assert pattern.recommendation.endswith("check the node target before running update_node.")


async def test_new_evidence_reinforces_in_place(store: ProfileStore) -> None:
    sessions = Sessions(store)
    after = await sessions.run([FAIL], times=5, start=at(0))
    await patterns.evaluate_patterns(store, after)
    [promoted] = await current(store)

    # Nothing new: evaluating again changes nothing.
    assert (
        await patterns.evaluate_patterns(store, after + timedelta(minutes=1))
        == patterns.PatternChanges()
    )

    later = at(0, days=3)
    after = await sessions.run([FAIL], times=4, start=later)
    after = await sessions.run([UPDATE], times=1, start=after)  # 9 of 10: 0.9, moved 10 points
    changes = await patterns.evaluate_patterns(store, after)
    assert (changes.reinforced, changes.superseded) == (1, 0)
    [reinforced] = await current(store)
    assert reinforced.id == promoted.id
    assert (reinforced.samples, reinforced.hits, reinforced.confidence) == (10, 9, 0.9)
    assert reinforced.reinforced_at > promoted.reinforced_at
    assert reinforced.first_seen == promoted.first_seen


async def test_a_move_of_fifteen_points_supersedes_and_keeps_the_chain(store: ProfileStore) -> None:
    sessions = Sessions(store)
    after = await sessions.run([FAIL], times=5, start=at(0))
    await patterns.evaluate_patterns(store, after)
    [first] = await current(store)
    await patterns.annotate(
        store, first.id, AnnotateRequest(annotation="create it first"), now=after
    )

    after = await sessions.run([UPDATE], times=2, start=at(0, days=1))  # 5 of 7: 0.714, -28.6
    changes = await patterns.evaluate_patterns(store, after)
    assert (changes.superseded, changes.reinforced) == (1, 0)
    [second] = await current(store)
    assert second.id != first.id and round(second.confidence, 3) == 0.714
    assert second.annotation == "create it first"  # operator decisions follow the chain
    assert second.first_seen == first.first_seen
    old = await stored.get_pattern(store.reader, first.id)
    assert old is not None and old.superseded_by == second.id and old.confidence == 1.0
    chain = await stored.history(store.reader, first.id)
    assert [p.id for p in chain] == [first.id, second.id]
    assert [p.id for p in await stored.history(store.reader, second.id)] == [first.id, second.id]


async def test_a_move_just_under_fifteen_points_reinforces(store: ProfileStore) -> None:
    sessions = Sessions(store)
    after = await sessions.run([FAIL], times=6, start=at(0))
    await patterns.evaluate_patterns(store, after)
    await sessions.run([UPDATE], times=1, start=at(0, days=1))  # 6 of 7: 0.857, -14.3
    changes = await patterns.evaluate_patterns(store, at(0, days=2))
    assert (changes.reinforced, changes.superseded) == (1, 0)


async def test_decay_starts_after_thirty_days_without_reinforcement(store: ProfileStore) -> None:
    await Sessions(store).run([FAIL], times=5, start=at(0))
    await patterns.evaluate_patterns(store, at(10))
    [pattern] = await current(store)
    reinforced = pattern.reinforced_at

    assert (
        await patterns.evaluate_patterns(store, reinforced + timedelta(days=29, hours=23))
    ).decayed == 0
    assert (await current(store))[0].confidence == 1.0
    assert (await patterns.evaluate_patterns(store, reinforced + timedelta(days=30))).decayed == 1
    assert (await current(store))[0].confidence == pytest.approx(0.9)
    # Evaluating again in the same week decays nothing more.
    assert (await patterns.evaluate_patterns(store, reinforced + timedelta(days=36))).decayed == 0
    await patterns.evaluate_patterns(store, reinforced + timedelta(days=44))  # weeks 2 and 3
    decayed = (await current(store))[0]
    assert decayed.confidence == pytest.approx(0.9**3) and decayed.decay_steps == 3
    assert decayed.id == pattern.id  # decay is in place


async def test_reinforcement_restarts_the_decay_clock(store: ProfileStore) -> None:
    sessions = Sessions(store)
    await sessions.run([FAIL], times=5, start=at(0))
    await patterns.evaluate_patterns(store, at(10))
    await patterns.evaluate_patterns(store, at(0, days=31))
    assert (await current(store))[0].confidence == pytest.approx(0.9)
    # It goes wrong again, but the window holds too few sequences to measure it anew.
    await sessions.run([FAIL], times=1, start=at(0, days=32))
    changes = await patterns.evaluate_patterns(store, at(0, days=33))
    assert changes.reinforced == 1
    [pattern] = await current(store)
    assert pattern.confidence == pytest.approx(0.9) and pattern.decay_steps == 0
    assert pattern.reinforced_at == at(0, days=32)
    assert (await patterns.evaluate_patterns(store, at(0, days=61.9))).decayed == 0
    assert (await patterns.evaluate_patterns(store, at(0, days=62))).decayed == 1


async def test_below_point_two_a_pattern_is_soft_deleted(store: ProfileStore) -> None:
    sessions = Sessions(store)
    after = await sessions.run([FAIL], times=3, start=at(0))
    await sessions.run([UPDATE], times=2, start=after)
    await patterns.evaluate_patterns(store, at(10))
    [pattern] = await current(store)
    assert pattern.confidence == 0.6
    # 0.6 * 0.9^10 = 0.209 at 100 days less a week; 0.6 * 0.9^11 = 0.188 at 100 days.
    assert (
        await patterns.evaluate_patterns(store, pattern.reinforced_at + timedelta(days=93))
    ).deleted == 0
    changes = await patterns.evaluate_patterns(store, pattern.reinforced_at + timedelta(days=100))
    assert changes.deleted == 1 and await current(store) == []
    kept = await stored.get_pattern(store.reader, pattern.id)
    assert kept is not None and kept.deleted_at is not None  # kept for audit
    listed = await stored.list_patterns(store.reader, include_inactive=True)
    assert [p.id for p in listed] == [pattern.id]


async def test_an_annotated_pattern_is_not_deleted(store: ProfileStore) -> None:
    sessions = Sessions(store)
    after = await sessions.run([FAIL], times=3, start=at(0))
    await sessions.run([UPDATE], times=2, start=after)
    await patterns.evaluate_patterns(store, at(10))
    [pattern] = await current(store)
    await patterns.annotate(
        store, pattern.id, AnnotateRequest(annotation="always check"), now=at(11)
    )
    await patterns.evaluate_patterns(store, pattern.reinforced_at + timedelta(days=200))
    [kept] = await current(store)
    assert kept.confidence < patterns.DELETE_BELOW and kept.deleted_at is None


async def test_operators_annotate_and_suppress(store: ProfileStore) -> None:
    await Sessions(store).run([FAIL], times=5, start=at(0))
    await patterns.evaluate_patterns(store, at(10))
    [pattern] = await current(store)
    seq = await store.reads.ledger_seq()

    noted = await patterns.annotate(
        store, pattern.id, AnnotateRequest(annotation=" check it "), now=at(11)
    )
    assert (noted.annotation, noted.suppressed, noted.updated_at) == ("check it", False, at(11))
    hidden = await patterns.annotate(
        store, pattern.id, AnnotateRequest(suppressed=True), now=at(12)
    )
    assert (hidden.annotation, hidden.suppressed) == ("check it", True)
    cleared = await patterns.annotate(
        store, pattern.id, AnnotateRequest(annotation=None), now=at(13)
    )
    assert (cleared.annotation, cleared.suppressed) == (None, True)
    unchanged = await patterns.annotate(store, pattern.id, AnnotateRequest(), now=at(14))
    assert unchanged == cleared
    ops = [entry[2] for entry in await store.reads.ledger_entries(seq)]
    assert ops == ["pattern_annotate"] * 3
    listed = await stored.list_patterns(store.reader)
    assert [(p.id, p.suppressed) for p in listed] == [(pattern.id, True)]  # listed, marked

    with pytest.raises(PatternNotFound, match="Pattern 'nope' does not exist"):
        await patterns.annotate(store, "nope", AnnotateRequest(suppressed=True), now=at(15))


async def test_patterns_are_listed_by_confidence_and_filtered(store: ProfileStore) -> None:
    sessions = Sessions(store)
    after = await sessions.run([FAIL], times=5, start=at(0))
    other = ("delete_node", "dead_end", None)
    after = await sessions.run([other], times=3, start=after)
    await sessions.run([("delete_node", "success", None)], times=2, start=after)
    await patterns.evaluate_patterns(store, at(60))
    listed = await stored.list_patterns(store.reader)
    assert [(p.action_type, p.confidence) for p in listed] == [
        ("update_node", 1.0),
        ("delete_node", 0.6),
    ]
    assert listed[1].outcome == "dead_end" and listed[1].error_code is None
    assert "ended in a dead end in 60% of 5 sequences" in listed[1].recommendation
    assert [
        p.action_type for p in await stored.list_patterns(store.reader, outcome="dead_end")
    ] == ["delete_node"]
    assert await stored.list_patterns(store.reader, action_type="search") == []
    assert await stored.list_patterns(store.reader, since=at(0, days=1)) == []


async def test_pattern_writes_replay_onto_another_copy(store: ProfileStore, tmp_path: Path) -> None:
    from raymem.store.replay import replay

    sessions = Sessions(store)
    after = await sessions.run([FAIL], times=5, start=at(0))
    await patterns.evaluate_patterns(store, after)
    await sessions.run([UPDATE], times=3, start=at(0, days=1))
    await patterns.evaluate_patterns(store, at(0, days=2))
    [pattern] = await current(store)
    await patterns.annotate(store, pattern.id, AnnotateRequest(suppressed=True), now=at(0, days=2))
    copy = await ProfileStore.open(tmp_path / "copy" / "profile.db", dim=DIM)
    try:
        async with copy.write() as writer:
            for seq, when, op, payload in await store.reads.ledger_entries(0):
                await replay(writer, seq, when, op, payload)
        every = await stored.list_patterns(store.reader, include_inactive=True)
        assert await stored.list_patterns(copy.reader, include_inactive=True) == every
        assert len(every) == 2
        assert (await capture.state(copy)).counts == (await capture.state(store)).counts
    finally:
        await copy.close()


def test_decay_steps_follow_the_weeks() -> None:
    start = at(0)
    due = [
        patterns.decay_steps_due(start, start + timedelta(days=d)) for d in (0, 29, 30, 36, 37, 44)
    ]
    assert due == [0, 0, 1, 1, 2, 3]


def test_a_precondition_must_lift_the_success_rate() -> None:
    evidence = patterns.Evidence(samples=5, attempts=10, successes=5, after={"create_node": [5, 5]})
    assert patterns.precondition(evidence) == ("create_node", 1.0)
    weak = msgspec.structs.replace(evidence, after={"create_node": [5, 3]})  # 60% vs 40%
    assert patterns.precondition(weak) is None
    rare = msgspec.structs.replace(evidence, after={"create_node": [2, 2]})  # too few attempts
    assert patterns.precondition(rare) is None
