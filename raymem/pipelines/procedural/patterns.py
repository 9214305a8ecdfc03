"""Pass 2: patterns of what goes wrong, with their lifecycle; and operator control.

A pattern is keyed by (action type, target type, error code) and measured over the
sequences that ended in the evidence window (30 days by default): its samples are
the sequences that did the action on that target type, its hits those in which it
went wrong with that error code (no code: went wrong without one), and its
confidence is hits / samples. A sequence in which the agent was shown the pattern
and avoided its failure is not counted: it shows the warning was heeded, not that
the failure stopped happening. The rules, each tested with an injected clock:

- promoted when at least 5 sequences did the action and at least 60% of them went
  wrong this way;
- with new evidence (a sequence closed since it was last measured, and 5 samples
  in the window), reinforced in place, or superseded by a new record (the old one
  points to it, as memories do) when the confidence moves by 15 points or more;
  with fewer samples, going wrong again still reinforces it (restarts its decay);
- decayed by 10% a week once it has not been reinforced (gone wrong again) for 30
  days: at 30 days, 37, 44, ...;
- soft-deleted once its confidence is below 0.2, unless an operator annotated it.

The recommendation names a precondition when one stands out: an action type that,
once it had succeeded on the same target, left the action succeeding far more
often than without it (e.g. ``create_node`` before ``update_node``).
"""

import asyncio
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import msgspec

from raymem.errors import PatternNotFound
from raymem.store import ProfileStore
from raymem.store.procedural import patterns as stored
from raymem.store.procedural.actions import sequences_ended_between
from raymem.store.procedural.rows import content_id
from raymem.store.rows import to_db_time
from raymem.types_procedural import (
    ActionSequence,
    AnnotateRequest,
    Pattern,
    PatternChanges,
    Step,
)

MIN_SEQUENCES = 5
MIN_SHARE = 0.6
SUPERSEDE_MOVE = 0.15
DECAY_AFTER = timedelta(days=30)
DECAY_EVERY = timedelta(days=7)
DECAY_FACTOR = 0.9
DELETE_BELOW = 0.2
DEFAULT_WINDOW_DAYS = 30.0
#: Target ids a pattern keeps (the newest first), for matching pending actions.
PATTERN_TARGET_IDS = 50
#: A precondition needs this many attempts after it, and must raise the success rate
#: by this much over attempts without it.
PRECONDITION_MIN_ATTEMPTS = 3
PRECONDITION_MIN_LIFT = 0.5

Key = tuple[str, str, str | None]  # (action type, target type, error code)


class Evidence(msgspec.Struct, kw_only=True):
    """What the window shows about one pattern key."""

    samples: int = 0  # sequences that did the action on the target type
    hits: int = 0  # of those, the ones in which it went wrong this way
    attempts: int = 0  # the action's attempts in those sequences
    successes: int = 0
    after: dict[str, list[int]] = {}  # action type -> [attempts after it, successes]
    outcomes: dict[str, int] = {}  # failure / dead_end -> hits
    first_seen: datetime | None = None  # the first and latest time it went wrong
    last_seen: datetime | None = None
    target_ids: list[str] = []  # the targets it went wrong on, newest first
    evidence_through: datetime | None = None  # closed_at of the newest sequence counted

    def count(self, sequence: ActionSequence, step: Step, error_code: str | None) -> None:
        """Add one sequence's step on the key's action and target type."""
        self.samples += 1
        self.attempts += step.attempts
        self.successes += step.successes
        for other, (attempts, successes) in step.after.items():
            counts = self.after.setdefault(other, [0, 0])
            counts[0] += attempts
            counts[1] += successes
        if self.evidence_through is None or sequence.closed_at > self.evidence_through:
            self.evidence_through = sequence.closed_at
        failures = [f for f in step.failures if f.error_code == error_code]
        if failures:
            self.hits += 1
        for failure in failures:
            self.outcomes[failure.outcome] = self.outcomes.get(failure.outcome, 0) + 1
            if self.first_seen is None or failure.at < self.first_seen:
                self.first_seen = failure.at
            newest = self.last_seen is None or failure.at > self.last_seen
            if newest:
                self.last_seen = failure.at
            ordered = (
                [*failure.target_ids, *self.target_ids]
                if newest
                else [
                    *self.target_ids,
                    *failure.target_ids,
                ]
            )
            self.target_ids = list(dict.fromkeys(ordered))[:PATTERN_TARGET_IDS]


def _heeded(step: Step, key: Key, sequence: ActionSequence, warned: Mapping[str, Key]) -> bool:
    """Whether the agent was shown this key's pattern in the sequence and avoided its failure."""
    if not any(warned.get(pattern_id) == key for pattern_id in sequence.warned):
        return False
    return not any(failure.error_code == key[2] for failure in step.failures)


