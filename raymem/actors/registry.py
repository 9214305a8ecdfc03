"""Routing calls to profile actors by name: activation, handle caching and retries.

An actor is named ``<tenant>/<profile>`` in the configured namespace and
created with ``get_if_exists=True``, so concurrent first calls end with one
actor. A call that meets a hibernating or dead actor is retried against a
fresh activation; every actor operation is idempotent (content-addressed
turns, caller-chosen memory ids), which makes the retry safe.

The router knows no operation by name: it runs a callable that makes one call
on the actor's handle. ``raymem.actors.calls.ProfileCalls`` holds the typed
operations.
"""

import asyncio
import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import ray
from ray.exceptions import RayActorError, RayTaskError
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential_jitter,
)

from raymem.actors.catalog import CatalogClient
from raymem.actors.profile import ProfileActor
from raymem.config import Settings
from raymem.errors import ProfileClosing, ProfileNotFound
from raymem.export import ObjectStore

log = logging.getLogger(__name__)

T = TypeVar("T")

# Ray types a handle's methods only for methods decorated with ``@ray.method``; the
# typed surface is ``ProfileCalls``, which checks what each call returns.
ActorHandle = Any

RemoteProfileActor = ray.remote(ProfileActor)

# A re-activation after hibernation takes about 1 s here: the first retry comes
# quickly (the old actor may only be finishing its exit), later ones back off.
RETRY_FIRST_WAIT_S = 0.02
RETRY_MAX_WAIT_S = 0.5
RETRY_FOR_S = 30.0
# A destroyed actor frees its name about 50 ms after answering (it exits then).
RELEASE_POLL_S = 0.01
RELEASE_TIMEOUT_S = 5.0


def actor_name(tenant: str, profile: str) -> str:
    return f"{tenant}/{profile}"


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, RayTaskError):
        return isinstance(exc.cause, ProfileClosing)
    return isinstance(exc, RayActorError | ProfileClosing)


def _retrying() -> AsyncRetrying:
    return AsyncRetrying(
        retry=retry_if_exception(_retryable),
        wait=wait_exponential_jitter(initial=RETRY_FIRST_WAIT_S, max=RETRY_MAX_WAIT_S),
        stop=stop_after_delay(RETRY_FOR_S),
        reraise=True,
    )


class ProfileRouter:
    """Finds or activates profile actors and calls them, retrying where safe."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.catalog = CatalogClient(settings)
        self._handles: dict[str, ActorHandle] = {}
        self._object_store = ObjectStore.from_settings(settings.object_store)

    def live_handle(self, tenant: str, profile: str) -> ActorHandle | None:
        """The profile's actor if it is live now; None otherwise (never activates it)."""
        try:
            return ray.get_actor(actor_name(tenant, profile), namespace=self.settings.namespace)
        except ValueError:
            return None

    async def exists(self, tenant: str, profile: str) -> bool:
        """Whether the catalog knows the profile, or object storage holds a copy of it."""
        if await self.catalog.exists(tenant, profile):
            return True
        if self._object_store is None:
            return False
        prefix = self._object_store.key(tenant, profile) + "/"
        return bool(await self._object_store.list(prefix, page_size=1))

    async def handle(self, tenant: str, profile: str, *, create: bool) -> ActorHandle:
        """The actor of a profile, activating it; ProfileNotFound if absent and not ``create``."""
        name = actor_name(tenant, profile)
        cached = self._handles.get(name)
        if cached is not None:
            return cached
        if not create and not await self.exists(tenant, profile):
            raise ProfileNotFound(profile)
        handle = RemoteProfileActor.options(
            name=name,
            namespace=self.settings.namespace,
            get_if_exists=True,
            lifetime="detached",
            num_cpus=0,
            max_restarts=0,
            max_concurrency=1000,
        ).remote(tenant, profile, self.settings)
        self._handles[name] = handle
        return handle

    def forget_handle(self, tenant: str, profile: str) -> None:
        self._handles.pop(actor_name(tenant, profile), None)

    async def call(
        self,
        tenant: str,
        profile: str,
        invoke: Callable[[ActorHandle], Awaitable[T]],
        *,
        create: bool = False,
    ) -> T:
        """``invoke(actor)``, re-activating the actor after hibernation or death.

        Args:
            invoke: makes one call on the actor's handle, e.g.
                ``lambda actor: actor.info.remote()``; it runs again on a retry.
            create: activate a new, empty profile if there is none.

        Raises:
            ProfileNotFound: there is no such profile and ``create`` is false.
        """
        async for attempt in _retrying():
            with attempt:
                handle = await self.handle(tenant, profile, create=create)
                try:
                    return await invoke(handle)
                except BaseException as exc:
                    if _retryable(exc):
                        self.forget_handle(tenant, profile)
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def stream(
        self, tenant: str, profile: str, invoke: Callable[[ActorHandle], AsyncIterable[Any]]
    ) -> AsyncIterator[Any]:
        """The items of a streaming actor call (an async generator method), as they come.

        Not retried: part of the stream may already have been passed on.
        """
        handle = await self.handle(tenant, profile, create=False)
        async for ref in invoke(handle):
            yield await ref

    async def wait_released(self, tenant: str, profile: str) -> None:
        """Wait until the profile's actor has exited and freed its name, a few seconds at most."""
        self.forget_handle(tenant, profile)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RELEASE_TIMEOUT_S
        while self.live_handle(tenant, profile) is not None and loop.time() < deadline:
            await asyncio.sleep(RELEASE_POLL_S)
