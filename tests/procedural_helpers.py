"""Helpers shared by the procedural memory tests: a clock, actions and sessions of actions."""

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from raymem.pipelines.procedural import capture, sequences
from raymem.store import ProfileStore
from raymem.types_procedural import ActionIn, ActionSequence

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
QUIET_S = 300.0


def at(minutes: float = 0, *, days: float = 0) -> datetime:
    """A moment of the tests' clock: T0 plus minutes and days."""
    return T0 + timedelta(days=days, minutes=minutes)


def action(session_id: str, action_type: str, outcome: str = "success", **fields: Any) -> ActionIn:
    fields.setdefault("target_type", "node")
    return ActionIn(session_id=session_id, action_type=action_type, outcome=outcome, **fields)  # type: ignore[arg-type]


async def enabled_store(store: ProfileStore) -> ProfileStore:
    await capture.set_enabled(store, True, now=T0)
    return store


async def run_session(
    store: ProfileStore,
    session_id: str,
    steps: Sequence[tuple[str, str, str | None]],
    *,
    start: datetime,
    target: str = "n1",
    intent: str = "",
) -> ActionSequence:
    """Capture one session's actions (action type, outcome, error code), a second apart,
    and end it; returns its sequence."""
    actions = [
        action(
            session_id,
            action_type,
            outcome,
            error_code=error_code,
            target_ids=[target],
            intent=intent,
            at=start + timedelta(seconds=index),
        )
        for index, (action_type, outcome, error_code) in enumerate(steps)
    ]
    await capture.capture(store, actions, now=start)
    closed = await sequences.close_session(
        store, session_id, start + timedelta(seconds=len(steps) + 1)
    )
    assert closed is not None
    return closed


FAIL = ("update_node", "failure", "NodeNotFoundError")
UPDATE = ("update_node", "success", None)
CREATE = ("create_node", "success", None)