def collect(
    sequences: Sequence[ActionSequence],
    *,
    warned: Mapping[str, Key] | None = None,
    keys: Iterable[Key] = (),
) -> dict[Key, Evidence]:
    """The evidence for every key these sequences went wrong on, and for ``keys``.

    A sequence in which the agent was shown a key's pattern (``warned``: pattern id
    -> key) and avoided its failure is left out of that key's evidence: the agent
    acted on the warning, which says nothing about whether the failure still happens
    (the utilisation metric counts those sequences).
    """
    steps: dict[tuple[str, str], list[tuple[ActionSequence, Step]]] = {}
    wanted = set(keys)
    for sequence in sequences:
        for step in sequence.steps:
            steps.setdefault((step.action_type, step.target_type), []).append((sequence, step))
            wanted.update((step.action_type, step.target_type, f.error_code) for f in step.failures)
    evidence = {}
    for key in wanted:
        found = Evidence()
        for sequence, step in steps.get((key[0], key[1]), []):
            if not _heeded(step, key, sequence, warned or {}):
                found.count(sequence, step, key[2])
        evidence[key] = found
    return evidence


def precondition(evidence: Evidence) -> tuple[str, float] | None:
    """The action type after which attempts succeed the most more often, and that rate."""
    best: tuple[float, str, float] | None = None
    for other in sorted(evidence.after):
        attempts, successes = evidence.after[other]
        without = evidence.attempts - attempts
        if attempts < PRECONDITION_MIN_ATTEMPTS or without == 0:
            continue
        rate = successes / attempts
        lift = rate - (evidence.successes - successes) / without
        if lift >= PRECONDITION_MIN_LIFT and (best is None or lift > best[0]):
            best = (lift, other, rate)
    return None if best is None else (best[1], best[2])


def recommendation(key: Key, outcome: str, evidence: Evidence) -> tuple[str, str | None]:
    """The sentence injected before the action, and the precondition it names (if any)."""
    action_type, target_type, error_code = key
    went = "failed" if outcome == "failure" else "ended in a dead end"
    how = f"{went} with {error_code}" if error_code else went
    share = percent(evidence.hits / evidence.samples)
    sentence = (
        f"{action_type} on {target_type} targets {how} in {share}% of {evidence.samples} sequences"
    )
    found = precondition(evidence)
    if found is None:
        return f"{sentence}; check the {target_type} target before running {action_type}.", None
    before, rate = found
    return (
        f"{sentence}; it succeeded in {percent(rate)}% of attempts after {before} on the"
        f" same target: run {before} first.",
        before,
    )


def decay_steps_due(reinforced_at: datetime, now: datetime) -> int:
    """Weekly decays owed at ``now``: none before 30 days without reinforcement, then one a week."""
    idle = now - reinforced_at
    if idle < DECAY_AFTER:
        return 0
    return 1 + int((idle - DECAY_AFTER) / DECAY_EVERY)


def _measured(key: Key, evidence: Evidence, now: datetime, base: Pattern | None) -> Pattern:
    """A pattern as the window measures it: a new one, or ``base`` with fresh figures."""
    dead_ends, failures = evidence.outcomes.get("dead_end", 0), evidence.outcomes.get("failure", 0)
    outcome = "dead_end" if dead_ends > failures else "failure"
    sentence, before = recommendation(key, outcome, evidence)
    figures: dict[str, Any] = {
        "outcome": outcome,
        "confidence": evidence.hits / evidence.samples,
        "samples": evidence.samples,
        "hits": evidence.hits,
        "precondition": before,
        "recommendation": sentence,
        "evidence_through": evidence.evidence_through,
        "decay_steps": 0,
        "updated_at": now,
    }
    if evidence.last_seen is not None:  # it went wrong in the window
        figures["target_ids"] = evidence.target_ids
        figures["last_seen"] = evidence.last_seen
    if base is not None:
        if evidence.last_seen is not None and evidence.last_seen > base.reinforced_at:
            figures["reinforced_at"] = evidence.last_seen
        return msgspec.structs.replace(base, **figures)
    assert evidence.first_seen is not None and evidence.last_seen is not None  # it went wrong
    action_type, target_type, error_code = key
    return Pattern(
        id=content_id("pattern", action_type, target_type, error_code, to_db_time(now)),
        action_type=action_type,
        target_type=target_type,
        error_code=error_code,
        first_seen=evidence.first_seen,
        reinforced_at=evidence.last_seen,
        created_at=now,
        superseded_by=None,
        deleted_at=None,
        suppressed=False,
        annotation=None,
        **figures,
    )


def _decayed(pattern: Pattern, now: datetime) -> Pattern:
    due = decay_steps_due(pattern.reinforced_at, now)
    if due <= pattern.decay_steps:
        return pattern
    return msgspec.structs.replace(
        pattern,
        confidence=pattern.confidence * DECAY_FACTOR ** (due - pattern.decay_steps),
        decay_steps=due,
        updated_at=now,
    )


