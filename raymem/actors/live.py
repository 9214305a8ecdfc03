"""A bound on live profile actors per node: the least recently used hibernate first.

Each live profile actor costs a process (about 90 MB here), so a node keeps
at most ``profiles.max_live`` of them. One small named actor per node tracks
when each profile was last used (profiles report it every few seconds, not on
every call) and asks the least recently used to hibernate when a new one
activates beyond the bound. Hibernation is safe at any time: the profile's
store is durable and the next call re-activates it.
"""

import logging
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

log = logging.getLogger(__name__)


class LiveProfiles:
    """Last-use times of the live profile actors of one node."""

    def __init__(self, max_live: int) -> None:
        self.max_live = max(1, max_live)
        self._last_used: dict[str, float] = {}
        self._handles: dict[str, Any] = {}

    async def touch(self, name: str, handle: Any, idle_s: float) -> list[str]:
        """Record that ``name`` is live and was last used ``idle_s`` seconds ago.

        Returns the names asked to hibernate to make room.
        """
        self._last_used[name] = time.monotonic() - idle_s
        self._handles[name] = handle
        evicted = []
        while len(self._last_used) > self.max_live:
            oldest = min((n for n in self._last_used if n != name), key=self._last_used.__getitem__)
            evicted.append(oldest)
            self._handles.pop(oldest).hibernate.remote()
            del self._last_used[oldest]
        if evicted:
            log.info("over %d live profiles: hibernating %s", self.max_live, evicted)
        return evicted

    async def leave(self, name: str) -> None:
        self._last_used.pop(name, None)
        self._handles.pop(name, None)

    async def live(self) -> list[str]:
        return sorted(self._last_used)


RemoteLiveProfiles = ray.remote(LiveProfiles)


def live_profiles(namespace: str, max_live: int) -> Any:
    """The tracker of the current node (created on first use)."""
    node = ray.get_runtime_context().get_node_id()
    return RemoteLiveProfiles.options(
        name=f"raymem-live-{node}",
        namespace=namespace,
        get_if_exists=True,
        lifetime="detached",
        num_cpus=0,
        max_concurrency=1000,
        # Keep it on this node: it bounds this node's processes.
        scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
    ).remote(max_live)
