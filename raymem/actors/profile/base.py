"""A profile's lifecycle and background work, shared by every operation.

Durable-object style: activated by name on first use, the profile opens its
store on its first call, hibernates (closes its store and leaves its host)
after a configured idle time, and is re-activated by the next call. Calls that
arrive while it hibernates raise ``ProfileClosing``, which callers retry
against a fresh activation.

A profile is not a Ray actor of its own: it runs inside a ``ProfileHost``
(``actors/host.py``), a long-lived actor holding many open profiles, which
constructs it under the catalog's lease (one writer per profile) and is told
through ``HostLink`` when it has closed.

``ProfileBase`` holds what every operation shares: the store, the model
handles, the idle timer and the background tasks (vectorising new rows,
retention, warming the vector indexes). The operations live in mixins, one
module per area (``memories``, ``sessions``, ``archives``), put together in
``actor.ProfileActor``; a new subsystem adds a mixin of its own.
"""

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import numpy as np

from raymem import metrics
from raymem.actors.catalog import COUNTS_REPORT_DELAY_S, CatalogClient
from raymem.actors.durability import Durability, OldCopiesRemain
from raymem.actors.layout import profile_path
from raymem.actors.pools import (
    GENERATOR_DEPLOYMENT,
    PoolEmbedder,
    pool_generator,
    pool_handle,
)
from raymem.config import Settings
from raymem.errors import ErasureIncomplete, ProfileClosing
from raymem.models.chat import ChatModel
from raymem.pipelines import procedural
from raymem.pipelines.classify import TypePrototypes
from raymem.pipelines.context.assemble import SlowSections
from raymem.pipelines.generators import Generator, LLMGenerator, make_generator
from raymem.pipelines.procedural.sequences import IntentSummariser
from raymem.pipelines.procedural.summary import ChatSummariser
from raymem.pipelines.recall import Recaller
from raymem.pipelines.use import UseRecorder
from raymem.store import ProfileStore, erase, to_db_time, utc_now
from raymem.store.reads import PENDING_TABLES
from raymem.types import ProfileInfo, RecallResult

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")
Actor = TypeVar("Actor", bound="ProfileBase")

VECTOR_BATCH = 128  # rows embedded per background call
# The idle timer looks this many times per idle timeout, but at least every 5 s
# and at most every 50 ms.
IDLE_CHECKS_PER_TIMEOUT = 4
IDLE_CHECK_MIN_S = 0.05
IDLE_CHECK_MAX_S = 5.0
# Which memories recall returned is written at most this often, in one transaction,
# off the request path (ranking's prior and a dream's decay read it); hibernation
# writes what is left.
USE_FLUSH_S = 30.0


class HostLink(Protocol):
    """What a profile needs of the host it runs in."""

    @property
    def handle(self) -> Any:
        """The host's actor handle: the catalog asks it for the profile's current counts."""

    def closed(self, profile: "ProfileBase") -> None:
        """The profile has closed its store (hibernated or deleted): the host lets it go."""


def entry(
    method: Callable[Concatenate[Actor, P], Awaitable[T]],
) -> Callable[Concatenate[Actor, P], Awaitable[T]]:
    """Wrap a public operation: refuse it while closing, count it, keep the actor awake,
    and open the store first."""

    @functools.wraps(method)
    async def wrapper(self: Actor, /, *args: P.args, **kwargs: P.kwargs) -> T:
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