def evolve(
    pattern: Pattern, evidence: Evidence, now: datetime
) -> tuple[list[Pattern], PatternChanges]:
    """A current pattern after one evaluation: the rows to write and what happened to it."""
    changes = PatternChanges()
    written: list[Pattern] = []
    current = pattern
    new_evidence = (
        evidence.evidence_through is not None
        and evidence.evidence_through > pattern.evidence_through
    )
    went_wrong_again = evidence.last_seen is not None and evidence.last_seen > pattern.reinforced_at
    if new_evidence and evidence.samples >= MIN_SEQUENCES:
        key = (pattern.action_type, pattern.target_type, pattern.error_code)
        measured = _measured(key, evidence, now, pattern)
        if abs(measured.confidence - pattern.confidence) >= SUPERSEDE_MOVE:
            current = msgspec.structs.replace(
                measured, id=content_id("pattern", pattern.id, to_db_time(now)), created_at=now
            )
            written.append(
                msgspec.structs.replace(pattern, superseded_by=current.id, updated_at=now)
            )
            changes.superseded += 1
        else:
            current = measured
            changes.reinforced += 1
    elif new_evidence and went_wrong_again:
        # Too few sequences to measure it again, but it went wrong again: the decay
        # clock starts over from the confidence it has now.
        assert evidence.last_seen is not None and evidence.evidence_through is not None
        current = msgspec.structs.replace(
            pattern,
            reinforced_at=evidence.last_seen,
            last_seen=evidence.last_seen,
            decay_steps=0,
            evidence_through=evidence.evidence_through,
            updated_at=now,
        )
        changes.reinforced += 1
    decayed = _decayed(current, now)
    changes.decayed += decayed.decay_steps > current.decay_steps
    current = decayed
    # An operator's note is injected whatever the confidence, so it keeps its pattern.
    if current.confidence < DELETE_BELOW and current.annotation is None:
        current = msgspec.structs.replace(current, deleted_at=now, updated_at=now)
        changes.deleted += 1
    if current != pattern:
        written.append(current)
    return written, changes


def _add(total: PatternChanges, more: PatternChanges) -> None:
    for field in total.__struct_fields__:
        setattr(total, field, getattr(total, field) + getattr(more, field))


def _promotable(evidence: Evidence) -> bool:
    return evidence.samples >= MIN_SEQUENCES and evidence.hits / evidence.samples >= MIN_SHARE


async def evaluate_patterns(
    store: ProfileStore, now: datetime, *, window_days: float = DEFAULT_WINDOW_DAYS
) -> PatternChanges:
    """Promote, reinforce, supersede, decay and delete patterns as the window shows at ``now``."""
    sequences = await sequences_ended_between(store.reader, now - timedelta(days=window_days), now)
    current = {
        (p.action_type, p.target_type, p.error_code): p
        for p in await stored.current_patterns(store.reader)
    }
    warned = await stored.pattern_keys(store.reader)
    evidence = await asyncio.to_thread(collect, sequences, warned=warned, keys=current)
    changes = PatternChanges()
    written: list[Pattern] = []
    for key in sorted(evidence, key=lambda k: (k[0], k[1], k[2] or "")):
        pattern = current.get(key)
        if pattern is not None:
            rows, happened = evolve(pattern, evidence[key], now)
            written.extend(rows)
            _add(changes, happened)
        elif _promotable(evidence[key]):
            promoted = _decayed(_measured(key, evidence[key], now, None), now)
            if promoted.confidence >= DELETE_BELOW:
                written.append(promoted)
                changes.promoted += 1
    if written:
        async with store.write() as writer:
            await stored.write_patterns(writer, written, op="patterns")
    return changes


async def annotate(
    store: ProfileStore, pattern_id: str, request: AnnotateRequest, *, now: datetime
) -> Pattern:
    """Set or clear a pattern's operator note, or suppress it (kept for audit, never injected).

    Raises:
        PatternNotFound: no pattern has this id.
    """
    async with store.write() as writer:
        pattern = await stored.get_pattern(writer.conn, pattern_id)
        if pattern is None:
            raise PatternNotFound(pattern_id)
        changed = pattern
        if request.annotation is not msgspec.UNSET:
            changed = msgspec.structs.replace(
                changed, annotation=(request.annotation or "").strip() or None
            )
        if request.suppressed is not msgspec.UNSET:
            changed = msgspec.structs.replace(changed, suppressed=request.suppressed)
        if changed != pattern:
            changed = msgspec.structs.replace(changed, updated_at=now)
            await stored.write_patterns(writer, [changed], op="pattern_annotate")
    return changed


def percent(value: float) -> int:
    """A confidence as a whole percentage, rounded half up (0.825 -> 83)."""
    return math.floor(100 * value + 0.5)
