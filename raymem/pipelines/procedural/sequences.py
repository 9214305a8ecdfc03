"""Pass 1: a session's actions become a sequence once the session is quiet or ended.

A sequence has the outcome of its last action (where the agent ended up), its
action and failure counts, an intent summary, and its steps: for each (action
type, target type) it acted on, the attempts, the successes, each distinct way it
went wrong, and which other actions had succeeded on the same target before an
attempt (the evidence preconditions are found from). Patterns shown to the agent in
the session are attached, with whether the warned failures were avoided.

The summary is written by rules (the distinct intents the actions stated, in
order); an ``IntentSummariser`` (a model) may write it instead, and the rules take
over when it fails. Summaries get their vectors later, in the background.
"""

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Literal, Protocol

from raymem.store import ProfileStore
from raymem.store.procedural import actions as stored
from raymem.store.procedural.actions import ClosedSequence
from raymem.store.procedural.patterns import patterns_by_id
from raymem.store.procedural.rows import content_id
from raymem.types_procedural import Action, ActionSequence, Pattern, Step, StepFailure

log = logging.getLogger(__name__)

RULES = "rules"
ClosedBy = Literal["quiet", "session_end"]
#: A summary is cut to this many characters; a step keeps this many failing target ids.
INTENT_CHARS = 200
STEP_TARGET_IDS = 20
#: Sessions closed per transaction, and summaries a model writes at once.
CLOSE_CHUNK = 200
SUMMARIES_AT_ONCE = 4


class IntentSummariser(Protocol):
    """Writes a sequence's intent summary (a model); ``name`` is recorded with it."""

    name: str

    async def summarise(self, actions: Sequence[Action]) -> str: ...


def rules_intent(actions: Sequence[Action]) -> str:
    """The distinct intents the actions stated, in order; else what they did."""
    intents = list(dict.fromkeys(a.intent for a in actions if a.intent))
    if not intents:
        intents = list(dict.fromkeys(f"{a.action_type} {a.target_type}" for a in actions))
    text = "; ".join(intents)
    return text if len(text) <= INTENT_CHARS else text[: INTENT_CHARS - 1].rstrip() + "…"


def build_steps(actions: Sequence[Action]) -> list[Step]:
    """What each (action type, target type) met, in the order first acted on."""
    steps: dict[tuple[str, str], Step] = {}
    done_on: dict[str, set[str]] = {}  # target id -> action types that succeeded on it
    done_anywhere: set[str] = set()
    for action in actions:
        step = steps.setdefault(
            (action.action_type, action.target_type),
            Step(
                action_type=action.action_type,
                target_type=action.target_type,
                attempts=0,
                successes=0,
            ),
        )
        step.attempts += 1
        succeeded = action.outcome == "success"
        step.successes += succeeded
        before = (
            set().union(*(done_on.get(t, set()) for t in action.target_ids))
            if action.target_ids
            else done_anywhere
        )
        for other in sorted(before - {action.action_type}):
            attempts, successes = step.after.get(other, (0, 0))
            step.after[other] = (attempts + 1, successes + succeeded)
        if succeeded:
            done_anywhere.add(action.action_type)
            for target in action.target_ids:
                done_on.setdefault(target, set()).add(action.action_type)
        else:
            _add_failure(step, action)
    return list(steps.values())


def _add_failure(step: Step, action: Action) -> None:
    assert action.outcome != "success"
    for failure in step.failures:
        if (failure.outcome, failure.error_code) == (action.outcome, action.error_code):
            break
    else:
        failure = StepFailure(outcome=action.outcome, error_code=action.error_code, at=action.at)
        step.failures.append(failure)
    for target in action.target_ids:
        if target not in failure.target_ids and len(failure.target_ids) < STEP_TARGET_IDS:
            failure.target_ids.append(target)


def went_wrong(steps: Sequence[Step], pattern: Pattern) -> bool:
    """Whether a pattern's failure happened among these steps."""
    return any(
        (step.action_type, step.target_type) == (pattern.action_type, pattern.target_type)
        and any(failure.error_code == pattern.error_code for failure in step.failures)
        for step in steps
    )


