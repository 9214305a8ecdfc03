"""raymem: self-hosted memory for AI agents, on Ray."""

__version__ = "0.1.0"

from typing import TYPE_CHECKING

from raymem.client import AsyncClient, Client, RaymemHTTPError
from raymem.config import Settings, load_settings
from raymem.names import DEFAULT_TENANT
from raymem.types import (
    IngestResult,
    Memory,
    MemoryWithHistory,
    RecallHit,
    RecallResult,
)

if TYPE_CHECKING:
    from raymem.actors.local import LocalProfile


def get_profile(
    name: str,
    *,
    tenant: str = DEFAULT_TENANT,
    namespace: str | None = None,
    settings: Settings | None = None,
) -> "LocalProfile":
    """A profile of the raymem app on the current Ray cluster, called without HTTP.

    See ``raymem.actors.local.get_profile``; imported lazily so that HTTP clients
    do not load Ray. ``namespace`` defaults to the app's default namespace.
    """
    from raymem.actors.local import DEFAULT_NAMESPACE
    from raymem.actors.local import get_profile as _get_profile

    return _get_profile(
        name, tenant=tenant, namespace=namespace or DEFAULT_NAMESPACE, settings=settings
    )


__all__ = [
    "AsyncClient",
    "Client",
    "IngestResult",
    "Memory",
    "MemoryWithHistory",
    "RaymemHTTPError",
    "RecallHit",
    "RecallResult",
    "Settings",
    "__version__",
    "get_profile",
    "load_settings",
]
