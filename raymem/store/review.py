"""The review queue: a profile's review mode and the proposals waiting for a person.

In ``review`` mode a supersession or merge that reconciliation would make with a
confidence below the profile's threshold is written as a proposal instead: the
new memory is stored, the old one stays current, and approving the proposal
makes the change later. Every write here is logged and replayable.
"""

from collections.abc import Sequence
from typing import Any, Literal

import aiosqlite
import msgspec

from raymem.errors import ProposalDecided, ProposalNotFound
from raymem.store.writer import StoreWriter, fetch

ReviewAction = Literal["supersede", "merge"]
ProposalState = Literal["pending", "approved", "rejected"]
#: Without a setting a profile applies every change, and a review threshold starts here:
#: the rules' own extractions carry 0.8 (0.9 from the detail pass), a stated memory 1.0.
DEFAULT_MODE: Literal["apply", "review"] = "apply"
DEFAULT_BELOW = 0.9


class ReviewMode(msgspec.Struct, frozen=True, kw_only=True):
    """``review``: changes with a confidence under ``below`` wait as proposals."""

    mode: Literal["apply", "review"] = DEFAULT_MODE
    below: float = DEFAULT_BELOW

    def holds(self, confidence: float) -> bool:
        """Whether a change of this confidence waits for review."""
        return self.mode == "review" and confidence < self.below


class Proposal(msgspec.Struct, kw_only=True):
    """A change waiting for review: ``memory_id`` would supersede or merge into ``target_id``.

    ``supersede``: the new memory replaces the target (the target gets
    ``superseded_by``). ``merge``: the new memory says what the target says; it is
    folded into the target (the new one gets ``superseded_by``).
    """

    id: str
    action: ReviewAction
    memory_id: str
    target_id: str
    confidence: float
    reason: str
    state: ProposalState
    created_at: str
    decided_at: str | None = None


_COLUMNS = tuple(field.name for field in msgspec.structs.fields(Proposal))
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM proposals"


def _proposal(row: Sequence[Any]) -> Proposal:
    return msgspec.convert(dict(zip(_COLUMNS, row, strict=True)), Proposal)


# ------------------------------------------------------------------- mode


async def review_mode(conn: aiosqlite.Connection) -> ReviewMode:
    rows = await fetch(conn, "SELECT mode, below FROM review_mode WHERE id = 1")
    return ReviewMode(mode=rows[0][0], below=rows[0][1]) if rows else ReviewMode()


async def set_review_mode(writer: StoreWriter, mode: ReviewMode, *, log: bool = True) -> None:
    await writer.conn.execute(
        "INSERT OR REPLACE INTO review_mode (id, mode, below) VALUES (1, ?, ?)",
        (mode.mode, mode.below),
    )
    if log:
        await writer.log("review_mode", mode)


# -------------------------------------------------------------- proposals


async def propose(writer: StoreWriter, proposal: Proposal) -> None:
    """Queue a proposal (logged)."""
    await _insert(writer, proposal)
    await writer.log("proposal", proposal)


async def _insert(writer: StoreWriter, proposal: Proposal) -> None:
    values = msgspec.structs.asdict(proposal)
    await writer.conn.execute(
        f"INSERT OR IGNORE INTO proposals ({', '.join(_COLUMNS)})"
        f" VALUES ({', '.join(':' + column for column in _COLUMNS)})",
        values,
    )


async def get_proposal(conn: aiosqlite.Connection, proposal_id: str) -> Proposal:
    """One proposal.

    Raises:
        ProposalNotFound: no proposal has this id.
    """
    rows = await fetch(conn, f"{_SELECT} WHERE id = ?", (proposal_id,))
    if not rows:
        raise ProposalNotFound(proposal_id)
    return _proposal(rows[0])


async def list_proposals(
    conn: aiosqlite.Connection, *, state: ProposalState | None, limit: int
) -> list[Proposal]:
    """Proposals, oldest first; only those in ``state`` when given."""
    where, params = ("WHERE state = ?", [state]) if state else ("", [])
    rows = await fetch(conn, f"{_SELECT} {where} ORDER BY seq LIMIT ?", [*params, limit])
    return [_proposal(row) for row in rows]


async def decide(
    writer: StoreWriter, proposal_id: str, decision: Literal["approved", "rejected"], at: str
) -> Proposal:
    """Approve (make the change) or reject (leave both memories as they are) a proposal.

    Raises:
        ProposalNotFound: no proposal has this id.
        ProposalDecided: it was decided already, or approving it would touch a
            memory that is no longer current.
    """
    proposal = await get_proposal(writer.conn, proposal_id)
    if proposal.state != "pending":
        raise ProposalDecided(proposal_id, f"it was {proposal.state} already")
    if decision == "approved":
        current = await _current(writer.conn, [proposal.memory_id, proposal.target_id])
        if len(current) < 2:
            raise ProposalDecided(
                proposal_id, "one of its memories was superseded or forgotten since"
            )
    await _decide(writer, proposal, decision, at)
    await writer.log("proposal_decide", {"id": proposal_id, "state": decision, "at": at})
    return msgspec.structs.replace(proposal, state=decision, decided_at=at)


async def _current(conn: aiosqlite.Connection, ids: Sequence[str]) -> set[str]:
    rows = await fetch(
        conn,
        "SELECT id FROM memories WHERE id IN (?, ?)"
        " AND superseded_by IS NULL AND forgotten_at IS NULL",
        list(ids),
    )
    return {row[0] for row in rows}


async def _decide(writer: StoreWriter, proposal: Proposal, state: str, at: str) -> None:
    if state == "approved":
        if proposal.action == "supersede":
            await writer.supersede(proposal.target_id, proposal.memory_id)
        else:
            await writer.supersede(proposal.memory_id, proposal.target_id)
    await writer.conn.execute(
        "UPDATE proposals SET state = ?, decided_at = ? WHERE id = ?", (state, at, proposal.id)
    )


# ----------------------------------------------------------------- replay


async def replay_mode(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    await set_review_mode(writer, msgspec.convert(data, ReviewMode), log=False)


async def replay_proposal(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    await _insert(writer, msgspec.convert(data, Proposal))


async def replay_decision(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    proposal = await get_proposal(writer.conn, data["id"])
    await _decide(writer, proposal, data["state"], data["at"])
