"""Recording memory use off the request path: recall notes what it returned, a flush writes it.

A recall must not wait for a write transaction, so the profile actor notes the
memories each result holds (``note``, in memory, microseconds) and writes the
counts now and then in one transaction (``flush``), as ranking's prior and a
dream's decay read them (``raymem.store.memory_use``).
"""

from collections import Counter
from datetime import datetime

from raymem.store import ProfileStore, to_db_time, utc_now
from raymem.store import memory_use as use
from raymem.types import RecallResult


class UseRecorder:
    """The memories recall returned since the last flush, counted."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._last: datetime | None = None

    def __len__(self) -> int:
        return len(self._counts)

    def note(self, result: RecallResult, at: datetime | None = None) -> None:
        """Count every memory a recall returned (raw turns are not memories)."""
        ids = [hit.id for hit in result.memories if hit.type != "message"]
        if ids:
            self._counts.update(ids)
            self._last = at or utc_now()

    async def flush(self, store: ProfileStore) -> int:
        """Write the counts noted so far in one transaction; returns how many memories."""
        if not self._counts or self._last is None:
            return 0
        counts, at = dict(self._counts), to_db_time(self._last)
        self._counts.clear()
        try:
            async with store.write() as writer:
                await use.record(writer, counts, at)
        except BaseException:
            self._counts.update(counts)  # kept for the next flush
            raise
        return len(counts)
