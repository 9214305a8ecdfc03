"""A profile actor's dreams: start one, follow it, read its diff, adopt, discard or cancel it.

A dream runs as a task of this actor, outside any request, on a copy of the
profile (``raymem.pipelines.dream``), and keeps the profile awake meanwhile.
If the profile stops anyway (hibernated by force, killed, moved), the task
stops after its last completed step and the next activation resumes it: any
call does, and polling a dream's status is one. Deleting the profile stops its
dream first (the copy it may be making included), so no candidate outlives it.
"""

import logging

import numpy as np

from raymem.actors.profile.base import ProfileBase, entry
from raymem.errors import InvalidRequest
from raymem.names import validate_id
from raymem.pipelines.dream import STEPS, Dreams, steps_done
from raymem.pipelines.generators import LLMGenerator
from raymem.store.dreams import Change, DreamRow
from raymem.types import (
    MAX_INSTRUCTIONS_CHARS,
    DreamAdopted,
    DreamChange,
    DreamDiff,
    DreamList,
    DreamProgress,
    DreamRequest,
    DreamStatus,
    SkippedChange,
)

log = logging.getLogger(__name__)

MAX_LISTED = 100  # dreams one listing returns at most, newest first
#: The error of a dream an erasure ended (its candidate held copies of the erased text).
ERASED_DURING_DREAM = "an erasure ended the dream: its candidate held erased text"


def status_of(dream: DreamRow) -> DreamStatus:
    return DreamStatus(
        id=dream.id,
        state=dream.state,
        progress=DreamProgress(step=dream.step, done=steps_done(dream), total=len(STEPS)),
        counts=dream.counts,
        instructions=dream.instructions,
        max_sessions=dream.max_sessions,
        started_at=dream.started_at,
        finished_at=dream.finished_at,
        error=dream.error,
    )


def change_of(change: Change) -> DreamChange:
    return DreamChange(
        action=change.action,
        memory_ids=change.memory_ids,
        content=change.content,
        reason=change.reason,
        kept=change.kept,
        evidence=change.evidence,
    )


class DreamOperations(ProfileBase):
    # Made with the store, on the first call after each activation (which resumes a
    # dream that was running when the profile stopped).
    _dream_jobs: Dreams | None = None

    async def _ensure_open(self) -> None:
        await super()._ensure_open()
        if self._dream_jobs is None and self._store is not None:
            chat = self._generator.chat if isinstance(self._generator, LLMGenerator) else None
            self._dream_jobs = dreams = Dreams(
                self._store,
                self.settings.dreams,
                embed=self._embed_background,
                model=chat,
                max_tokens=self.settings.models.generator_max_tokens,
            )
            await dreams.recover()

    @property
    def _dreams(self) -> Dreams:
        assert self._dream_jobs is not None  # every ``entry`` opens the store first
        return self._dream_jobs

    async def _embed_background(self, texts: list[str]) -> np.ndarray:
        """A dream's embeddings queue behind requests' (the pool's background lane)."""
        return await self._embedder.embed_background(texts)

    def _busy(self) -> bool:
        """A running dream keeps the profile awake, as vectorising does."""
        return super()._busy() or (self._dream_jobs is not None and self._dream_jobs.busy)

    async def _stop_work(self) -> None:
        """The profile is deleted: a running dream stops, and its candidate goes with the files."""
        if self._dream_jobs is not None:
            await self._dream_jobs.close()
        await super()._stop_work()

    async def _end_copies(self) -> None:
        """An erasure ends the open dream: its candidate holds what was erased."""
        await super()._end_copies()
        if self._dream_jobs is not None:
            ended = await self._dream_jobs.end_open(ERASED_DURING_DREAM)
            if ended is not None:
                log.info("profile %s: dream %s %s by an erasure", self.name, ended.id, ended.state)

    async def _hibernate(self) -> None:
        """Stop a running dream at its last completed step first; it resumes on activation."""
        if self._dream_jobs is not None:
            await self._dream_jobs.close()
        await super()._hibernate()
        if not self._closing and self._dream_jobs is not None:  # it stays awake after all
            await self._dream_jobs.recover()

    @entry
    async def start_dream(self, request: DreamRequest) -> DreamStatus:
        bound = self.settings.dreams.max_sessions
        if request.max_sessions is not None and not 1 <= request.max_sessions <= bound:
            raise InvalidRequest(
                f"max_sessions {request.max_sessions} is not between 1 and {bound}"
                " - at `$.max_sessions`"
            )
        if len(request.instructions) > MAX_INSTRUCTIONS_CHARS:
            raise InvalidRequest(
                f"instructions of {len(request.instructions)} characters exceed the limit of"
                f" {MAX_INSTRUCTIONS_CHARS} - at `$.instructions`"
            )
        dream = await self._dreams.start(
            instructions=request.instructions, max_sessions=request.max_sessions
        )
        return status_of(dream)

    @entry
    async def dream_status(self, dream_id: str) -> DreamStatus:
        return status_of(await self._dreams.status(validate_id(dream_id, "dream")))

    @entry
    async def list_dreams(self) -> DreamList:
        dreams = await self._dreams.list_dreams(limit=MAX_LISTED)
        return DreamList(dreams=[status_of(dream) for dream in dreams])

    @entry
    async def dream_diff(self, dream_id: str) -> DreamDiff:
        dream, changes = await self._dreams.diff(validate_id(dream_id, "dream"))
        return DreamDiff(id=dream.id, state=dream.state, changes=[change_of(c) for c in changes])

    @entry
    async def adopt_dream(self, dream_id: str) -> DreamAdopted:
        """Apply the dream's changes in one transaction; snapshot when object storage is set."""
        dream, adopted = await self._dreams.adopt(validate_id(dream_id, "dream"))
        await self._after_write()
        if self._durability.object_store is not None:
            try:  # the adopted state as a whole; the ledger has it meanwhile
                await self._durability.snapshot()
            except Exception:
                log.warning("profile %s: no snapshot after adopting", self.name, exc_info=True)
        return DreamAdopted(
            dream=status_of(dream),
            applied=len(adopted.applied),
            skipped=[
                SkippedChange(change=change_of(change), reason=reason)
                for change, reason in adopted.skipped
            ],
        )

    @entry
    async def discard_dream(self, dream_id: str) -> DreamStatus:
        return status_of(await self._dreams.discard(validate_id(dream_id, "dream")))

    @entry
    async def cancel_dream(self, dream_id: str) -> DreamStatus:
        return status_of(await self._dreams.cancel(validate_id(dream_id, "dream")))

    @entry
    async def wait_dream(self, dream_id: str) -> DreamStatus:
        """Return once the dream stops running here (tests, benchmarks, the CLI's --wait)."""
        return status_of(await self._dreams.wait(validate_id(dream_id, "dream")))