def build_sequence(
    actions: Sequence[Action],
    *,
    now: datetime,
    closed_by: ClosedBy,
    intent: str,
    summarised_by: str,
    warned: Sequence[Pattern],
) -> ActionSequence:
    """A closed sequence of a session's actions (in the order they happened)."""
    steps = build_steps(actions)
    return ActionSequence(
        id=content_id("sequence", actions[0].session_id, actions[0].id),
        session_id=actions[0].session_id,
        agent_id=next((a.agent_id for a in actions if a.agent_id), None),
        started_at=actions[0].at,
        ended_at=actions[-1].at,
        closed_at=now,
        closed_by=closed_by,
        outcome=actions[-1].outcome,
        action_count=len(actions),
        failure_count=sum(a.outcome != "success" for a in actions),
        duration_ms=sum(a.duration_ms or 0.0 for a in actions),
        intent=intent,
        summarised_by=summarised_by,
        steps=steps,
        warned=[pattern.id for pattern in warned],
        avoided=None if not warned else not any(went_wrong(steps, p) for p in warned),
    )


async def _summaries(
    by_session: dict[str, list[Action]], summariser: IntentSummariser | None
) -> dict[str, tuple[str, str]]:
    """Each session's (intent summary, who wrote it): the summariser's, a few at a time, or the
    rules' where it fails or there is none."""
    summaries = {session: (rules_intent(actions), RULES) for session, actions in by_session.items()}
    if summariser is None:
        return summaries
    limit = asyncio.Semaphore(SUMMARIES_AT_ONCE)

    async def summarise(session: str, actions: list[Action]) -> None:
        async with limit:
            try:
                text = " ".join((await summariser.summarise(actions)).split())
            except Exception:
                log.warning(
                    "intent summary by %s failed; rules instead", summariser.name, exc_info=True
                )
                return
        if text:
            summaries[session] = (text[:INTENT_CHARS], summariser.name)

    await asyncio.gather(*(summarise(session, actions) for session, actions in by_session.items()))
    return summaries


async def close_quiet(
    store: ProfileStore,
    now: datetime,
    *,
    quiet_after_s: float,
    summariser: IntentSummariser | None = None,
) -> list[ActionSequence]:
    """Close the sequence of every session with no action in the last ``quiet_after_s``.

    Sessions are closed ``CLOSE_CHUNK`` at a time, one transaction each, so that a large
    backlog does not hold up capture for long.
    """
    sessions = await stored.quiet_sessions(store.reader, now - timedelta(seconds=quiet_after_s))
    closed = []
    for start in range(0, len(sessions), CLOSE_CHUNK):
        chunk = sessions[start : start + CLOSE_CHUNK]
        closed.extend(await _close(store, chunk, now, "quiet", summariser))
    return closed


async def close_session(
    store: ProfileStore,
    session_id: str,
    now: datetime,
    *,
    summariser: IntentSummariser | None = None,
) -> ActionSequence | None:
    """Close a session's open actions into a sequence now (the session was ended)."""
    closed = await _close(store, [session_id], now, "session_end", summariser)
    return closed[0] if closed else None


def _build_all(
    by_session: dict[str, list[Action]],
    injections: dict[str, list[tuple[str, str]]],
    patterns: dict[str, Pattern],
    summaries: dict[str, tuple[str, str]],
    now: datetime,
    closed_by: ClosedBy,
) -> list[ClosedSequence]:
    built = []
    for session_id, actions in by_session.items():
        session_injections = injections.get(session_id, [])
        warned_ids = dict.fromkeys(pattern_id for _, pattern_id in session_injections)
        intent, summarised_by = summaries[session_id]
        sequence = build_sequence(
            actions,
            now=now,
            closed_by=closed_by,
            intent=intent,
            summarised_by=summarised_by,
            warned=[patterns[i] for i in warned_ids if i in patterns],
        )
        action_ids = [a.id for a in actions]
        built.append(ClosedSequence(sequence, action_ids, [i for i, _ in session_injections]))
    return built


async def _close(
    store: ProfileStore,
    session_ids: Sequence[str],
    now: datetime,
    closed_by: ClosedBy,
    summariser: IntentSummariser | None,
) -> list[ActionSequence]:
    """Build the sessions' sequences outside the transaction (a model may write summaries;
    the rest is CPU work, done off the event loop), then store them in one; a sequence whose
    actions another pass took meanwhile is left out."""
    by_session = await stored.open_actions(store.reader, session_ids)
    if not by_session:
        return []
    injections = await stored.open_injections(store.reader, list(by_session))
    shown = {pattern_id for found in injections.values() for _, pattern_id in found}
    patterns = await patterns_by_id(store.reader, sorted(shown))
    summaries = await _summaries(by_session, summariser)
    built = await asyncio.to_thread(
        _build_all, by_session, injections, patterns, summaries, now, closed_by
    )
    async with store.write() as writer:
        still_open = await stored.open_action_ids(
            writer.conn, [i for item in built for i in item.action_ids]
        )
        closed = [item for item in built if still_open.issuperset(item.action_ids)]
        await stored.insert_sequences(writer, closed)
    return [item.sequence for item in closed]
