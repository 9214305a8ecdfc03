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
- A bound on open profiles per host (``max_live``, from the node's memory unless
  configured, see ``live_bound``): opening one more asks the least recently used
  to hibernate. A watch on the node's available memory hibernates the least
  recently used before memory runs short (``profiles.pressure_fraction``), well
  before Ray's memory monitor would kill a process (at 0.95).

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

from raymem.actors.catalog import HOST_RESOURCE, CatalogClient, HostInfo
from raymem.actors.layout import disk_id, local_profiles, on_this_node, remove_local_copy
from raymem.actors.profile import ProfileActor
from raymem.actors.profile.base import ProfileBase
from raymem.actors.stacks import Stacks, format_stacks
from raymem.actors.stacks import read as read_stacks
from raymem.config import ProfileSettings, Settings
from raymem.errors import ProfileClosing, ProfileMoved

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (tenant, profile)
MB = 2**20
PRESSURE_CHECK_S = 1.0  # how often a host reads the node's available memory
# Under pressure a host asks this share of its open profiles (at least one) to
# hibernate per check: memory comes back within seconds without emptying the host.
PRESSURE_SHARE = 0.25

INSPECT_GROUP = "inspect"  # a thread and event loop of its own: answers a blocked host
STACKS_TIMEOUT_S = 5.0

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


def node_memory() -> tuple[int, int]:
    """The node's total and available memory in bytes, from ``/proc/meminfo``."""
    fields = {}
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            name, value = line.split(":", 1)
            fields[name] = int(value.split()[0]) * 1024
    return fields["MemTotal"], fields["MemAvailable"]


