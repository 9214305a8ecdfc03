"""Dream jobs: a whole profile re-organised into a candidate store, reviewed, then adopted.

A dream copies the profile (SQLite's backup API, consistent while the profile
serves) to ``<profile dir>/dreams/<id>.db`` and works on the copy in steps; each
step's changes and the step's name commit together in the copy, so a dream that
stops (the profile hibernated, the process died) resumes after its last
completed step. The profile's own file is written when a dream starts (its job
row) and when it ends (adopted, discarded, cancelled or failed), never between.

Adopting applies the recorded changes to the profile in one transaction under
its write lock, with one ``dream_adopt`` ledger entry. Writes that arrived
during the dream are already in the profile and stay: a change whose memories
they superseded or forgot is skipped (the newer write wins), every other change
applies. Old memories are superseded or retired, never deleted, so their
history stays one call away.
"""

import asyncio
import contextlib
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import msgspec

from raymem.config import DreamSettings
from raymem.errors import DreamAlreadyOpen, DreamNotFound, DreamStateConflict
from raymem.models.chat import ChatModel
from raymem.pipelines.dream import model as dream_model
from raymem.pipelines.dream import rules as dream_rules
from raymem.pipelines.dream.items import EmbedFn, Item, load_items
from raymem.store import ProfileStore, to_db_time, utc_now
from raymem.store import dreams as jobs
from raymem.store.connection import open_sync
from raymem.store.dreams import Adopted, Change, DreamRow, DreamState
from raymem.store.search import current
from raymem.store.writer import fetch

log = logging.getLogger(__name__)

#: A dream's steps, in order; a job row's ``step`` is the last one completed.
QUEUED = "queued"
STEPS = ("copy", "vectors", "evidence", "filler", "merge", "contradictions", "stale", "insights")
VECTOR_BATCH = 256
#: The count each action adds to: memories merged away, replaced, retired; insights added.
COUNTED = {"merge": "merged", "replace": "replaced", "retire": "retired", "insight": "insights"}


def affected(change: Change) -> int:
    """How many memories a change ends (merged away, replaced, retired), or adds (an insight)."""
    if change.action == "insight":
        return 1
    return sum(memory_id != change.kept for memory_id in change.memory_ids)


def steps_done(dream: DreamRow) -> int:
    """How many of the ``STEPS`` a dream has completed."""
    return 0 if dream.step == QUEUED else STEPS.index(dream.step) + 1


