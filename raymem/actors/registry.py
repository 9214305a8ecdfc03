"""Routing calls to profiles: which host serves a profile, caching that, and retries.

A profile is open inside a profile host (``actors/host.py``); the catalog leases
each profile to one host (``ProfileCatalog.lease``), so concurrent first calls end
with one open copy. A call is a callable the host runs against the profile
object (``raymem.actors.calls`` holds the typed ones). A call that meets a
hibernating profile, a profile that moved to another host, or a dead host is
retried against a fresh activation; every operation is idempotent
(content-addressed turns, caller-chosen memory ids), which makes the retry safe.
"""

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from ray.exceptions import OutOfMemoryError, RayActorError, RayTaskError
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential_jitter,
)

from raymem.actors.catalog import CatalogClient
from raymem.actors.profile import ProfileActor
from raymem.config import Settings
from raymem.errors import ProfileClosing, ProfileMoved, ProfileNotFound
from raymem.export import ObjectStore

log = logging.getLogger(__name__)

T = TypeVar("T")

# Ray types a handle's methods only for methods decorated with ``@ray.method``; the
# typed surface is ``ProfileCalls``, which checks what each call returns.
ActorHandle = Any

# A profile that hibernates or moves re-opens within milliseconds in a warm host: the
# first retry comes quickly, later ones (a host restarting) back off.
RETRY_FIRST_WAIT_S = 0.02
RETRY_MAX_WAIT_S = 0.5
RETRY_FOR_S = 30.0
RELEASE_POLL_S = 0.01
RELEASE_TIMEOUT_S = 5.0

Operation = Callable[[ProfileActor], Awaitable[T]]


def _host_lost(exc: BaseException) -> bool:
    """The host died (a crash, its node gone) or Ray's memory monitor killed it: an
    ``OutOfMemoryError`` is not a ``RayActorError``."""
    return isinstance(exc, RayActorError | OutOfMemoryError)


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, RayTaskError):
        return isinstance(exc.cause, ProfileClosing | ProfileMoved)
    return _host_lost(exc) or isinstance(exc, ProfileClosing | ProfileMoved)


def _retrying() -> AsyncRetrying:
    return AsyncRetrying(
        retry=retry_if_exception(_retryable),
        wait=wait_exponential_jitter(initial=RETRY_FIRST_WAIT_S, max=RETRY_MAX_WAIT_S),
        stop=stop_after_delay(RETRY_FOR_S),
        reraise=True,
    )


class ProfileRouter:
    """Finds the host of a profile and runs calls there, retrying where safe."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.catalog = CatalogClient(settings)
        self._hosts: dict[tuple[str, str], tuple[str, ActorHandle]] = {}
        self._object_store = ObjectStore.from_settings(settings.object_store)

    async def exists(self, tenant: str, profile: str) -> bool:
        """Whether the catalog knows the profile, or object storage holds a copy of it."""
        if await self.catalog.exists(tenant, profile):
            return True
        if self._object_store is None:
            return False
        prefix = self._object_store.key(tenant, profile) + "/"
        return bool(await self._object_store.list(prefix, page_size=1))

    async def host(self, tenant: str, profile: str, *, create: bool) -> tuple[str, ActorHandle]:
        """The name and handle of the profile's host; ProfileNotFound if absent and not
        ``create``."""
        cached = self._hosts.get((tenant, profile))
        if cached is not None:
            return cached
        if not create and not await self.exists(tenant, profile):
            raise ProfileNotFound(profile)
        leased = await self.catalog.lease(tenant, profile)
        self._hosts[(tenant, profile)] = leased
        return leased

    def forget_host(self, tenant: str, profile: str) -> None:
        self._hosts.pop((tenant, profile), None)

    async def live_host(self, tenant: str, profile: str) -> ActorHandle | None:
        """The host that may hold the profile open now; None otherwise (never activates it)."""
        held = await self.catalog.holder(tenant, profile)
        return None if held is None else held[1]

    async def call(
        self, tenant: str, profile: str, operation: Operation[T], *, create: bool = False
    ) -> T:
        """``operation(profile)`` run in the profile's host, re-activating after hibernation,
        a move or a host's death.

        Args:
            operation: one call on the profile object, e.g. ``lambda p: p.info()``; it is
                pickled to the host and runs again on a retry.
            create: activate a new, empty profile if there is none.

        Raises:
            ProfileNotFound: there is no such profile and ``create`` is false.
        """
        async for attempt in _retrying():
            with attempt:
                name, host = await self.host(tenant, profile, create=create)
                try:
                    result: T = await host.run.remote(tenant, profile, self.settings, operation)
                    return result
                except BaseException as exc:
                    if _retryable(exc):
                        self.forget_host(tenant, profile)
                    if _host_lost(exc):
                        await self.catalog.host_failed(name)
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def stream(
        self, tenant: str, profile: str, operation: Callable[[ProfileActor], AsyncIterator[Any]]
    ) -> AsyncIterator[Any]:
        """The items of a streaming operation (an async generator of the profile), as they
        come. Not retried: part of the stream may already have been passed on."""
        _, host = await self.host(tenant, profile, create=False)
        refs = host.run_stream.options(num_returns="streaming").remote(
            tenant, profile, self.settings, operation
        )
        async for ref in refs:
            yield await ref

    async def wait_released(self, tenant: str, profile: str) -> None:
        """Wait until no host holds the profile's lease, a few seconds at most."""
        self.forget_host(tenant, profile)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RELEASE_TIMEOUT_S
        while await self.live_host(tenant, profile) is not None and loop.time() < deadline:
            await asyncio.sleep(RELEASE_POLL_S)
