"""Review mode's hook in reconciliation: low-confidence supersessions and merges wait for a person.

Reconciliation asks ``proposed_change`` before it supersedes a memory or folds a
new one into a stored duplicate. In ``review`` mode, when the new memory's
confidence is under the profile's threshold, the change is held: the new memory
is stored as current beside the old one, and a proposal records the change for
``approve`` (make it) or ``reject`` (leave both) later (``raymem.store.review``).
"""

import uuid
from typing import NamedTuple

from raymem.store import StoreWriter
from raymem.store import review as queue
from raymem.store.review import Proposal, ReviewAction, ReviewMode


class HeldChange(NamedTuple):
    """A change review mode holds back: its kind, the stored memory it targets, and why."""

    action: ReviewAction
    target: str
    confidence: float
    reason: str


def proposed_change(
    review: ReviewMode, confidence: float, supersedes: str | None, merge_into: str | None
) -> HeldChange | None:
    """The change to hold for review instead of making it, if any.

    Args:
        review: the profile's review mode.
        confidence: the new memory's confidence.
        supersedes: the stored memory the new one would supersede.
        merge_into: the stored memory the new one duplicates.
    """
    target = merge_into or supersedes
    if target is None or not review.holds(confidence):
        return None
    action: ReviewAction = "merge" if merge_into else "supersede"
    what = "says what it says" if merge_into else "replaces it"
    reason = (
        f"the new memory {what}, with confidence {confidence:.2f}"
        f" (below the review threshold {review.below:.2f})"
    )
    return HeldChange(action, target, confidence, reason)


async def propose(writer: StoreWriter, held: HeldChange, memory_id: str, at: str) -> None:
    """Queue ``held`` for the new memory ``memory_id``, in the caller's transaction."""
    await queue.propose(
        writer,
        Proposal(
            id=uuid.uuid4().hex,
            action=held.action,
            memory_id=memory_id,
            target_id=held.target,
            confidence=held.confidence,
            reason=held.reason,
            state="pending",
            created_at=at,
        ),
    )