def live_bound(profiles: ProfileSettings, hosts_on_node: int, total: int, available: int) -> int:
    """Open profiles one host may hold: its share of the node's bound.

    The node's bound is ``profiles.max_live`` when set, else what ``memory_fraction``
    of the node's memory holds at ``open_profile_mb`` per profile once what is already
    used (``total - available``: Ray, the model pools, everything else) is counted.
    """
    if profiles.max_live > 0:
        node_bound = profiles.max_live
    else:
        budget = profiles.memory_fraction * total - (total - available)
        node_bound = int(budget / (profiles.open_profile_mb * MB))
    return max(1, node_bound // max(1, hosts_on_node))


class HostUsage(msgspec.Struct, frozen=True, kw_only=True):
    """A host's process memory and the profiles open in it (benchmarks, metrics)."""

    host: str
    pid: int
    rss_bytes: int
    pss_bytes: int
    max_live: int
    open_profiles: list[str]


def _declared_hosts(node: str) -> int:
    """The profile hosts a node declares (``raymem_profile_hosts``), 1 if none."""
    for info in ray.nodes():  # type: ignore[no-untyped-call]  # unannotated in Ray
        if info["NodeID"] == node:
            return max(1, int(info["Resources"].get(HOST_RESOURCE, 1)))
    return 1


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _Opened:
    """A profile open in this host, and the id of this opening."""

    def __init__(self, profile: ProfileActor) -> None:
        self.profile = profile
        self.opening = uuid.uuid4().hex


class ProfileHost:
    """Many open profiles in one process (a detached async Ray actor)."""

    def __init__(self, name: str, settings: Settings, hosts_on_node: int) -> None:
        """``hosts_on_node``: the hosts sharing this node's bound (0: as many as the node
        declares ``raymem_profile_hosts``)."""
        self.name = name
        self.settings = on_this_node(settings)
        self.disk = disk_id(self.settings)
        self.node = ray.get_runtime_context().get_node_id()
        self.profiles = settings.profiles
        hosts_on_node = hosts_on_node or _declared_hosts(self.node)
        self.max_live = live_bound(self.profiles, hosts_on_node, *node_memory())
        self._idle_watch: asyncio.Task[None] | None = None
        self._catalog = CatalogClient(settings)
        self._profiles: dict[Key, asyncio.Future[_Opened]] = {}
        self._releasing: dict[Key, asyncio.Future[None]] = {}
        self._handle: Any = None
        self._pressure_watch: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the main one, for ``stacks``
        log.info("profile host %s holds at most %d open profiles", name, self.max_live)

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
        settings = on_this_node(settings)
        grant = await self._catalog.acquire(tenant, profile, self.name, self.disk)
        if grant == "refused":
            raise ProfileMoved(profile, self.name)
        if grant == "restore" and remove_local_copy(settings, tenant, profile):
            log.info("host %s: %s/%s moved here; its older copy is restored", self.name, *key)
        self._make_room(key)
        return _Opened(ProfileActor(tenant, profile, settings, self))

    def _open_now(self) -> dict[Key, _Opened]:
        return {
            key: opening.result()
            for key, opening in self._profiles.items()
            if opening.done() and not opening.cancelled() and not opening.exception()
        }

    def _staying(self, opening: Key | None = None) -> dict[Key, ProfileActor]:
        """Open profiles not asked to hibernate, but the one ``opening``."""
        return {
            key: opened.profile
            for key, opened in self._open_now().items()
            if key != opening and not opened.profile.asked_to_hibernate
        }

    def _make_room(self, opening: Key) -> None:
        """Ask the least recently used profiles to hibernate while this host holds too many."""
        staying = self._staying(opening)
        over = len(staying) + 1 - self.max_live
        if over > 0:
            log.info("host %s over %d open profiles", self.name, self.max_live)
            self._hibernate_least_recently_used(staying, over)
        if self._pressure_watch is None:
            self._pressure_watch = asyncio.create_task(self._watch_pressure())

    @staticmethod
    def _hibernate_least_recently_used(staying: dict[Key, ProfileActor], count: int) -> None:
        for key in sorted(staying, key=lambda key: staying[key].last_used)[:count]:
            staying[key].hibernate_soon()

    async def _watch_pressure(self) -> None:
        """Hibernate the least recently used profiles while the node's memory runs short."""
        while True:
            await asyncio.sleep(PRESSURE_CHECK_S)
            total, available = node_memory()
            used = 1 - available / total
            staying = self._staying()
            if used >= self.profiles.pressure_fraction and staying:
                count = max(1, int(len(staying) * PRESSURE_SHARE))
                log.warning(
                    "host %s: node memory %.0f%% used, hibernating %d of %d open profiles",
                    self.name,
                    used * 100,
                    count,
                    len(staying),
                )
                self._hibernate_least_recently_used(staying, count)

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
        """This process's memory and the profile's opening; None once it is closed here (a
        hibernating profile counts as open until its store is closed)."""
        opened = self._opened(tenant, profile)
        if opened is None:
            return None
        return ProcessStats(
            host=self.name,
            pid=os.getpid(),
            rss_bytes=_rss_bytes(),
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

    async def usage(self) -> HostUsage:
        """This process's memory and the profiles open in it."""
        return HostUsage(
            host=self.name,
            pid=os.getpid(),
            rss_bytes=_rss_bytes(),
            pss_bytes=pss_bytes(),
            max_live=self.max_live,
            open_profiles=sorted(f"{tenant}/{profile}" for tenant, profile in self._open_now()),
        )

    async def ping(self) -> str:
        return self.name

    @ray.method(concurrency_group=INSPECT_GROUP)
    async def stacks(self) -> Stacks:
        """What this host's threads and tasks are doing now (``raymem.actors.stacks``);
        answered from a thread of its own, so a host whose event loop is stuck answers."""
        return read_stacks(self._loop)

    async def describe(self) -> HostInfo:
        """This host's disk and the profile files on it (the catalog asks as it starts)."""
        self._loop = asyncio.get_running_loop()
        if self.profiles.max_hosts > 0 and self._idle_watch is None:
            self._idle_watch = asyncio.create_task(self._watch_idle())
        found = await asyncio.to_thread(local_profiles, self.settings)
        return HostInfo(
            name=self.name,
            node=self.node,
            disk=self.disk,
            max_live=self.max_live,
            local_profiles=sorted(found),
        )

    async def _watch_idle(self) -> None:
        """Hosts on demand: after ``host_idle_s`` without a profile, offer to stop (the
        catalog stops this host unless it is one of the ``min_hosts``)."""
        idle_s = self.profiles.host_idle_s
        idle_since = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(min(idle_s / 4, PRESSURE_CHECK_S * 5))
            now = asyncio.get_running_loop().time()
            if self._profiles or self._releasing:
                idle_since = now
            elif now - idle_since >= idle_s:
                try:
                    await self._catalog.idle(self.name)
                except Exception:  # the catalog restarting: offer again later
                    log.exception("host %s cannot offer to stop", self.name)
                idle_since = now


# Ray's overloads of ``remote`` do not list concurrency_groups.
RemoteProfileHost = ray.remote(concurrency_groups={INSPECT_GROUP: 1})(ProfileHost)  # type: ignore[call-overload]


async def hosts_usage(settings: Settings) -> list[HostUsage]:
    """The memory and open profiles of every profile host (benchmarks, metrics); a host
    that died since the catalog last saw it is left out."""
    hosts = await CatalogClient(settings).hosts()

    async def usage(handle: Any) -> HostUsage | None:
        try:
            result = await handle.usage.remote()
        except ray.exceptions.RayActorError:
            return None
        return result if isinstance(result, HostUsage) else None

    found = await asyncio.gather(*(usage(handle) for _, handle in hosts))
    return [item for item in found if item is not None]


async def hosts_stacks(settings: Settings) -> dict[str, str]:
    """What every profile host is doing now, by host name (for diagnosing a host that
    stops answering): its stacks, or why they could not be read."""
    hosts = await CatalogClient(settings).hosts()

    async def stacks(handle: Any) -> str:
        try:
            found = await asyncio.wait_for(handle.stacks.remote(), STACKS_TIMEOUT_S)
        except TimeoutError:
            return f"no answer within {STACKS_TIMEOUT_S:g} s"
        except ray.exceptions.RayActorError as exc:
            return f"dead: {exc}"
        return format_stacks(found)

    texts = await asyncio.gather(*(stacks(handle) for _, handle in hosts))
    return {name: text for (name, _), text in zip(hosts, texts, strict=True)}
