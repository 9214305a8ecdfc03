"""Profile hosts: long-lived actors that each hold many open profiles.

A profile used to be a Ray actor of its own, which cost a process per live
profile (about 95-120 MB and 1.5 CPU-seconds to start here): 40 profiles woken
at once took 25 s on 2 cores. A ``ProfileHost`` is started with the app and
stays: waking a profile is opening a SQLite file in a warm process (about 1-2
MB per open small profile).

Each profile keeps its contract (one named profile, one writer, opened on first
use, hibernates when idle, restored by name):

- One writer: the host opens a profile only under the catalog's lease
  (``ProfileCatalog.acquire``); another host's lease makes it refuse with
  ``ProfileMoved``, and the caller asks the catalog again. A profile closing in
  this host gives its lease back before the host opens it again.
- Concurrent first calls in one host share one opening (a task per profile).
- Hibernation is the profile's own (``ProfileBase``): it closes its store and
  tells the host (``closed``), which forgets it and releases the lease.
- A bound on open profiles per host (``max_live``): opening one more asks the
  least recently used to hibernate.

Calls arrive as callables run against the profile object
(``host.run.remote(tenant, profile, settings, lambda p: p.recall(request))``,
see ``raymem.actors.calls``), so the host knows no operation by name.
"""

import asyncio
import logging
import os
import resource
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
import ray

from raymem.actors.catalog import CatalogClient
from raymem.actors.profile import ProfileActor
from raymem.actors.profile.base import ProfileBase
from raymem.config import Settings
from raymem.errors import ProfileClosing, ProfileMoved

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (tenant, profile)
Operation = Callable[[ProfileActor], Awaitable[object]]
StreamOperation = Callable[[ProfileActor], AsyncIterator[object]]


class ProcessStats(msgspec.Struct, frozen=True, kw_only=True):
    """The host process a profile is open in, and that opening of the profile."""

    host: str
    pid: int
    rss_bytes: int
    peak_rss_bytes: int
    pss_bytes: int  # proportional set size: shared pages split between their processes
    open_profiles: int
    opening: str  # new each time the profile is opened: tells a re-activation apart


