"""Action capture and the enabled flag.

Capturing is one transaction with one batched insert and its ledger entry: no model
call and no embedding, so an agent can report every action as it goes. An action
without an id gets one derived from its content (its time included), so a resend
of the same report is a duplicate; an action without a time gets the time of the
request, one microsecond apart, so a batch keeps its order.
"""

from collections.abc import Sequence
from datetime import datetime, timedelta

from raymem.pipelines.procedural.metrics import ensure_builtins
from raymem.store import ProfileStore, to_db_time, utc_now
from raymem.store.procedural import actions as stored_actions
from raymem.store.procedural.rows import Row, content_id
from raymem.types_procedural import ActionIn, CaptureResult, ProceduralState


def action_id(action: ActionIn, at: str) -> str:
    """The content-derived id of an action that came without one (``at``: ``to_db_time``)."""
    return content_id(
        action.session_id,
        action.agent_id,
        action.action_type,
        action.target_type,
        *action.target_ids,
        action.outcome,
        action.error_code,
        at,
        action.intent,
    )


def action_rows(requested: Sequence[ActionIn], now: datetime) -> list[Row]:
    """The stored rows (as the ledger carries them) of a request's actions, with ids and times."""
    captured_at = to_db_time(now)
    rows = []
    for index, action in enumerate(requested):
        at = to_db_time(action.at or now + timedelta(microseconds=index))
        rows.append(
            {
                "id": action.id or action_id(action, at),
                "session_id": action.session_id,
                "agent_id": action.agent_id,
                "action_type": action.action_type,
                "target_type": action.target_type,
                "target_ids": action.target_ids,
                "outcome": action.outcome,
                "error_code": action.error_code,
                "duration_ms": action.duration_ms,
                "intent": action.intent.strip(),
                "at": at,
                "captured_at": captured_at,
                "sequence_id": None,
            }
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
    rows = action_rows(requested, now or utc_now())
    ids = [row["id"] for row in rows]
    async with store.write() as writer:
        enabled, _ = await stored_actions.enabled_state(writer.conn)
        if not enabled:
            return CaptureResult(stored=0, duplicates=0, ignored=len(rows), ids=ids)
        stored = await stored_actions.insert_actions(writer, rows)
    return CaptureResult(stored=stored, duplicates=len(rows) - stored, ids=ids)


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