class ProfileBase:
    """One profile: its store, recall state, background vectorisation and idle timer."""

    def __init__(self, tenant: str, profile: str, settings: Settings, host: HostLink) -> None:
        self.tenant, self.profile, self.settings = tenant, profile, settings
        self.host = host
        self.name = f"{tenant}/{profile}"
        self.path = profile_path(settings, tenant, profile)
        self._store: ProfileStore | None = None
        self._durability = Durability(settings, tenant, profile)
        self._recaller: Recaller | None = None
        self._open_lock = asyncio.Lock()
        self._embedder = PoolEmbedder(settings.app_name, settings.models)
        self._generator: Generator | None = None
        self._prototypes = TypePrototypes()  # embedded on the first ingest that needs them
        self._slow_sections = SlowSections()  # context's core blocks and working memory
        self._uses = UseRecorder()
        self._use_flusher: asyncio.Task[None] | None = None
        self._vectoriser: asyncio.Task[None] | None = None
        self._idle_watch: asyncio.Task[None] | None = None
        self._retention: asyncio.Task[None] | None = None
        self._warming: asyncio.Task[None] | None = None
        self._catalog = CatalogClient(settings)
        self._catalog_lock = asyncio.Lock()  # one report at a time, in order
        self._catalog_done = False  # the last report (hibernation, deletion) was sent
        self._counts_changed = False
        self._counts_reporter: asyncio.Task[None] | None = None
        self._hibernate_asked = asyncio.Event()
        self._closing = False
        self._inflight = 0
        self._last_used = time.monotonic()

    @property
    def _open_store(self) -> ProfileStore:
        """The store; every ``entry`` opens it before the operation runs."""
        assert self._store is not None
        return self._store

    @property
    def _open_recaller(self) -> Recaller:
        assert self._recaller is not None
        return self._recaller

    # ------------------------------------------------------------- lifecycle

    async def _ensure_open(self) -> None:
        if self._store is not None:
            return
        async with self._open_lock:
            if self._store is not None:
                return
            started = time.perf_counter()
            info = await self._embedder.info()
            store = await self._durability.open(self.path, dim=info["dim"], embedder=info["name"])
            self._generator = self._make_generator()
            chat = self._generator.chat if isinstance(self._generator, LLMGenerator) else None
            self._recaller = Recaller(store, self.settings.recall, self._embed, chat)
            self._store = store
            metrics.ACTIVATIONS.inc()
            metrics.ACTIVATION_LATENCY.observe((time.perf_counter() - started) * 1000)
            await self._report_counts()  # listed, and known to exist, before the first answer
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

    def _intent_summariser(self) -> IntentSummariser | None:
        """The configured chat model as the writer of action sequences' intent summaries;
        None: the rules write them."""
        if isinstance(self._generator, LLMGenerator):
            return ChatSummariser(self._generator.chat, name=self._generator.name)
        return None

    def _make_generator(self) -> Generator | None:
        """None for the embedded rules (run in-process); a model backend otherwise."""
        models = self.settings.models
        if models.generator == "rules":
            return None
        if models.generator == "openai":
            return make_generator(models)  # the endpoint is called from here directly
        handle = pool_handle(GENERATOR_DEPLOYMENT, self.settings.app_name)
        return pool_generator(handle, models, profile=self.name)

    def _episode_model(self) -> tuple[ChatModel | None, str]:
        """What writes episodes: the configured model's chat and its name, or the rules."""
        if isinstance(self._generator, LLMGenerator):
            return self._generator.chat, self.settings.models.generator
        return None, "rules"

    async def _embed(self, texts: list[str]) -> np.ndarray:
        return await self._embedder.embed(texts)

    async def _embed_background(self, texts: list[str]) -> np.ndarray:
        """Embed at background priority: the requests being answered go first."""
        return await self._embedder.embed_background(texts)

    def hibernate_soon(self) -> None:
        """Hibernate as soon as no call is in flight (the host's bound, or a caller, asks)."""
        self._last_used = float("-inf")
        self._hibernate_asked.set()

    @property
    def asked_to_hibernate(self) -> bool:
        return self._last_used == float("-inf")

    @property
    def last_used(self) -> float:
        """When the last call ended (``time.monotonic``); the host's least recently used."""
        return self._last_used

    @property
    def closing(self) -> bool:
        return self._closing

    async def _watch_idle(self) -> None:
        timeout = self.settings.profiles.idle_timeout_s
        interval = min(max(timeout / IDLE_CHECKS_PER_TIMEOUT, IDLE_CHECK_MIN_S), IDLE_CHECK_MAX_S)
        while True:
            with contextlib.suppress(TimeoutError):  # asked to hibernate: look now
                await asyncio.wait_for(self._hibernate_asked.wait(), interval)
            self._hibernate_asked.clear()
            idle = time.monotonic() - self._last_used
            if idle >= timeout and self._inflight == 0 and not self._busy():
                await self._hibernate()
                return

    def _busy(self) -> bool:
        """Whether background work keeps the profile awake (a mixin may add its own)."""
        return self._vectoriser is not None and not self._vectoriser.done()

    async def _stop_work(self) -> None:
        """Stop background work for good: the profile is being deleted (a mixin may add its
        own, and must return only once its work has stopped touching the profile's files)."""
        if self._vectoriser is not None:
            self._vectoriser.cancel()

    async def _hibernate(self) -> None:
        self._closing = True
        await self._flush_use()
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
        await self._report_counts(last=True)  # listed with its counts while asleep
        if self._store is not None:
            await self._store.close()
        metrics.HIBERNATIONS.inc()
        log.info(
            "profile %s hibernates after %.0f s idle", self.name, time.monotonic() - self._last_used
        )
        self._leave_host()

    def _leave_host(self) -> None:
        """The store is closed: the host forgets this profile and gives its lease back.

        Calls that arrive from now on meet ``ProfileClosing`` (the ``entry`` check)
        and are retried by the caller against a fresh activation.
        """
        self._closing = True
        current = asyncio.current_task()
        for task in (self._retention, self._idle_watch, self._counts_reporter):
            if task is not None and task is not current:
                task.cancel()
        self.host.closed(self)

    # ------------------------------------------------------- background work

    async def _warm_vector_indexes(self, store: ProfileStore) -> None:
        """Read the vector indexes into memory now rather than on the first recall."""
        try:
            await store.warm_vector_indexes()
        except Exception:  # the first search reads them again, and reports what fails
            log.exception("profile %s: warming the vector indexes failed", self.name)

    async def _apply_retention(self) -> None:
        """Erase raw turns past the retention period now and then; memories stay."""
        days = self.settings.profiles.retention_days
        while days > 0 and not self._closing:
            try:
                await self._purge_older_than(days)
            except Exception:
                log.exception("retention purge of profile %s failed", self.name)
            await asyncio.sleep(self.settings.profiles.retention_check_s)

    async def _purge_older_than(self, days: float) -> int:
        """Erase raw turns received more than ``days`` ago; returns how many."""
        cutoff = to_db_time(utc_now() - timedelta(days=days))
        async with self._open_store.write() as writer:
            purged = await erase.erase_turns_before(writer, cutoff)
        if purged:
            log.info("profile %s: erased %d turns older than %s", self.name, purged, cutoff)
            await self._after_erasure()
            await self._finish_erasure(f"{purged} turns older than {cutoff}")
        return purged

    async def _finish_erasure(self, what: str) -> None:
        """Remove the copies made before an erasure: the file's log, object storage.

        Raises:
            ErasureIncomplete: some remain; the same call again finishes the removal
                (activation, each snapshot round and hibernation retry it meanwhile).
        """
        try:
            await self._durability.remove_erased_copies()
        except OldCopiesRemain as exc:
            raise ErasureIncomplete(what, str(exc)) from exc

    async def _after_erasure(self) -> None:
        """A committed erasure: as every write, and the copies of the profile made for
        work in progress (a dream's candidate) go."""
        await self._after_write()
        await self._end_copies()

    async def _end_copies(self) -> None:
        """Discard the working copies of the profile (a mixin that makes some says how)."""

    async def _after_write(self) -> None:
        """Every committed write: embed what is new, ship the ledger as durability says,
        and tell the catalog the new counts soon."""
        self._vectorise_soon()
        self._report_counts_soon()
        await self._durability.after_write()

    # ------------------------------------------------------------ the catalog

    def _report_counts_soon(self) -> None:
        """Report the counts within COUNTS_REPORT_DELAY_S: one report for a burst of writes."""
        self._counts_changed = True
        if self._counts_reporter is None or self._counts_reporter.done():
            self._counts_reporter = asyncio.create_task(self._report_changed_counts())

    async def _report_changed_counts(self) -> None:
        while self._counts_changed and not self._closing:
            await asyncio.sleep(COUNTS_REPORT_DELAY_S)
            self._counts_changed = False
            await self._report_counts()

    async def _report_counts(self, *, last: bool = False) -> None:
        """Send the catalog this profile's counts; ``last``: it hibernates, and says no more."""
        async with self._catalog_lock:
            if self._catalog_done:
                return
            self._catalog_done = last
            try:
                counts = await self._open_store.reads.info(self.profile)
                host = None if last else self.host.handle
                await self._catalog.report(self.tenant, self.profile, counts, host)
            except Exception:  # listing is best effort; the next report corrects it
                log.warning("profile %s cannot report to the catalog", self.name, exc_info=True)

    async def _leave_catalog(self) -> None:
        """The profile is deleted: it leaves the catalog, after any report in flight."""
        async with self._catalog_lock:
            self._catalog_done = True
            await self._catalog.forget(self.tenant, self.profile)

    def _note_use(self, result: RecallResult) -> None:
        """Count the memories a recall returned; they are written within ``USE_FLUSH_S``."""
        self._uses.note(result)
        if len(self._uses) and (self._use_flusher is None or self._use_flusher.done()):
            self._use_flusher = asyncio.create_task(self._flush_use_later())

    async def _flush_use_later(self) -> None:
        await asyncio.sleep(USE_FLUSH_S)
        if not self._closing and await self._flush_use():
            await self._after_write()

    async def _flush_use(self) -> int:
        """Write the memory use noted so far; how many memories (0 on failure: kept)."""
        if self._store is None:
            return 0
        try:
            return await self._uses.flush(self._store)
        except Exception:  # kept in memory for the next flush
            log.warning("profile %s: memory use not written yet", self.name, exc_info=True)
            return 0

    def _vectorise_soon(self) -> None:
        if self._vectoriser is None or self._vectoriser.done():
            self._vectoriser = asyncio.create_task(self._vectorise_pending())

    async def _vectorise_pending(self) -> None:
        """Embed every memory, message, episode, action sequence and skill still without a
        vector, in batches."""
        store = self._store
        try:
            while store is not None and not self._closing:
                did_work = False
                for table in PENDING_TABLES:
                    pending = await store.reads.pending_vectors(table, limit=VECTOR_BATCH)
                    if pending:
                        texts = [text for _, text in pending]
                        vectors = await self._embedder.embed_background(texts)
                        async with store.write() as writer:
                            await writer.set_vectors(
                                table, [(seq, vectors[i]) for i, (seq, _) in enumerate(pending)]
                            )
                        did_work = True
                # Procedural memory's sequence summaries and skills (none while it is unused).
                if await procedural.vectorise(store, self._embed_background, batch=VECTOR_BATCH):
                    did_work = True
                if not did_work:
                    return
        except Exception:  # retried on the next write or activation; the rows stay pending
            log.exception("vectorising profile %s failed", self.name)

    # ------------------------------------------------ the profile as a whole

    @entry
    async def ping(self) -> str:
        """The actor's name, once the profile is open (activates it)."""
        return self.name

    @entry
    async def info(self) -> ProfileInfo:
        return await self._open_store.reads.info(self.profile)

    @entry
    async def wait_vectorised(self) -> None:
        """Return once every pending memory and message has its vector (tests, benchmarks)."""
        while self._vectoriser is not None and not self._vectoriser.done():
            await asyncio.shield(self._vectoriser)
        await self._after_write()
        assert self._vectoriser is not None
        await asyncio.shield(self._vectoriser)

    # ------------------------------- monitoring: never opens, never counts as use

    async def counts(self) -> ProfileInfo:
        """The current counts, for the catalog's listings (not an ``entry``, like below).

        Raises:
            ProfileClosing: not open, or hibernating: the catalog has its last report.
        """
        if self._store is None or self._closing:
            raise ProfileClosing(self.name)
        return await self._store.reads.info(self.profile)