def pss_bytes(pid: int | str = "self") -> int:
    """A process's proportional set size, from ``/proc/<pid>/smaps_rollup`` (0 if unreadable)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class _Opened:
    """A profile open in this host, and the id of this opening."""

    def __init__(self, profile: ProfileActor) -> None:
        self.profile = profile
        self.opening = uuid.uuid4().hex


class ProfileHost:
    """Many open profiles in one process (a detached async Ray actor)."""

    def __init__(self, name: str, settings: Settings, max_live: int) -> None:
        self.name = name
        self.max_live = max(1, max_live)
        self._catalog = CatalogClient(settings)
        self._profiles: dict[Key, asyncio.Future[_Opened]] = {}
        self._releasing: dict[Key, asyncio.Future[None]] = {}
        self._handle: Any = None

    # ------------------------------------------------------- the HostLink side

    @property
    def handle(self) -> Any:
        if self._handle is None:
            self._handle = ray.get_runtime_context().current_actor
        return self._handle

    def closed(self, profile: ProfileBase) -> None:
        """``profile`` closed its store: forget it and give its lease back."""
        key = (profile.tenant, profile.profile)
        opened = self._open_now().get(key)
        if opened is not None and opened.profile is profile:
            del self._profiles[key]
        released = asyncio.ensure_future(self._release(key))
        self._releasing[key] = released
        released.add_done_callback(
            lambda _: self._releasing.pop(key) if self._releasing.get(key) is released else None
        )

    async def _release(self, key: Key) -> None:
        try:
            await self._catalog.release(*key, self.name)
        except Exception:  # the catalog re-assigns a dead host's leases; a live one keeps it
            log.exception("host %s cannot release profile %s/%s", self.name, *key)

    # ------------------------------------------------------------- opening

    async def _open(self, key: Key, settings: Settings) -> ProfileActor:
        opening = self._profiles.get(key)
        if opening is None:
            opening = asyncio.ensure_future(self._acquire(key, settings))
            self._profiles[key] = opening
            opening.add_done_callback(lambda done: self._drop_failed(key, done))
        opened = await asyncio.shield(opening)
        return opened.profile

    def _drop_failed(self, key: Key, opening: asyncio.Future[_Opened]) -> None:
        if (opening.cancelled() or opening.exception()) and self._profiles.get(key) is opening:
            del self._profiles[key]

    async def _acquire(self, key: Key, settings: Settings) -> _Opened:
        releasing = self._releasing.get(key)
        if releasing is not None:  # the previous opening gives its lease back first
            await releasing
        tenant, profile = key
        if not await self._catalog.acquire(tenant, profile, self.name):
            raise ProfileMoved(profile, self.name)
        self._make_room(key)
        return _Opened(ProfileActor(tenant, profile, settings, self))

    def _open_now(self) -> dict[Key, _Opened]:
        return {
            key: opening.result()
            for key, opening in self._profiles.items()
            if opening.done() and not opening.cancelled() and not opening.exception()
        }

    def _make_room(self, opening: Key) -> None:
        """Ask the least recently used profiles to hibernate while this host holds too many."""
        staying = {
            key: opened.profile
            for key, opened in self._open_now().items()
            if key != opening and not opened.profile.asked_to_hibernate
        }
        while len(staying) + 1 > self.max_live and staying:
            oldest = min(staying, key=lambda key: staying[key].last_used)
            log.info(
                "host %s over %d open profiles: %s hibernates", self.name, self.max_live, oldest
            )
            staying.pop(oldest).hibernate_soon()

    # --------------------------------------------------------------- calls

    async def run(
        self, tenant: str, profile: str, settings: Settings, operation: Operation
    ) -> object:
        """``operation(profile)``, opening the profile (under its lease) if needed.

        Raises:
            ProfileMoved: another host holds the profile's lease.
            ProfileClosing: the profile is hibernating; the caller retries.
        """
        return await operation(await self._open((tenant, profile), settings))

    async def run_stream(
        self, tenant: str, profile: str, settings: Settings, operation: StreamOperation
    ) -> AsyncIterator[object]:
        """The items of ``operation(profile)``, an async iterator, as they come."""
        async for item in operation(await self._open((tenant, profile), settings)):
            yield item

    # ------------------------- monitoring: never opens, never counts as use

    def _opened(self, tenant: str, profile: str) -> _Opened | None:
        return self._open_now().get((tenant, profile))

    async def counts(self, tenant: str, profile: str) -> object:
        """The profile's current counts (the catalog's listings).

        Raises:
            ProfileClosing: not open here.
        """
        opened = self._opened(tenant, profile)
        if opened is None:
            raise ProfileClosing(f"{tenant}/{profile}")
        return await opened.profile.counts()

    async def stats(self, tenant: str, profile: str) -> ProcessStats | None:
        """This process's memory and the profile's opening; None if it is not open here."""
        opened = self._opened(tenant, profile)
        if opened is None or opened.profile.closing:
            return None
        with open("/proc/self/statm") as statm:
            rss_pages = int(statm.read().split()[1])
        return ProcessStats(
            host=self.name,
            pid=os.getpid(),
            rss_bytes=rss_pages * os.sysconf("SC_PAGE_SIZE"),
            peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            pss_bytes=pss_bytes(),
            open_profiles=len(self._open_now()),
            opening=opened.opening,
        )

    async def hibernate(self, tenant: str, profile: str) -> None:
        """Ask the profile to hibernate once no call is in flight (nothing if not open here)."""
        opened = self._opened(tenant, profile)
        if opened is not None:
            opened.profile.hibernate_soon()

    async def open_profiles(self) -> list[str]:
        return sorted(f"{tenant}/{profile}" for tenant, profile in self._open_now())

    async def ping(self) -> str:
        return self.name


RemoteProfileHost = ray.remote(ProfileHost)
