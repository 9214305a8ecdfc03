"""Routing calls to profile actors by name: activation, handle caching and retries.

An actor is named ``<tenant>/<profile>`` in the configured namespace and
created with ``get_if_exists=True``, so concurrent first calls end with one
actor. A call that meets a hibernating or dead actor is retried against a
fresh activation; every actor operation is idempotent (content-addressed
turns, caller-chosen memory ids), which makes the retry safe.
"""

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential_jitter,
)

from raymem.actors.profile import ProfileActor, profile_path
from raymem.config import Settings
from raymem.errors import ProfileClosing, ProfileNotFound
from raymem.export import ObjectStore

log = logging.getLogger(__name__)

RemoteProfileActor = ray.remote(ProfileActor)


def actor_name(tenant: str, profile: str) -> str:
    return f"{tenant}/{profile}"


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, RayTaskError):
        return isinstance(exc.cause, ProfileClosing)
    return isinstance(exc, RayActorError | ProfileClosing)


def _retrying_kwargs() -> dict[str, Any]:
    return {
        "retry": retry_if_exception(_retryable),
        "wait": wait_exponential_jitter(initial=0.02, max=0.5),
        "stop": stop_after_delay(30),
        "reraise": True,
    }


def unwrap(exc: BaseException) -> BaseException:
    """The exception raised inside the actor, when ``exc`` carries one across Ray."""
    if isinstance(exc, RayTaskError) and exc.cause is not None:
        return exc.cause
    return exc


class ProfileRouter:
    """Finds or activates profile actors and calls them, retrying where safe."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._handles: dict[str, Any] = {}
        self._object_store = ObjectStore.from_settings(settings.object_store)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_lock = threading.Lock()

    def _live(self, tenant: str, profile: str) -> bool:
        try:
            ray.get_actor(actor_name(tenant, profile), namespace=self.settings.namespace)
        except ValueError:
            return False
        return True

    async def exists(self, tenant: str, profile: str) -> bool:
        """Whether the profile has data here, a live actor, or a copy in object storage."""
        if profile_path(self.settings, tenant, profile).exists() or self._live(tenant, profile):
            return True
        if self._object_store is None:
            return False
        prefix = self._object_store.key(tenant, profile) + "/"
        return bool(await self._object_store.list(prefix, page_size=1))

    async def handle(self, tenant: str, profile: str, *, create: bool) -> Any:
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
        method: str,
        *args: Any,
        create: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Call ``method`` on the profile's actor, re-activating it after hibernation or death."""
        async for attempt in AsyncRetrying(**_retrying_kwargs()):
            with attempt:
                handle = await self.handle(tenant, profile, create=create)
                try:
                    return await getattr(handle, method).remote(*args, **kwargs)
                except BaseException as exc:
                    if _retryable(exc):
                        self.forget_handle(tenant, profile)
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def stream(
        self, tenant: str, profile: str, method: str, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """The items of a streaming (async generator) actor method, as they come."""
        handle = await self.handle(tenant, profile, create=False)
        refs = getattr(handle, method).options(num_returns="streaming").remote(*args, **kwargs)
        async for ref in refs:
            yield await ref

    def call_sync(
        self,
        tenant: str,
        profile: str,
        method: str,
        *args: Any,
        create: bool = False,
        **kwargs: Any,
    ) -> Any:
        """The blocking form of ``call``, usable from any thread, inside an event loop or not."""
        coro = self.call(tenant, profile, method, *args, create=create, **kwargs)
        return asyncio.run_coroutine_threadsafe(coro, self._background_loop()).result()

    def _background_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, daemon=True).start()
            return self._loop

    async def delete(self, tenant: str, profile: str) -> None:
        """Delete a profile's data (local and in object storage) and free its name."""
        if not await self.exists(tenant, profile):
            raise ProfileNotFound(profile)
        await self.call(tenant, profile, "destroy")
        self.forget_handle(tenant, profile)
        # The name is freed once the actor exits: wait so a re-create starts clean.
        for _ in range(500):
            if not self._live(tenant, profile):
                return
            await asyncio.sleep(0.01)
