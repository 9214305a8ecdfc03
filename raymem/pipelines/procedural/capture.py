"""Action capture and the enabled flag.

Capturing is one transaction with one batched insert and its ledger entry: no model
call and no embedding, so an agent can report every action as it goes. An action
without an id gets one derived from its content (its time included), so a resend
of the same report is a duplicate; an action without a time gets the time of the
request, one microsecond apart, so a batch keeps its order.
"""

import json
from collections.abc import Sequence
from datetime import datetime, timedelta

from raymem.pipelines.procedural.metrics import ensure_builtins
from raymem.store import ProfileStore, to_db_time, utc_now
from raymem.store.procedural import actions as stored_actions
from raymem.store.procedural.rows import content_id
from raymem.types_procedural import Action, ActionIn, CaptureResult, ProceduralState


def action_id(action: ActionIn, at: datetime) -> str:
    """The content-derived id of an action that came without one."""
    return content_id(
        action.session_id,
        action.agent_id,
        action.action_type,
        action.target_type,
        json.dumps(action.target_ids),
        action.outcome,
        action.error_code,
        to_db_time(at),
        action.intent,
    )


def build_actions(requested: Sequence[ActionIn], now: datetime) -> list[Action]:
    """Rows for the actions of a request, with ids and times."""
    rows = []
    for index, action in enumerate(requested):
        at = action.at or now + timedelta(microseconds=index)
        rows.append(
            Action(
                id=action.id or action_id(action, at),
                session_id=action.session_id,
                agent_id=action.agent_id,
                action_type=action.action_type,
                target_type=action.target_type,
                target_ids=list(action.target_ids),
                outcome=action.outcome,
                error_code=action.error_code,
                duration_ms=action.duration_ms,
                intent=action.intent.strip(),
                at=datetime.fromisoformat(to_db_time(at)),  # UTC, as stored
                captured_at=now,
                sequence_id=None,
            )
        )
    return rows


async def capture(
    store: ProfileStore, requested: Sequence[ActionIn], *, now: datetime | None = None
) -> CaptureResult:
    """Store actions idempotently; nothing is stored while procedural memory is disabled.

    Args:
        store: the profile's store.
        requested: the actions, in the order they happened.
        now: the clock (default: now); also the time of actions sent without one.
    """
    now = now or utc_now()
    rows = build_actions(requested, now)
    ids = [row.id for row in rows]
    async with store.write() as writer:
        enabled, _ = await stored_actions.enabled_state(writer.conn)
        if not enabled:
            return CaptureResult(stored=0, duplicates=0, ignored=len(rows), ids=ids)
        new = await stored_actions.insert_actions(writer, rows)
    return CaptureResult(stored=len(new), duplicates=len(rows) - len(new), ids=ids)


async def set_enabled(store: ProfileStore, enabled: bool, *, now: datetime | None = None) -> bool:
    """Turn procedural memory on or off for the profile; returns whether that changed it.

    Turning it off stops capture and injection; everything stored stays readable.
    """
    now = now or utc_now()
    async with store.write() as writer:
        changed = await stored_actions.set_enabled(writer, enabled, now)
        if enabled:
            await ensure_builtins(writer, now)
    return changed


async def state(store: ProfileStore) -> ProceduralState:
    """Whether procedural memory is on, since when, and what it holds."""
    enabled, updated_at = await stored_actions.enabled_state(store.reader)
    counts = await stored_actions.counts(store.reader)
    return ProceduralState(enabled=enabled, updated_at=updated_at, counts=counts)
