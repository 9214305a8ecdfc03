"""ProfileActor: the single owner and writer of one profile's SQLite file."""

from raymem.actors.profile.archives import ArchiveOperations
from raymem.actors.profile.context import ContextOperations
from raymem.actors.profile.erasure import ErasureOperations
from raymem.actors.profile.memories import MemoryOperations
from raymem.actors.profile.procedural import ProceduralOperations
from raymem.actors.profile.sessions import SessionOperations


class ProfileActor(
    MemoryOperations,
    SessionOperations,
    ErasureOperations,
    ArchiveOperations,
    ContextOperations,
    ProceduralOperations,
):
    """One profile as a Ray actor, named ``<tenant>/<profile>``.

    Its lifecycle and background work come from ``ProfileBase``; each mixin adds
    the operations of one area. Callers use ``raymem.actors.calls.ProfileCalls``.
    """
