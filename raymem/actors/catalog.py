"""The profile catalog: every profile of every tenant and its counts, in one place.

A profile's SQLite file is opened by its actor alone, on whichever node the actor
runs. Listing profiles by reading their files (as the ingress once did) was
blocking I/O in an async route and blind to every other node. So one detached
named actor per cluster (``raymem-catalog`` in the app's namespace) knows every
profile of every tenant with its counts (messages, current memories, sessions);
``GET /v1/profiles`` and ``ProfileRouter.exists`` ask it.

How it learns:

- A profile actor registers as it opens (awaited, so a profile is known before it
  answers its first call), reports its counts after committed writes (debounced:
  at most one report per ``COUNTS_REPORT_DELAY_S``, sent by a background task,
  never on a request's path), reports them a last time when it hibernates, and
  is removed from the catalog before its deletion is acknowledged.
- A listing answers from what was reported, except that the profiles live right
  now are asked for their current counts (in parallel, ``LIVE_COUNTS_TIMEOUT_S``
  at most), so a listing right after a write shows it. Hibernated profiles are
  never woken to be listed.

Persistence: ``<data_dir>/.catalog/catalog.db``, a small SQLite file of its own (a
name starting with a dot can never be a tenant's), so a restarted service still
lists hibernated profiles. A catalog that has never run on this ``data_dir``
discovers the profiles that exist already, once: the tenant directories under
``data_dir`` and, when configured, object storage. It then activates them in the
background, ``DISCOVERY_CONCURRENCY`` at a time, to learn their counts (profiles
written by an older version never reported any) and lists them with zero counts
until then.

Settings: the app publishes its ``Settings`` here when it starts, and the
in-cluster ``raymem.get_profile`` reads them, so code inside the cluster opens
profiles exactly as the server does, whatever its own working directory.

Hosts and leases (one writer per profile): profiles are open inside profile
hosts (``actors/host.py``), which the catalog starts, ``profiles.hosts_per_node``
of them (the app's publish starts them, so the first wake finds them warm). The
catalog is also the lease authority: ``lease`` tells a caller which host serves
a profile, giving it to the host with the fewest open profiles if none holds it;
a host opens a profile only once ``acquire`` confirms its lease, and
``release``s it when the profile closes. A lease moves to another host only
when its holder is dead (``host_failed``, verified before anything moves).
Leases are kept in the catalog's file, so a restarted catalog never hands out a
profile that a live host still holds.

Several nodes: the catalog runs on the head node (its file in the head's
``data_dir``) and is cluster-wide, so every node lists the same profiles. Each
node runs hosts (``raymem_profile_hosts`` of them where a node type declares that
resource, else ``profiles.hosts_per_node`` or one per CPU); a host tells the catalog
its disk (``layout.disk_id``) and the profile files already on it. The catalog
records the disk each profile was last open on (its placement) and leases:

- without object storage, only to a host on the profile's disk: a profile is
  never split or opened empty elsewhere; while that node is gone it answers 503
  ``profile_unavailable``;
- with object storage, to a host on its disk when one is alive, else anywhere;
  a host on another disk discards its own (older) copy and restores from object
  storage before serving (``acquire`` answers ``restore``).
"""

import asyncio
import collections
import logging
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec
import ray
from ray.exceptions import RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raymem import metrics
from raymem.actors.layout import local_profiles, on_this_node, profile_path
from raymem.config import Settings
from raymem.errors import ProfileUnavailable
from raymem.export import ObjectStore
from raymem.names import NAME
from raymem.types import ProfileInfo

log = logging.getLogger(__name__)

T = TypeVar("T")
ActorHandle = Any  # Ray types a handle's methods only for ``@ray.method`` methods

