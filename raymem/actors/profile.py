"""ProfileActor: the single owner and writer of one profile's SQLite file.

Durable-object style: activated by name on first use, hibernates (closes its
store and exits) after a configured idle time, and is re-activated by the next
call. Calls that arrive while it hibernates raise ``ProfileClosing``, which
callers retry against a fresh activation.
"""

import asyncio
import functools
import logging
import os
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import numpy as np
import ray
from ray import serve

from raymem import export
from raymem.actors.durability import Durability, OldCopiesRemain
from raymem.actors.live import live_profiles
from raymem.actors.pools import EMBEDDER_DEPLOYMENT, GENERATOR_DEPLOYMENT, pool_generator
from raymem.config import Settings
from raymem.errors import ErasureIncomplete, MemoryNotFound, ProfileClosing, SessionNotFound
from raymem.export.snapshot import snapshot_key
from raymem.models.generator import Generator, make_generator
from raymem.pipelines import ingest as ingest_pipeline
from raymem.pipelines.classify import TypePrototypes
from raymem.pipelines.recall import Recaller
from raymem.store import ProfileStore, erase, to_db_time, utc_now
from raymem.types import (
    AppendRequest,
    ArchiveCounts,
    ImportResult,
    IngestRequest,
    IngestResult,
    MemoryCounts,
    MemoryPage,
    MemoryWithHistory,
    MessageIn,
    MessageList,
    ProfileInfo,
    RecallRequest,
    RecallResult,
    RememberRequest,
    SessionDeleted,
    SessionEnded,
    SessionList,
    SnapshotResult,
    StoredMessage,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
VECTOR_BATCH = 128


def profile_path(settings: Settings, tenant: str, profile: str) -> Path:
    """Where a profile's SQLite file lives: ``<data_dir>/<tenant>/<profile>/profile.db``."""
    return Path(settings.data_dir) / tenant / profile / "profile.db"


def entry(method: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Wrap a public actor method: refuse it while closing, count it, keep the actor awake."""

    @functools.wraps(method)
    async def wrapper(self: "ProfileActor", *args: Any, **kwargs: Any) -> T:
        if self._closing:
            raise ProfileClosing(self.name)
        self._inflight += 1
        self._last_used = time.monotonic()
        try:
            await self._ensure_open()
            return await method(self, *args, **kwargs)
        finally:
            self._inflight -= 1
            self._last_used = time.monotonic()

    return wrapper


class ProfileActor:
    """One profile: its store, recall state, background vectorisation and idle timer."""

    def __init__(self, tenant: str, profile: str, settings: Settings) -> None:
        self.tenant, self.profile, self.settings = tenant, profile, settings
        self.name = f"{tenant}/{profile}"
        self.path = profile_path(settings, tenant, profile)
        self._store: ProfileStore | None = None
        self._durability = Durability(settings, tenant, profile)
        self._recaller: Recaller | None = None
        self._open_lock = asyncio.Lock()
        self._embedder: Any = None
        self._generator: Generator | None = None
        self._prototypes = TypePrototypes()  # embedded on the first ingest that needs them
        self._vectoriser: asyncio.Task[None] | None = None
        self._idle_watch: asyncio.Task[None] | None = None
        self._retention: asyncio.Task[None] | None = None
        self._warming: asyncio.Task[None] | None = None
        self._live: Any = None  # this node's LiveProfiles tracker
        self._closing = False
        self._inflight = 0
        self._last_used = time.monotonic()

    # ------------------------------------------------------------- lifecycle

    async def _ensure_open(self) -> None:
        if self._store is not None:
            return
        async with self._open_lock:
            if self._store is not None:
                return
            self._embedder = serve.get_deployment_handle(
                EMBEDDER_DEPLOYMENT, app_name=self.settings.app_name
            )
            info = await self._embedder.info.remote()
            store = await self._durability.open(self.path, dim=info["dim"], embedder=info["name"])
            self._generator = self._make_generator()
            self._recaller = Recaller(store, self.settings.recall, self._embed)
            self._store = store
            self._live = live_profiles(self.settings.namespace, self.settings.profiles.max_live)
            await self._report_use()
            self._idle_watch = asyncio.create_task(self._watch_idle())
            self._retention = asyncio.create_task(self._apply_retention())
            self._warming = asyncio.create_task(self._warm_vector_indexes(store))
            self._vectorise_soon()  # catch up on anything left unembedded by a crash

    def _models(self) -> dict[str, Any]:
        """The generator, embedding function and type prototypes the ingest pipeline uses."""
        models = self.settings.models
        return {
            "generator": self._generator,
            "embed": self._embed if models.reconcile_by_similarity else None,
            "prototypes": self._prototypes,
        }

    def _make_generator(self) -> Generator | None:
        """None for the embedded rules (run in-process); a model backend otherwise."""
        models = self.settings.models
        if models.generator == "rules":
            return None
        if models.generator == "openai":
            return make_generator(models)  # the endpoint is called from here directly
        handle = serve.get_deployment_handle(GENERATOR_DEPLOYMENT, app_name=self.settings.app_name)
        return pool_generator(handle, models, profile=self.name)

    async def _embed(self, texts: list[str]) -> np.ndarray:
        return await self._embedder.embed.remote(texts)

    async def _report_use(self) -> None:
        """Tell the node's tracker when this profile was last used (it bounds live actors)."""
        me = ray.get_runtime_context().current_actor
        try:
            await self._live.touch.remote(self.name, me, time.monotonic() - self._last_used)
        except Exception:  # the bound is best effort; serving goes on
            log.warning(
                "profile %s cannot reach the live-profile tracker", self.name, exc_info=True
            )
            self._live = live_profiles(self.settings.namespace, self.settings.profiles.max_live)

    async def hibernate(self) -> None:
        """Asked by the tracker to make room: hibernate as soon as no call is in flight."""
        self._last_used = float("-inf")

    async def _watch_idle(self) -> None:
        timeout = self.settings.profiles.idle_timeout_s
        while True:
            await asyncio.sleep(min(max(timeout / 4, 0.05), 5.0))
            if self._last_used != float("-inf"):
                await self._report_use()
            idle = time.monotonic() - self._last_used
            busy = self._vectoriser is not None and not self._vectoriser.done()
            if idle >= timeout and self._inflight == 0 and not busy:
                await self._hibernate()
                return

    async def _warm_vector_indexes(self, store: ProfileStore) -> None:
        """Read the vector indexes into memory now rather than on the first recall."""
        try:
            await store.warm_vector_indexes()
        except Exception:  # the first search reads them again, and reports what fails
            log.exception("profile %s: warming the vector indexes failed", self.name)

    async def _apply_retention(self) -> None:
        """Purge raw turns past the retention period now and then; memories stay."""
        days = self.settings.profiles.retention_days
        while days > 0 and not self._closing:
            try:
                await self._purge_older_than(days)
            except Exception:
                log.exception("retention purge of profile %s failed", self.name)
            await asyncio.sleep(self.settings.profiles.retention_check_s)

    async def _purge_older_than(self, days: float) -> int:
        """Erase raw turns received more than ``days`` ago; returns how many."""
        assert self._store is not None
        cutoff = to_db_time(utc_now() - timedelta(days=days))
        async with self._store.write() as writer:
            purged = await erase.erase_turns_before(writer, cutoff)
        if purged:
            log.info("profile %s: erased %d turns older than %s", self.name, purged, cutoff)
            await self._durability.after_write()
            await self._finish_erasure(f"{purged} turns older than {cutoff}")
        return purged

    async def _hibernate(self) -> None:
        self._closing = True
        try:
            await self._durability.close()
        except Exception:  # object storage unreachable: stay awake, so nothing is lost
            log.exception("profile %s cannot hibernate yet", self.name)
            self._closing = False
            try:
                await self._durability.resume()
            except Exception:
                log.exception(
                    "profile %s: shipping could not restart; retried on next write", self.name
                )
            self._idle_watch = asyncio.create_task(self._watch_idle())
            return
        if self._store is not None:
            await self._store.close()
        self._leave_tracker()
        log.info(
            "profile %s hibernates after %.0f s idle", self.name, time.monotonic() - self._last_used
        )
        self._exit_soon()

    def _leave_tracker(self) -> None:
        if self._live is not None:
            self._live.leave.remote(self.name)

    def _exit_soon(self) -> None:
        """Kill this actor's process right after the current reply is sent.

        The store is closed first, so nothing is lost; calls queued behind this one
        fail with ActorDiedError without having run, and callers retry them against
        a fresh activation. (A graceful ``__ray_terminate__`` sent to oneself left
        the name taken for seconds here.)
        """
        me = ray.get_runtime_context().current_actor
        asyncio.get_running_loop().call_later(0.05, lambda: ray.kill(me, no_restart=True))

    # ---------------------------------------------------------- vectorising

    async def _after_write(self) -> None:
        """Every committed write: embed what is new, and ship the ledger as durability says."""
        self._vectorise_soon()
        await self._durability.after_write()

    def _vectorise_soon(self) -> None:
        if self._vectoriser is None or self._vectoriser.done():
            self._vectoriser = asyncio.create_task(self._vectorise_pending())

    async def _vectorise_pending(self) -> None:
        """Embed every memory and message still without a vector, in batches."""
        store = self._store
        try:
            while store is not None and not self._closing:
                did_work = False
                for table in ("memory_vectors", "message_vectors"):
                    pending = await store.reads.pending_vectors(table, limit=VECTOR_BATCH)
                    if pending:
                        texts = [text for _, text in pending]
                        vectors = await self._embedder.embed_background.remote(texts)
                        async with store.write() as writer:
                            await writer.set_vectors(
                                table, [(seq, vectors[i]) for i, (seq, _) in enumerate(pending)]
                            )
                        did_work = True
                if not did_work:
                    return
        except Exception:  # retried on the next write or activation; the rows stay pending
            log.exception("vectorising profile %s failed", self.name)

    # ------------------------------------------------------------ operations

    @entry
    async def ping(self) -> str:
        return self.name

    @entry
    async def wait_vectorised(self) -> None:
        """Return once every pending memory and message has its vector (tests, benchmarks)."""
        while self._vectoriser is not None and not self._vectoriser.done():
            await asyncio.shield(self._vectoriser)
        await self._after_write()
        assert self._vectoriser is not None
        await asyncio.shield(self._vectoriser)

    @entry
    async def ingest(self, request: IngestRequest) -> IngestResult:
        assert self._store is not None
        result = await ingest_pipeline.ingest(
            self._store, request.session_id, request.messages, **self._models()
        )
        await self._after_write()
        return result

    @entry
    async def remember(self, request: RememberRequest, memory_id: str) -> MemoryWithHistory:
        assert self._store is not None
        try:  # a retried call: the memory was already written under this id
            await self._store.reads.get_memory(memory_id)
            held_by = memory_id
        except MemoryNotFound:
            held_by, _ = await ingest_pipeline.remember(
                self._store,
                request.content,
                memory_id=memory_id,
                session_id=request.session_id,
                memory_type=request.type,
                importance=request.importance,
                **self._models(),
            )
        await self._after_write()
        return await self._with_history(held_by)

    @entry
    async def recall(
        self, request: RecallRequest, query_vector: np.ndarray | None = None
    ) -> RecallResult:
        """Recall; ``query_vector``, when the caller has embedded the query already.

        Pass the vector as a numpy array: Ray pickles an array as one buffer, while a
        list of 384 floats took 1.4 ms more per call here.
        """
        assert self._recaller is not None
        vector = None if query_vector is None else np.asarray(query_vector, dtype=np.float32)
        return await self._recaller.recall(request, query_vector=vector)

    @entry
    async def list_memories(
        self,
        *,
        types: list[str] | None,
        session_id: str | None,
        include_superseded: bool,
        limit: int,
        before_seq: int | None,
    ) -> MemoryPage:
        assert self._store is not None
        memories, next_seq = await self._store.reads.list_memories(
            types=types,
            session_id=session_id,
            include_superseded=include_superseded,
            limit=limit,
            before_seq=before_seq,
        )
        return MemoryPage(
            memories=memories, next_cursor=None if next_seq is None else str(next_seq)
        )

    @entry
    async def get_memory(self, memory_id: str) -> MemoryWithHistory:
        return await self._with_history(memory_id)

    async def _with_history(self, memory_id: str) -> MemoryWithHistory:
        assert self._store is not None
        memory = await self._store.reads.get_memory(memory_id)
        history = await self._store.reads.history(memory_id)
        return MemoryWithHistory(
            **{f: getattr(memory, f) for f in memory.__struct_fields__}, history=history
        )

    @entry
    async def forget(self, memory_id: str) -> None:
        assert self._store is not None
        async with self._store.write() as writer:
            if not await writer.forget(memory_id):
                raise MemoryNotFound(memory_id)
        await self._after_write()

    @entry
    async def append_message(self, session_id: str, request: AppendRequest) -> StoredMessage:
        assert self._store is not None
        turn = MessageIn(role=request.role, content=request.content, created_at=request.created_at)
        rows = ingest_pipeline.build_messages(session_id, [turn])
        async with self._store.write() as writer:
            await writer.insert_messages(rows)  # content-addressed: a repeat is a no-op
        await self._after_write()
        page = await self._store.reads.session_messages(session_id)
        return next(message for _, message in page if message.id == rows[0].id)

    @entry
    async def last_messages(self, session_id: str, last: int | None) -> MessageList:
        assert self._store is not None
        await self._store.reads.get_session(session_id)  # 404 for an unknown session
        rows = await self._store.reads.session_messages(session_id, last=last)
        return MessageList(messages=[message for _, message in rows])

    @entry
    async def list_sessions(self) -> SessionList:
        assert self._store is not None
        return SessionList(sessions=await self._store.reads.list_sessions())

    @entry
    async def end_session(self, session_id: str) -> SessionEnded:
        assert self._store is not None
        await self._store.reads.get_session(session_id)
        reconciled = await ingest_pipeline.consolidate_session(
            self._store, session_id, **self._models()
        )
        await self._after_write()

        return SessionEnded(
            session=await self._store.reads.get_session(session_id),
            memories=MemoryCounts(
                added=len(reconciled.added),
                superseded=reconciled.superseded,
                duplicates=reconciled.duplicates,
            ),
            memory_ids=reconciled.added,
        )

    @entry
    async def purge_older_than(self, days: float) -> int:
        """Apply retention now with a period of ``days`` (operators, tests)."""
        return await self._purge_older_than(days)

    @entry
    async def delete_session(self, session_id: str) -> SessionDeleted:
        """Erase a session: its turns, its memories and the memories drawn from its turns.

        A retry after ``ErasureIncomplete`` finishes removing the old copies, then
        answers ``SessionNotFound``: the session is gone.
        """
        assert self._store is not None
        async with self._store.write() as writer:
            erased = await erase.erase_session(writer, session_id, at=to_db_time(utc_now()))
        if not erased.erasure.is_empty():
            await self._after_write()
        await self._finish_erasure(f"Session {session_id!r}")
        if erased.erasure.is_empty():
            raise SessionNotFound(session_id)
        return SessionDeleted(
            session_id=session_id,
            messages_deleted=len(erased.erasure.messages),
            memories_forgotten=erased.memories_forgotten,
            memories_erased=len(erased.erasure.memories),
        )

    async def _finish_erasure(self, what: str) -> None:
        """Remove the copies made before an erasure: the file's log, object storage.

        Raises:
            ErasureIncomplete: some remain; the same call again finishes the removal.
        """
        try:
            await self._durability.remove_erased_copies()
        except OldCopiesRemain as exc:
            raise ErasureIncomplete(what, str(exc)) from exc

    @entry
    async def info(self) -> ProfileInfo:
        assert self._store is not None
        return await self._store.reads.info(self.profile)

    @entry
    async def snapshot(self) -> SnapshotResult:
        manifest = await self._durability.snapshot()
        assert self._durability.object_store is not None
        key = snapshot_key(
            self._durability.object_store, self.tenant, self.profile, manifest.ledger_seq
        )
        return SnapshotResult(key=key, ledger_seq=manifest.ledger_seq)

    @entry
    async def import_archive(self, archive: bytes) -> ImportResult:
        """Load a JSON Lines archive (gzipped or not) into this new or empty profile."""
        assert self._store is not None
        try:
            header = await export.import_archive(self._store, archive, profile=self.profile)
        except Exception:
            await self._discard_if_empty()  # a failed import into a new profile leaves none
            raise
        await self._after_write()
        counts = ArchiveCounts(**msgspec.structs.asdict(header.counts))
        return ImportResult(profile=self.profile, ledger_seq=header.ledger_seq, counts=counts)

    async def export_chunks(self) -> AsyncIterator[bytes]:
        """The profile as JSON Lines chunks, one consistent point in time (streamed by callers)."""
        if self._closing:
            raise ProfileClosing(self.name)
        self._inflight += 1  # an export in progress keeps the profile awake
        try:
            await self._ensure_open()
            assert self._store is not None
            async for chunk in export.iter_archive(self._store, profile=self.profile):
                self._last_used = time.monotonic()
                yield chunk
        finally:
            self._inflight -= 1

    async def process_stats(self) -> dict[str, int]:
        """This actor's process id and resident memory, now and at its peak (benchmarks)."""
        import resource

        with open("/proc/self/statm") as statm:
            rss_pages = int(statm.read().split()[1])
        return {
            "pid": os.getpid(),
            "rss_bytes": rss_pages * os.sysconf("SC_PAGE_SIZE"),
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        }

    async def _discard_if_empty(self) -> None:
        assert self._store is not None
        async with self._store.write() as writer:
            empty = await writer.is_empty()  # nothing at all, not even a ledger entry
        if empty:
            log.info("profile %s: discarding the empty profile of a failed import", self.name)
            await self.destroy()

    async def destroy(self) -> None:
        """Delete the profile's data and exit; the name is free for a new profile."""
        self._closing = True
        if self._vectoriser is not None:
            self._vectoriser.cancel()
        await self._durability.destroy()  # stops shipping and snapshots first
        if self._store is not None:
            await self._store.close()
        self._leave_tracker()
        shutil.rmtree(self.path.parent, ignore_errors=True)
        self._exit_soon()
