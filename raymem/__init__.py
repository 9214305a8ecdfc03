"""raymem: self-hosted memory for AI agents, on Ray."""

__version__ = "0.1.0"

from raymem.client import AsyncClient, Client, RaymemHTTPError
from raymem.config import Settings, load_settings
from raymem.types import (
    IngestResult,
    Memory,
    MemoryWithHistory,
    RecallHit,
    RecallResult,
)


def get_profile(name: str, **options: object) -> "LocalProfile":  # noqa: F821
    """A profile of the raymem app on the current Ray cluster, called without HTTP.

    See ``raymem.actors.local.get_profile``; imported lazily so that HTTP clients
    do not load Ray.
    """
    from raymem.actors.local import get_profile as _get_profile

    return _get_profile(name, **options)  # type: ignore[arg-type]


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