CATALOG_ACTOR = "raymem-catalog"
CATALOG_FILE = Path(".catalog") / "catalog.db"  # under data_dir; a dot: never a tenant
COUNTS_REPORT_DELAY_S = 2.0  # a live profile's counts are also read fresh for each listing
LIVE_COUNTS_TIMEOUT_S = 2.0  # past this, a listing shows a live profile's reported counts
DISCOVERY_CONCURRENCY = 4  # activations at once
HOST_CHECK_S = 2.0  # how often the catalog pings every host (``_watch_hosts``)
HOST_START_TIMEOUT_S = 30.0  # a lease waits this long for hosts to say where they are
NODES_REFRESH_S = 5.0  # how often a lease looks for nodes that joined or left
# A node type that declares this resource runs that many profile hosts; the hosts
# request it, so the Ray autoscaler can add a node when more hosts are wanted.
HOST_RESOURCE = "raymem_profile_hosts"
HEAD_NODE = {"node:__internal_head__": 0.001}  # the catalog's place: the head node

# What ``acquire`` tells a host: open the local file as it is, discard the local copy
# and restore from object storage (the profile was last open on another disk), or
# stay away (another host holds the lease).
Grant = Literal["open", "restore", "refused"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS profiles (
    tenant TEXT NOT NULL,
    profile TEXT NOT NULL,
    messages INTEGER,  -- NULL until the profile reports (discovered, not yet activated)
    memories INTEGER,
    sessions INTEGER,
    reported_at REAL,
    PRIMARY KEY (tenant, profile)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS leases (
    tenant TEXT NOT NULL,
    profile TEXT NOT NULL,
    host TEXT NOT NULL,  -- the profile host allowed to open the profile
    PRIMARY KEY (tenant, profile)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS placements (
    tenant TEXT NOT NULL,
    profile TEXT NOT NULL,
    disk TEXT NOT NULL,  -- the data_dir (layout.disk_id) the profile was last open on
    PRIMARY KEY (tenant, profile)
) WITHOUT ROWID;
"""

Key = tuple[str, str]  # (tenant, profile)


class HostInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a profile host tells the catalog as it starts."""

    name: str
    node: str  # the Ray node it runs on
    disk: str  # layout.disk_id of the data_dir it opens profiles in
    max_live: int  # the open profiles it holds before hibernating the least recently used
    local_profiles: list[tuple[str, str]]  # the profile files already on that disk


def _open(settings: Settings) -> sqlite3.Connection:
    path = Path(on_this_node(settings).data_dir) / CATALOG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    # Autocommit; the actor's methods all run on its event loop thread, one at a time.
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # counts are re-reported; a lost last one is harmless
    db.executescript(SCHEMA)
    return db


class ProfileCatalog:
    """The cluster's list of profiles and their counts (a detached Ray actor)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._db = _open(settings)
        self._profiles: dict[str, dict[str, ProfileInfo | None]] = {}  # tenant -> name -> counts
        self._live: dict[Key, ActorHandle] = {}
        self._discovery: asyncio.Future[None] | None = None
        self._learning: asyncio.Task[None] | None = None
        self._leases: dict[Key, str] = {}  # profile -> the host that may open it
        self._placements: dict[Key, str] = {}  # profile -> the disk it was last open on
        self._hosts: dict[str, ActorHandle] = {}  # started or found, by name
        self._host_disks: dict[str, asyncio.Future[str]] = {}  # as each host answers
        self._host_nodes: dict[str, str] = {}  # host name -> Ray node id
        self._host_bounds: dict[str, int] = {}  # host name -> its max_live
        self._busy_hosts: set[str] = set()  # no answer to the last ping: no new profiles
        self._host_watch: asyncio.Task[None] | None = None
        self._nodes_seen_at = -NODES_REFRESH_S
        self._object_storage = bool(settings.object_store.bucket)
        self._load()

    def _load(self) -> None:
        rows = self._db.execute(
            "SELECT tenant, profile, messages, memories, sessions FROM profiles"
        )
        for tenant, profile, messages, memories, sessions in rows:
            counts = None
            if messages is not None:
                counts = ProfileInfo(
                    name=profile, messages=messages, memories=memories, sessions=sessions
                )
            self._profiles.setdefault(tenant, {})[profile] = counts
        for tenant, profile, host in self._db.execute("SELECT tenant, profile, host FROM leases"):
            self._leases[(tenant, profile)] = host
        for tenant, profile, disk in self._db.execute(
            "SELECT tenant, profile, disk FROM placements"
        ):
            self._placements[(tenant, profile)] = disk

    def _meta(self, key: str) -> bytes | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else bytes(row[0])

    def _set_meta(self, key: str, value: bytes) -> None:
        self._db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # --------------------------------------------------------------- settings

    async def publish(self, settings: Settings) -> None:
        """The app's settings, published as it starts; a new ``data_dir`` moves the catalog."""
        if settings.data_dir != self._settings.data_dir:
            self._db.close()
            self._db = _open(settings)
            self._profiles, self._live, self._discovery, self._leases = {}, {}, None, {}
            self._placements = {}
            self._load()
        self._settings = settings
        self._object_storage = bool(settings.object_store.bucket)
        self._set_meta("settings", msgspec.json.encode(settings))
        await self._refresh_hosts(now=True)  # warm before the first profile wakes

    async def settings(self) -> Settings | None:
        """What the app published; None if no app has published here."""
        published = self._meta("settings")
        return None if published is None else msgspec.json.decode(published, type=Settings)

    # ---------------------------------------------------------------- reports

    async def report(
        self, tenant: str, profile: str, counts: ProfileInfo, live: ActorHandle | None
    ) -> None:
        """A profile's counts; ``live`` is its host while open, None once it hibernates."""
        await self._discovered()
        key = (tenant, profile)
        if live is None:
            self._live.pop(key, None)
        else:
            self._live[key] = live
        known = self._profiles.setdefault(tenant, {})
        if profile in known and known[profile] == counts:
            self._record_profiles()  # it may have gone live or asleep
            return
        known[profile] = counts
        self._db.execute(
            "INSERT INTO profiles (tenant, profile, messages, memories, sessions, reported_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, profile) DO UPDATE SET"
            " messages = excluded.messages, memories = excluded.memories,"
            " sessions = excluded.sessions, reported_at = excluded.reported_at",
            (tenant, profile, counts.messages, counts.memories, counts.sessions, time.time()),
        )
        self._record_profiles()

    async def forget(self, tenant: str, profile: str) -> None:
        """The profile was deleted."""
        await self._discovered()
        self._live.pop((tenant, profile), None)
        self._profiles.get(tenant, {}).pop(profile, None)
        self._db.execute("DELETE FROM profiles WHERE tenant = ? AND profile = ?", (tenant, profile))
        self._set_lease((tenant, profile), None)
        self._set_placement((tenant, profile), None)
        self._record_profiles()

    def _record_profiles(self) -> None:
        """The gauge of live and hibernating profiles, cluster-wide."""
        total = sum(len(profiles) for profiles in self._profiles.values())
        metrics.PROFILES.set(len(self._live), state="live")
        metrics.PROFILES.set(total - len(self._live), state="hibernating")

    # ------------------------------------------------------- hosts and leases

    def _set_lease(self, key: Key, host: str | None) -> None:
        if host is None:
            self._leases.pop(key, None)
            self._db.execute("DELETE FROM leases WHERE tenant = ? AND profile = ?", key)
        else:
            self._leases[key] = host
            self._db.execute(
                "INSERT INTO leases (tenant, profile, host) VALUES (?, ?, ?)"
                " ON CONFLICT (tenant, profile) DO UPDATE SET host = excluded.host",
                (*key, host),
            )

    def _set_placement(self, key: Key, disk: str | None) -> None:
        if disk is None:
            self._placements.pop(key, None)
            self._db.execute("DELETE FROM placements WHERE tenant = ? AND profile = ?", key)
        elif self._placements.get(key) != disk:
            self._placements[key] = disk
            self._db.execute(
                "INSERT INTO placements (tenant, profile, disk) VALUES (?, ?, ?)"
                " ON CONFLICT (tenant, profile) DO UPDATE SET disk = excluded.disk",
                (*key, disk),
            )

    async def _refresh_hosts(self, *, now: bool = False) -> None:
        """Drop the hosts of nodes gone and start (or find) the hosts wanted: those of every
        node, or on demand at least ``min_hosts``. Each new host says which disk it opens
        profiles on as it starts (``_describe``); a lease waits for that (``_described``).

        Looks at the nodes at most every ``NODES_REFRESH_S`` unless ``now``."""
        loop = asyncio.get_running_loop()
        if self._host_watch is None:
            self._host_watch = asyncio.create_task(self._watch_hosts())
        if not now and loop.time() - self._nodes_seen_at < NODES_REFRESH_S:
            return
        self._nodes_seen_at = loop.time()
        alive = {info["NodeID"] for info in ray.nodes() if info["Alive"]}  # type: ignore[no-untyped-call]
        for name, node in list(self._host_nodes.items()):
            if node not in alive:
                self._drop_host(name)
        if self._on_demand():
            while len(self._hosts) < self._settings.profiles.min_hosts:
                self._start_host(f"raymem-host-{uuid.uuid4().hex[:12]}", None, 0)
            return
        for node, (count, declared) in _profile_nodes(self._settings).items():
            for index in range(count):
                name = f"raymem-host-{node[:12]}-{index}"
                self._start_host(name, node, count, resource=declared)

    def _on_demand(self) -> bool:
        return self._settings.profiles.max_hosts > 0

    def _start_host(
        self, name: str, node: str | None, count: int, *, resource: bool = True
    ) -> None:
        """Start host ``name`` on ``node`` (wherever Ray finds a ``HOST_RESOURCE`` when
        None), one of ``count`` there (0: as many as its node declares)."""
        if name in self._hosts:
            return
        # Imported here: the host's own modules import this one.
        from raymem.actors.host import RemoteProfileHost

        placement = "DEFAULT" if node is None else NodeAffinitySchedulingStrategy(node, soft=False)
        self._hosts[name] = RemoteProfileHost.options(
            name=name,
            namespace=self._settings.namespace,
            get_if_exists=True,
            lifetime="detached",
            num_cpus=0,
            resources={HOST_RESOURCE: 1} if resource else None,
            max_restarts=0,  # a dead host's profiles move to another; it is started anew
            max_concurrency=1000,
            scheduling_strategy=placement,
        ).remote(name, self._settings, count)
        if node is not None:
            self._host_nodes[name] = node
        self._host_disks[name] = asyncio.ensure_future(self._describe(name))

    async def _described(self, disk: str | None) -> dict[str, str]:
        """The disk of each host, waiting ``HOST_START_TIMEOUT_S`` at most for hosts still
        starting while no host has said it serves ``disk`` (any disk when None)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + HOST_START_TIMEOUT_S
        while True:
            disks = self._disks()
            if (disk in disks.values()) if disk is not None else disks:
                return disks
            describing = [future for future in self._host_disks.values() if not future.done()]
            remaining = deadline - loop.time()
            if not describing or remaining <= 0:
                return disks
            await asyncio.wait(describing, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)

    def _grow_if_full(self, disks: dict[str, str]) -> None:
        """On demand: one more host when every host is full and none is starting; where the
        cluster has no room for it, it waits for the node the autoscaler adds."""
        if not self._on_demand() or len(self._hosts) >= self._settings.profiles.max_hosts:
            return
        if len(disks) < len(self._hosts):
            return  # one is starting (or waiting for a node) already
        open_per_host = collections.Counter(self._leases.values())
        if all(open_per_host[name] >= self._host_bounds.get(name, 1) for name in disks):
            log.info("every profile host is full: starting one more")
            self._start_host(f"raymem-host-{uuid.uuid4().hex[:12]}", None, 0)

    async def idle(self, name: str) -> bool:
        """Host ``name`` has held no profile for ``profiles.host_idle_s``: on demand and
        not one of the ``min_hosts`` started first, it is stopped (so the nodes added
        last are the ones that empty and go); whether it was."""
        if not self._on_demand() or name in self._leases.values():
            return False
        if name in list(self._hosts)[: self._settings.profiles.min_hosts]:
            return False
        handle = self._host(name)
        self._drop_host(name)
        if handle is not None:
            log.info("profile host %s is idle: stopping it", name)
            ray.kill(handle, no_restart=True)
        return True

    async def _describe(self, name: str) -> str:
        """The host's disk; the profile files on it join the catalog, placed there."""
        try:
            info = await self._hosts[name].describe.remote()
        except RayActorError:
            self._drop_host(name)
            return ""  # no disk: never a candidate
        assert isinstance(info, HostInfo)
        self._host_nodes[name] = info.node
        self._host_bounds[name] = info.max_live
        found = {(tenant, profile) for tenant, profile in info.local_profiles}
        self._add_found(found)
        for key in found:
            if key not in self._placements:
                self._set_placement(key, info.disk)
        return info.disk

    def _host(self, name: str) -> ActorHandle | None:
        """A host by name: started by this catalog, or found alive (after a restart)."""
        if name not in self._hosts:
            try:
                self._hosts[name] = ray.get_actor(name, namespace=self._settings.namespace)
            except ValueError:
                return None
            self._host_disks[name] = asyncio.ensure_future(self._describe(name))
        return self._hosts[name]

    def _disks(self) -> dict[str, str]:
        """The disk of each host that has said which."""
        return {
            name: future.result()
            for name, future in self._host_disks.items()
            if future.done() and not future.cancelled() and future.exception() is None
            if future.result()
        }

    async def lease(self, tenant: str, profile: str) -> tuple[str, ActorHandle]:
        """The host that serves the profile: its lease holder, or the least busy host
        where the profile may open (see the module's docstring).

        Raises:
            ProfileUnavailable: without object storage, no host runs on the profile's disk.
        """
        key = (tenant, profile)
        holder = self._leases.get(key)
        if holder is not None:
            handle = self._host(holder)
            if handle is not None:
                return holder, handle
            self._drop_host(holder)  # gone while the catalog was down
        await self._refresh_hosts()
        placed = self._placements.get(key)
        disks = await self._described(placed)
        candidates = [name for name, disk in disks.items() if disk == placed]
        if not candidates:
            if placed is not None and not self._object_storage:
                raise ProfileUnavailable(
                    profile,
                    "its file is on a node that is not in the cluster now (without object"
                    " storage it opens nowhere else); it answers once that node is back",
                )
            candidates = list(disks)
        if not candidates:
            raise ProfileUnavailable(profile, "no profile host is running yet; retry")
        # A busy host keeps what it holds; a profile it does not hold goes elsewhere.
        candidates = [name for name in candidates if name not in self._busy_hosts] or candidates
        open_per_host = collections.Counter(self._leases.values())
        name = min(candidates, key=lambda host: open_per_host[host])
        self._set_lease(key, name)
        self._grow_if_full(disks)
        return name, self._hosts[name]

    async def hosts(self) -> list[tuple[str, ActorHandle]]:
        """The profile hosts this catalog started or found (benchmarks, metrics)."""
        return sorted(self._hosts.items())

    async def holder(self, tenant: str, profile: str) -> tuple[str, ActorHandle] | None:
        """The host holding the profile's lease; None when no host may have it open."""
        name = self._leases.get((tenant, profile))
        handle = None if name is None else self._host(name)
        return None if name is None or handle is None else (name, handle)

    async def acquire(self, tenant: str, profile: str, host: str, disk: str) -> Grant:
        """Whether ``host`` (opening profiles on ``disk``) may open the profile, and whether
        it must restore it from object storage first.

        ``refused`` when another host holds the lease, or when without object storage the
        profile's file is on another disk; ``restore`` when it was last open on another
        disk, so the copy on this one (if any) is older than object storage's.
        """
        key = (tenant, profile)
        holder = self._leases.get(key)
        placed = self._placements.get(key)
        if holder not in (None, host):
            return "refused"
        if placed not in (None, disk) and not self._object_storage:
            return "refused"
        self._set_lease(key, host)
        self._set_placement(key, disk)
        return "open" if placed in (None, disk) else "restore"

    async def release(self, tenant: str, profile: str, host: str) -> None:
        """``host`` has closed the profile."""
        if self._leases.get((tenant, profile)) == host:
            self._set_lease((tenant, profile), None)

    async def host_failed(self, name: str) -> None:
        """A caller met a dead host: once confirmed dead, its profiles may open elsewhere."""
        handle = self._host(name)
        if handle is None or await self._ping(name, handle) == "dead":
            self._drop_host(name)  # busy, not known dead: it keeps its leases (one writer)

    async def _ping(self, name: str, handle: ActorHandle) -> Literal["answers", "busy", "dead"]:
        """Whether the host's event loop answers within ``profiles.host_answer_timeout_s``;
        a host that does not is busy (no new profiles) until it answers again."""
        timeout = self._settings.profiles.host_answer_timeout_s
        try:
            await asyncio.wait_for(handle.ping.remote(), timeout)
        except RayActorError:
            return "dead"
        except TimeoutError:
            if name not in self._busy_hosts:
                log.warning(
                    "profile host %s gave no answer in %g s: no new profiles", name, timeout
                )
            self._busy_hosts.add(name)
            return "busy"
        if name in self._busy_hosts:
            log.info("profile host %s answers again", name)
            self._busy_hosts.discard(name)
        return "answers"

    async def _watch_hosts(self) -> None:
        """Ping every host that has said where it runs, every ``HOST_CHECK_S``; a dead
        one is dropped (its profiles may open elsewhere)."""
        while True:
            await asyncio.sleep(HOST_CHECK_S)
            hosts = [(name, self._hosts[name]) for name in self._disks() if name in self._hosts]
            try:
                answers = await asyncio.gather(*(self._ping(name, h) for name, h in hosts))
            except Exception:  # a Ray error no ping expects: look again next time
                log.exception("pinging the profile hosts failed")
                continue
            for (name, _), answer in zip(hosts, answers, strict=True):
                if answer == "dead" and name in self._hosts:
                    self._drop_host(name)

    def _drop_host(self, name: str) -> None:
        log.warning("profile host %s is gone: its profiles may open elsewhere", name)
        self._busy_hosts.discard(name)
        self._hosts.pop(name, None)
        self._host_nodes.pop(name, None)
        self._host_bounds.pop(name, None)
        self._host_disks.pop(name, None)
        for key in [key for key, host in self._leases.items() if host == name]:
            self._set_lease(key, None)

    # ------------------------------------------------------------------ reads

    async def exists(self, tenant: str, profile: str) -> bool:
        await self._discovered()
        if profile in self._profiles.get(tenant, {}):
            return True
        if profile_path(on_this_node(self._settings), tenant, profile).exists():
            # A file put under data_dir behind the service's back (a copied backup, a
            # benchmark's): known from now on; its actor reports counts as it opens.
            self._add_found({(tenant, profile)})
            return True
        return False

    async def profiles(self, tenant: str, only: list[str] | None = None) -> list[ProfileInfo]:
        """The tenant's profiles by name, or those of ``only``, with their counts."""
        await self._discovered()
        known = self._profiles.get(tenant, {})
        names = sorted(known if only is None else set(only) & set(known))
        return list(await asyncio.gather(*(self._counts(tenant, name) for name in names)))

    async def _counts(self, tenant: str, profile: str) -> ProfileInfo:
        reported = self._profiles.get(tenant, {}).get(profile)
        zero = ProfileInfo(name=profile, messages=0, memories=0, sessions=0)
        actor = self._live.get((tenant, profile))
        if actor is None:
            return reported or zero
        try:
            current = await asyncio.wait_for(
                actor.counts.remote(tenant, profile), LIVE_COUNTS_TIMEOUT_S
            )
        except RayActorError:  # died without hibernating (a crash): not live any more
            self._live.pop((tenant, profile), None)
        except Exception:  # hibernating right now, or slow: its report will do
            log.debug("no current counts from profile %s/%s", tenant, profile, exc_info=True)
        else:
            if isinstance(current, ProfileInfo):
                return current
        return reported or zero

    # -------------------------------------------------------------- discovery

    async def _discovered(self) -> None:
        """Wait for the one discovery of a catalog that has never run on this data_dir."""
        if self._discovery is None:
            self._discovery = asyncio.ensure_future(self._discover())
        await asyncio.shield(self._discovery)

    async def _discover(self) -> None:
        if self._meta("discovered_at") is None:
            # Files on other nodes join as their hosts describe themselves.
            found = local_profiles(on_this_node(self._settings)) | await self._stored_profiles()
            self._add_found(found)
            self._set_meta("discovered_at", str(time.time()).encode())
            log.info("catalog: found %d existing profiles", len(found))
        unknown = [
            (tenant, name)
            for tenant, names in self._profiles.items()
            for name, counts in names.items()
            if counts is None
        ]
        if unknown:
            self._learning = asyncio.create_task(self._learn_counts(unknown))

    def _add_found(self, found: set[Key]) -> None:
        """Profiles found rather than reported: counts unknown until they report."""
        for tenant, profile in found:
            self._profiles.setdefault(tenant, {}).setdefault(profile, None)
        self._db.executemany(
            "INSERT OR IGNORE INTO profiles (tenant, profile) VALUES (?, ?)", sorted(found)
        )

    async def _stored_profiles(self) -> set[Key]:
        """Profiles with objects under ``<prefix>/<tenant>/<profile>/`` in object storage."""
        store = ObjectStore.from_settings(self._settings.object_store)
        if store is None:
            return set()
        prefix = store.key() + "/" if store.key() else ""
        try:
            objects = await store.list(prefix)
        except Exception:  # unreachable: they are found when first used
            log.exception("catalog: cannot list object storage to find existing profiles")
            return set()
        found = set()
        for item in objects:
            parts = item.key[len(prefix) :].split("/")
            if len(parts) > 2 and NAME.fullmatch(parts[0]) and NAME.fullmatch(parts[1]):
                found.add((parts[0], parts[1]))
        return found

    async def _learn_counts(self, profiles: list[Key]) -> None:
        """Activate profiles that never reported, a few at a time, then let them hibernate."""
        # Imported here: the profile actor's own modules import this one.
        from raymem.actors.calls import ProfileCalls
        from raymem.actors.registry import ProfileRouter

        router = ProfileRouter(self._settings)
        gate = asyncio.Semaphore(DISCOVERY_CONCURRENCY)

        async def learn(tenant: str, profile: str) -> None:
            async with gate:
                if (tenant, profile) in self._leases:
                    return  # open or opening in a host: it reports on its own
                calls = ProfileCalls(router, tenant, profile)
                try:
                    await calls.info()  # it reports as it opens
                    await calls.hibernate()
                except Exception:
                    log.warning("catalog: cannot activate profile %s/%s", tenant, profile)

        await asyncio.gather(*(learn(tenant, profile) for tenant, profile in profiles))


def _profile_nodes(settings: Settings) -> dict[str, tuple[int, bool]]:
    """The alive nodes that run profile hosts: node id -> (hosts, whether the node
    declares ``HOST_RESOURCE``).

    Where some node type declares ``HOST_RESOURCE``, those nodes only, as many hosts as
    declared; otherwise every node, ``profiles.hosts_per_node`` or one per CPU.
    """
    nodes = [info for info in ray.nodes() if info["Alive"]]  # type: ignore[no-untyped-call]
    declared = {
        info["NodeID"]: (int(info["Resources"][HOST_RESOURCE]), True)
        for info in nodes
        if info["Resources"].get(HOST_RESOURCE, 0) >= 1
    }
    if declared:
        return declared
    per_node = settings.profiles.hosts_per_node
    return {
        info["NodeID"]: (per_node or max(1, int(info["Resources"].get("CPU", 1))), False)
        for info in nodes
    }


RemoteProfileCatalog = ray.remote(ProfileCatalog)


class CatalogClient:
    """Typed calls to the catalog, which is created on first use (and again if it died)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._handle: ActorHandle | None = None

    def _actor(self) -> ActorHandle:
        if self._handle is None:
            self._handle = RemoteProfileCatalog.options(
                name=CATALOG_ACTOR,
                namespace=self._settings.namespace,
                get_if_exists=True,
                lifetime="detached",
                num_cpus=0,
                resources=HEAD_NODE,  # its file stays where the cluster stays
                max_restarts=0,  # a dead catalog is created anew by its next caller
                max_concurrency=1000,
            ).remote(self._settings)
        return self._handle

    async def _call(
        self, returns: type[T], invoke: Callable[[ActorHandle], Awaitable[object]]
    ) -> T:
        try:
            result = await invoke(self._actor())
        except RayActorError:  # it died: its file holds what it knew
            self._handle = None
            result = await invoke(self._actor())
        if not isinstance(result, returns):
            raise TypeError(f"the catalog answered a {type(result).__name__}")
        return result

    async def publish(self, settings: Settings) -> None:
        await self._call(type(None), lambda catalog: catalog.publish.remote(settings))

    async def report(
        self, tenant: str, profile: str, counts: ProfileInfo, live: ActorHandle | None
    ) -> None:
        await self._call(
            type(None), lambda catalog: catalog.report.remote(tenant, profile, counts, live)
        )

    async def forget(self, tenant: str, profile: str) -> None:
        await self._call(type(None), lambda catalog: catalog.forget.remote(tenant, profile))

    async def exists(self, tenant: str, profile: str) -> bool:
        return await self._call(bool, lambda catalog: catalog.exists.remote(tenant, profile))

    async def lease(self, tenant: str, profile: str) -> tuple[str, ActorHandle]:
        """The name and handle of the host that serves the profile (assigned if none)."""
        name, host = await self._call(tuple, lambda catalog: catalog.lease.remote(tenant, profile))
        return str(name), host

    async def holder(self, tenant: str, profile: str) -> tuple[str, ActorHandle] | None:
        """The host that may have the profile open now; None when none may."""
        held = await self._call(object, lambda catalog: catalog.holder.remote(tenant, profile))
        if held is None:
            return None
        assert isinstance(held, tuple)
        return str(held[0]), held[1]

    async def hosts(self) -> list[tuple[str, ActorHandle]]:
        """The names and handles of the profile hosts (benchmarks, metrics)."""
        hosts = await self._call(list, lambda catalog: catalog.hosts.remote())
        return [(str(name), handle) for name, handle in hosts]

    async def acquire(self, tenant: str, profile: str, host: str, disk: str) -> Grant:
        grant = await self._call(
            str, lambda catalog: catalog.acquire.remote(tenant, profile, host, disk)
        )
        assert grant in ("open", "restore", "refused")
        return grant  # type: ignore[return-value]  # checked just above

    async def release(self, tenant: str, profile: str, host: str) -> None:
        await self._call(type(None), lambda catalog: catalog.release.remote(tenant, profile, host))

    async def host_failed(self, host: str) -> None:
        await self._call(type(None), lambda catalog: catalog.host_failed.remote(host))

    async def idle(self, host: str) -> bool:
        """The host has held no profile for a while; whether the catalog stops it."""
        return await self._call(bool, lambda catalog: catalog.idle.remote(host))

    async def profiles(self, tenant: str, only: list[str] | None = None) -> list[ProfileInfo]:
        listed = await self._call(list, lambda catalog: catalog.profiles.remote(tenant, only))
        return [info for info in listed if isinstance(info, ProfileInfo)]


def published_settings(namespace: str) -> Settings | None:
    """The settings the raymem app of this Ray namespace published; None if none did.

    Blocking; call it from ``ray.init``-ed code in the cluster.
    """
    try:
        catalog = ray.get_actor(CATALOG_ACTOR, namespace=namespace)
    except ValueError:  # no catalog: no app has run here
        return None
    settings: object = ray.get(catalog.settings.remote())
    return settings if isinstance(settings, Settings) else None
