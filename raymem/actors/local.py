"""In-cluster access to a profile: call its actor directly, without HTTP."""

import uuid
from typing import Any

from raymem.actors.registry import ProfileRouter
from raymem.config import Settings, load_settings
from raymem.names import DEFAULT_TENANT, validate_name
from raymem.types import (
    IngestRequest,
    IngestResult,
    MemoryPage,
    MemoryWithHistory,
    MessageIn,
    RecallRequest,
    RecallResult,
    RememberRequest,
)


class LocalProfile:
    """A profile reached through its Ray actor from code running inside the cluster."""

    def __init__(self, name: str, *, tenant: str, router: ProfileRouter) -> None:
        self.name, self.tenant, self._router = name, tenant, router

    def _call(self, method: str, *args: Any, create: bool = False, **kwargs: Any) -> Any:
        return self._router.call_sync(
            self.tenant, self.name, method, *args, create=create, **kwargs
        )

    def ingest(self, messages: list[dict[str, Any]], *, session_id: str) -> IngestResult:
        turns = [MessageIn(**message) for message in messages]
        return self._call(
            "ingest", IngestRequest(session_id=session_id, messages=turns), create=True
        )

    def remember(self, content: str, **options: Any) -> MemoryWithHistory:
        request = RememberRequest(content=content, **options)
        return self._call("remember", request, uuid.uuid4().hex, create=True)

    def recall(self, query: str, **options: Any) -> RecallResult:
        return self._call("recall", RecallRequest(query=query, **options))

    def list(self, *, limit: int = 50, include_superseded: bool = False) -> MemoryPage:
        return self._call(
            "list_memories",
            types=None,
            session_id=None,
            include_superseded=include_superseded,
            limit=limit,
            before_seq=None,
        )

    def get(self, memory_id: str) -> MemoryWithHistory:
        return self._call("get_memory", memory_id)

    def forget(self, memory_id: str) -> None:
        self._call("forget", memory_id)


def get_profile(
    name: str, *, tenant: str = DEFAULT_TENANT, settings: Settings | None = None
) -> LocalProfile:
    """A profile of the raymem app running on the current Ray cluster (``ray.init`` first).

    Args:
        name: the profile name.
        tenant: whose profile; in-cluster code is trusted to name it.
        settings: the service's settings (read from ``RAYMEM_*`` and the config file if None).
    """
    validate_name(name)
    return LocalProfile(name, tenant=tenant, router=ProfileRouter(settings or load_settings()))
