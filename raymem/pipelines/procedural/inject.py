"""Pre-execution injection: the "past experience" block for an action an agent is about to take.

The block lists the current patterns about the action (the same action and target
types, or any action on one of the same targets) whose confidence is at least 0.6,
and every annotated one whatever its confidence; suppressed patterns never. It is
deterministic (by confidence, highest first, then id) and short (five patterns at
most). ``injection_block`` is what the context assembly calls; ``inject`` also
records, when given a session, which patterns the agent was shown, so that the
sequence it acts in can tell whether the warning was heeded.
"""

from collections.abc import Sequence
from datetime import datetime

from raymem.store import ProfileStore, to_db_time, utc_now
from raymem.store.procedural.actions import enabled_state, record_injections
from raymem.store.procedural.patterns import patterns_for_action
from raymem.store.procedural.rows import content_id
from raymem.types_procedural import Injection, InjectRequest, Pattern

INJECT_MIN_CONFIDENCE = 0.6
MAX_INJECTED = 5
HEADING = "Past experience (procedural memory):"


def injectable(pattern: Pattern) -> bool:
    """Shown before an action: not suppressed, and confident enough or annotated."""
    if pattern.suppressed:
        return False
    return pattern.confidence >= INJECT_MIN_CONFIDENCE or pattern.annotation is not None


def render(patterns: Sequence[Pattern]) -> str:
    """The block's text: one line per pattern, the operator's note after the sentence."""
    if not patterns:
        return ""
    lines = [HEADING]
    for pattern in patterns:
        parts = []
        if pattern.confidence >= INJECT_MIN_CONFIDENCE:
            parts.append(f"{pattern.recommendation} (confidence {pattern.confidence:.2f})")
        else:
            subject = f"{pattern.action_type} on {pattern.target_type}"
            parts.append(f"{subject} ({pattern.error_code or pattern.outcome}):")
        if pattern.annotation:
            parts.append(f"Operator note: {pattern.annotation}")
        lines.append("- " + " ".join(parts))
    return "\n".join(lines)


async def injection_block(
    store: ProfileStore, action_type: str, target_type: str, target_ids: Sequence[str] = ()
) -> Injection:
    """The past-experience block for a pending action (empty while procedural memory is off)."""
    enabled, _ = await enabled_state(store.reader)
    if not enabled:
        return Injection(text="", patterns=[])
    found = await patterns_for_action(store.reader, action_type, target_type, list(target_ids))
    chosen = [pattern for pattern in found if injectable(pattern)][:MAX_INJECTED]
    return Injection(text=render(chosen), patterns=chosen)


async def inject(
    store: ProfileStore, request: InjectRequest, *, now: datetime | None = None
) -> Injection:
    """``injection_block``, recording what was shown when the request names a session."""
    block = await injection_block(
        store, request.action_type, request.target_type, request.target_ids
    )
    if request.session_id is None or not block.patterns:
        return block
    at = to_db_time(now or utc_now())
    rows = [
        {
            "id": content_id("injection", request.session_id, pattern.id, at),
            "session_id": request.session_id,
            "agent_id": request.agent_id,
            "pattern_id": pattern.id,
            "at": at,
            "sequence_id": None,
        }
        for pattern in block.patterns
    ]
    async with store.write() as writer:
        await record_injections(writer, rows)
    return block