class Dreams:
    """The dreams of one profile: start, run (or resume), inspect, adopt, discard, cancel.

    Args:
        store: the profile's store.
        settings: the similarity gates, decay and bounds (``[dreams]``).
        embed: texts -> unit vectors, for memories still without one.
        model: rewrites merged statements and proposes insights; None: rules only.
        max_tokens: a model answer's length bound.
        clock: the time now (tests pass a fixed one).
    """

    def __init__(
        self,
        store: ProfileStore,
        settings: DreamSettings,
        *,
        embed: EmbedFn | None = None,
        model: ChatModel | None = None,
        max_tokens: int = 1024,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.store, self.settings = store, settings
        self.embed, self.model, self.max_tokens, self.clock = embed, model, max_tokens, clock
        self._lock = asyncio.Lock()  # one of start / adopt / discard / cancel at a time
        self._tasks: dict[str, asyncio.Task[DreamRow]] = {}
        self._running: dict[str, DreamRow] = {}  # progress of the dreams this process runs

    def _now(self) -> str:
        return to_db_time(self.clock())

    def candidate(self, dream_id: str) -> Path:
        return jobs.candidate_path(self.store.path, dream_id)

    @property
    def busy(self) -> bool:
        """Whether a dream is running in this process."""
        return any(not task.done() for task in self._tasks.values())

    # ------------------------------------------------------------ lifecycle

    async def start(self, *, instructions: str = "", max_sessions: int | None = None) -> DreamRow:
        """Record a new dream and run it in the background.

        Raises:
            DreamAlreadyOpen: another dream is running or waits for review.
        """
        bound = self.settings.max_sessions
        async with self._lock:
            async with self.store.write() as writer:
                found = await jobs.open_dream(writer.conn)
                if found is None:
                    dream = DreamRow(
                        id=uuid.uuid4().hex,
                        state="running",
                        step=QUEUED,
                        instructions=instructions,
                        max_sessions=min(max_sessions or bound, bound),
                        base_seq=0,
                        counts={},
                        started_at=self._now(),
                    )
                    await jobs.save_dream(writer.conn, dream)
            if found is not None:
                raise DreamAlreadyOpen(found.id, (await self.status(found.id)).state)
            self._launch(dream.id)
            return dream

    def _launch(self, dream_id: str) -> None:
        self._tasks[dream_id] = asyncio.create_task(self.run(dream_id))

    async def wait(self, dream_id: str) -> DreamRow:
        """Wait for a dream this process runs to stop; its state then."""
        task = self._tasks.get(dream_id)
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)
        return await self.status(dream_id)

    async def recover(self) -> DreamRow | None:
        """After activation: resume the dream that was running when the profile stopped.

        It goes on after the last step its candidate recorded; with no usable
        candidate (the copy was cut short, or the profile was restored elsewhere
        from a snapshot) it starts again from a fresh copy of the profile, which
        is what a new dream would read. Returns the open dream, if any.
        """
        dream = await jobs.open_dream(self.store.reader)
        if dream is not None and dream.state == "running" and dream.id not in self._tasks:
            self._launch(dream.id)
        return dream

    # ------------------------------------------------------------------ run

    async def run(self, dream_id: str) -> DreamRow:
        """Run a dream from after its last completed step to ready; a failure marks it failed."""
        dream = await self._live(dream_id)
        candidate: ProfileStore | None = None
        try:
            candidate, dream = await self._open_candidate(dream)
            if dream.state == "ready":  # it finished before the profile stopped
                return dream
            self._running[dream_id] = dream
            for step in STEPS[steps_done(dream) :]:
                dream = await self._step(candidate, dream, step)
                self._running[dream_id] = dream
            memories = (await fetch(candidate.reader, _CURRENT_COUNT))[0][0]
            dream = msgspec.structs.replace(
                dream,
                state="ready",
                finished_at=self._now(),
                counts={**dream.counts, "memories_after": memories},
            )
            async with candidate.write() as writer:
                await jobs.save_dream(writer.conn, dream)
            return dream
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("dream %s of %s failed", dream_id, self.store.path)
            if candidate is not None:
                await candidate.close()
                candidate = None
            return await self._fail(dream, f"{type(exc).__name__}: {exc}")
        finally:
            self._running.pop(dream_id, None)
            if candidate is not None:
                await candidate.close()

    async def _open_candidate(self, dream: DreamRow) -> tuple[ProfileStore, DreamRow]:
        """The dream's candidate store: resumed where a copy holds its progress, else copied now."""
        path = self.candidate(dream.id)
        resumed = await self._candidate_row(dream.id)
        if resumed is not None and resumed.step != QUEUED:
            return await ProfileStore.open(path, dim=self.store.dim), resumed
        await _thread_to_its_end(jobs.copy_profile, self.store.path, path)
        candidate = await ProfileStore.open(path, dim=self.store.dim)
        try:
            counts = await self._reading(candidate, dream)
            dream = msgspec.structs.replace(
                dream, step="copy", base_seq=await candidate.reads.ledger_seq(), counts=counts
            )
            async with candidate.write() as writer:
                await writer.conn.execute(
                    "DELETE FROM dream_changes WHERE dream_id = ?", (dream.id,)
                )
                await jobs.save_dream(writer.conn, dream)
        except BaseException:
            await candidate.close()
            raise
        return candidate, dream

    async def _reading(self, candidate: ProfileStore, dream: DreamRow) -> dict[str, int]:
        memories = (await fetch(candidate.reader, _CURRENT_COUNT))[0][0]
        sessions = len(await self._recent_sessions(candidate, dream))
        return {"memories": memories, "sessions": sessions}

    @staticmethod
    async def _recent_sessions(candidate: ProfileStore, dream: DreamRow) -> list[str]:
        rows = await fetch(
            candidate.reader,
            "SELECT id FROM sessions ORDER BY started_at DESC LIMIT ?",
            (dream.max_sessions,),
        )
        return [row[0] for row in rows]

    async def _step(self, candidate: ProfileStore, dream: DreamRow, step: str) -> DreamRow:
        """Run one step on the candidate and commit its changes with the step's name."""
        if step == "vectors":
            await self._vectorise(candidate)
            changes: list[Change] = []
        else:
            items = await load_items(candidate)
            changes = await self._changes(candidate, dream, step, items)
        at = self._now()
        counts = Counter(dream.counts)
        for change in changes:
            counts[COUNTED[change.action]] += affected(change)
        counts["changes"] += len(changes)
        dream = msgspec.structs.replace(dream, step=step, counts=dict(counts))
        async with candidate.write() as writer:
            for change in changes:
                await jobs.apply_change(writer, change, at)
            await jobs.record_changes(writer.conn, dream.id, changes)
            await jobs.save_dream(writer.conn, dream)
        return dream

    async def _changes(
        self, candidate: ProfileStore, dream: DreamRow, step: str, items: list[Item]
    ) -> list[Change]:
        settings = self.settings
        if step == "evidence":
            return dream_rules.lost_evidence(items)
        if step == "filler":
            return dream_rules.no_fact(items) if settings.retire_no_fact else []
        if step == "merge":
            merges = await asyncio.to_thread(dream_rules.merges, items, settings.merge_similarity)
            return await self._rewritten(merges, items)
        if step == "contradictions":
            return await asyncio.to_thread(
                dream_rules.contradictions, items, settings.contradiction_similarity
            )
        if step == "stale":
            return dream_rules.stale(
                items, self.clock(), settings.stale_half_life_days, settings.stale_below
            )
        assert step == "insights", step
        if self.model is None:
            return []
        try:
            return await dream_model.insights(
                self.model,
                items,
                sessions=await self._recent_sessions(candidate, dream),
                instructions=dream.instructions,
                budget_chars=settings.model_prompt_chars,
                limit=settings.max_insights,
                max_tokens=self.max_tokens,
                now=self.clock(),
            )
        except Exception as exc:  # a model that cannot answer leaves the dream to the rules
            log.warning("dream %s: no insights from the model: %s", dream.id, exc)
            return []

    async def _rewritten(self, merges: list[Change], items: Sequence[Item]) -> list[Change]:
        """Merges with the statement the model wrote for each; the rules' where it cannot."""
        if self.model is None:
            return merges
        by_id = {item.id: item for item in items}
        out = []
        for change in merges:
            members = [by_id[memory_id] for memory_id in change.memory_ids]
            try:
                out.append(
                    await dream_model.rewrite_merge(self.model, change, members, self.clock())
                )
            except Exception as exc:  # a malformed answer, a lost value, a dead endpoint
                log.warning("dream: keeping the best-supported statement of a merge: %s", exc)
                out.append(change)
        return out

    async def _vectorise(self, candidate: ProfileStore) -> None:
        """Embed the candidate's current memories that have no vector yet (tasks get none)."""
        if self.embed is None:
            return
        while pending := await candidate.reads.pending_vectors(
            "memory_vectors", limit=VECTOR_BATCH
        ):
            vectors = await self.embed([text for _, text in pending])
            async with candidate.write() as writer:
                await writer.set_vectors(
                    "memory_vectors", [(seq, vectors[i]) for i, (seq, _) in enumerate(pending)]
                )

    # --------------------------------------------------------------- review

    async def status(self, dream_id: str) -> DreamRow:
        """A dream's state, step and counts.

        Raises:
            DreamNotFound: the profile has no dream of this id.
        """
        dream = await self._live(dream_id)
        if dream.state != "running":
            return dream
        if dream_id in self._running:
            return self._running[dream_id]
        return await self._candidate_row(dream_id) or dream

    async def list_dreams(self, *, limit: int = 20) -> list[DreamRow]:
        """The latest dreams, newest first."""
        return [
            await self.status(dream.id) if dream.state == "running" else dream
            for dream in await jobs.list_dreams(self.store.reader, limit=limit)
        ]

    async def diff(self, dream_id: str) -> tuple[DreamRow, list[Change]]:
        """Every change a ready (or adopted) dream makes, in order.

        Raises:
            DreamNotFound: no such dream.
            DreamStateConflict: it is still running, or was discarded, cancelled or failed.
        """
        dream = await self.status(dream_id)
        if dream.state == "adopted":
            return dream, await jobs.read_changes(self.store.reader, dream_id)
        if dream.state != "ready":
            raise DreamStateConflict(dream_id, dream.state, "reviewed")
        return dream, await asyncio.to_thread(self._read_candidate_changes, dream_id)

    def _read_candidate_changes(self, dream_id: str) -> list[Change]:
        conn = open_sync(self.candidate(dream_id))
        try:
            rows = conn.execute(
                "SELECT change FROM dream_changes WHERE dream_id = ? ORDER BY number", (dream_id,)
            ).fetchall()
        finally:
            conn.close()
        return [msgspec.json.decode(row[0], type=Change) for row in rows]

    async def adopt(self, dream_id: str) -> tuple[DreamRow, Adopted]:
        """Apply a ready dream's changes to the profile in one transaction; delete the candidate.

        Raises:
            DreamNotFound: no such dream.
            DreamStateConflict: it is not ready.
        """
        async with self._lock:
            dream, changes = await self.diff(dream_id)
            if dream.state != "ready":
                raise DreamStateConflict(dream_id, dream.state, "adopted")
            async with self.store.write() as writer:
                adopted = await jobs.adopt(writer, dream, changes, self._now())
            jobs.remove_files(self.candidate(dream_id))
            return await self._live(dream_id), adopted

    async def discard(self, dream_id: str) -> DreamRow:
        """Delete a ready dream's candidate; the profile stays as it is.

        Raises:
            DreamNotFound: no such dream.
            DreamStateConflict: it is not ready (cancel a running one).
        """
        async with self._lock:
            dream = await self.status(dream_id)
            if dream.state != "ready":
                raise DreamStateConflict(dream_id, dream.state, "discarded")
            return await self._close(dream, "discarded")

    async def cancel(self, dream_id: str) -> DreamRow:
        """Stop a running dream and delete its candidate.

        Raises:
            DreamNotFound: no such dream.
            DreamStateConflict: it is not running.
        """
        async with self._lock:
            dream = await self.status(dream_id)
            if dream.state != "running":
                raise DreamStateConflict(dream_id, dream.state, "cancelled")
            task = self._tasks.pop(dream_id, None)
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            return await self._close(dream, "cancelled")

    async def end_open(self, reason: str) -> DreamRow | None:
        """End the open dream without adopting it: cancel a running one, discard a ready one.

        An erasure calls this once it committed: the candidate copied the profile
        before, text and all, and adopting it would bring erased memories back. Its
        row keeps ``reason`` as its error. Returns the dream ended, None when none was open.
        """
        async with self._lock:
            found = await jobs.open_dream(self.store.reader)
            ended = None
            if found is not None:
                dream = msgspec.structs.replace(await self.status(found.id), error=reason)
                task = self._tasks.pop(dream.id, None)
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                state: DreamState = "cancelled" if dream.state == "running" else "discarded"
                ended = await self._close(dream, state)
            # No dream is open now: a candidate left behind (a crash) is a stale copy too.
            for path in jobs.candidate_dir(self.store.path).glob("*.db"):
                jobs.remove_files(path)
            return ended

    async def close(self) -> None:
        """Stop the dreams running here (hibernation): each resumes on the next activation."""
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    # -------------------------------------------------------------- helpers

    async def _live(self, dream_id: str) -> DreamRow:
        dream = await jobs.get_dream(self.store.reader, dream_id)
        if dream is None:
            raise DreamNotFound(dream_id)
        return dream

    async def _candidate_row(self, dream_id: str) -> DreamRow | None:
        """The dream's row as its candidate holds it (None: no readable candidate)."""
        path = self.candidate(dream_id)
        if not path.exists():
            return None

        def read() -> DreamRow | None:
            conn = open_sync(path)
            try:
                row = conn.execute(f"{jobs.SELECT_DREAMS} WHERE id = ?", (dream_id,)).fetchone()
                return None if row is None else jobs.dream_from_row(row)
            finally:
                conn.close()

        try:
            return await asyncio.to_thread(read)
        except Exception:  # a copy cut short: the dream starts again from the copy
            log.warning("dream %s: its candidate cannot be read", dream_id, exc_info=True)
            return None

    async def _close(self, dream: DreamRow, state: DreamState) -> DreamRow:
        """End a dream without adopting it: its candidate goes, its row says why."""
        jobs.remove_files(self.candidate(dream.id))
        closed = msgspec.structs.replace(dream, state=state, finished_at=self._now())
        async with self.store.write() as writer:
            await jobs.save_dream(writer.conn, closed)
        return closed

    async def _fail(self, dream: DreamRow, error: str) -> DreamRow:
        failed = msgspec.structs.replace(dream, error=error)
        return await self._close(failed, "failed")


async def _thread_to_its_end(function: Callable[..., None], *args: object) -> None:
    """Run blocking file work in a thread; cancelled, wait for the thread to end first.

    A thread cannot be stopped: a copy still running after a dream was cancelled
    (its profile deleted) would write a candidate into a folder already removed.
    """
    work = asyncio.ensure_future(asyncio.to_thread(function, *args))
    try:
        await asyncio.shield(work)
    except asyncio.CancelledError:
        await asyncio.wait([work])
        raise


_CURRENT_COUNT = f"SELECT count(*) FROM memories WHERE {current()}"
