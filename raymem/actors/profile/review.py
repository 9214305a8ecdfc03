"""A profile actor's review queue: its review mode, and the proposals a person decides."""

from typing import Literal

import msgspec

from raymem.actors.profile.base import ProfileBase, entry
from raymem.names import validate_id
from raymem.store import review as queue
from raymem.store import to_db_time, utc_now
from raymem.types import Proposal, ProposalList, ProposalState, ReviewMode

MAX_LISTED = 1_000  # proposals one listing returns at most, oldest first


class ReviewOperations(ProfileBase):
    @entry
    async def review_mode(self) -> ReviewMode:
        mode = await queue.review_mode(self._open_store.reader)
        return ReviewMode(mode=mode.mode, below=mode.below)

    @entry
    async def set_review_mode(
        self, mode: Literal["apply", "review"], below: float | None
    ) -> ReviewMode:
        """Set the mode; ``below`` None keeps the profile's threshold."""
        store = self._open_store
        async with store.write() as writer:
            found = await queue.review_mode(writer.conn)
            changed = queue.ReviewMode(mode=mode, below=found.below if below is None else below)
            await queue.set_review_mode(writer, changed)
        await self._after_write()
        return ReviewMode(mode=changed.mode, below=changed.below)

    @entry
    async def list_proposals(self, state: ProposalState | None, limit: int) -> ProposalList:
        found = await queue.list_proposals(
            self._open_store.reader, state=state, limit=min(limit, MAX_LISTED)
        )
        return ProposalList(proposals=[_wire(proposal) for proposal in found])

    @entry
    async def decide_proposal(
        self, proposal_id: str, decision: Literal["approved", "rejected"]
    ) -> Proposal:
        """Approve (make the change) or reject (keep both memories) a pending proposal."""
        async with self._open_store.write() as writer:
            decided = await queue.decide(
                writer, validate_id(proposal_id, "proposal"), decision, to_db_time(utc_now())
            )
        await self._after_write()
        return _wire(decided)


def _wire(proposal: queue.Proposal) -> Proposal:
    return msgspec.convert(msgspec.structs.asdict(proposal), Proposal)
