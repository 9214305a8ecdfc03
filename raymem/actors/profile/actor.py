"""ProfileActor: the single owner and writer of one profile's SQLite file."""

from raymem.actors.profile.archives import ArchiveOperations
from raymem.actors.profile.context import ContextOperations
from raymem.actors.profile.dreams import DreamOperations
from raymem.actors.profile.erasure import ErasureOperations
from raymem.actors.profile.memories import MemoryOperations
from raymem.actors.profile.procedural import ProceduralOperations
from raymem.actors.profile.review import ReviewOperations
from raymem.actors.profile.sessions import SessionOperations


class ProfileActor(
    MemoryOperations,
    SessionOperations,
    ErasureOperations,
    ArchiveOperations,
    ContextOperations,
    ProceduralOperations,
    DreamOperations,
    ReviewOperations,
):
    """One open profile, named ``<tenant>/<profile>``, inside a ``ProfileHost``.

    Not a Ray actor itself: a host (``raymem.actors.host``) holds many of these
    and runs each call against one of them. Its lifecycle and background work
    come from ``ProfileBase``; each mixin adds the operations of one area (a new
    subsystem adds its mixin to this list). Callers use
    ``raymem.actors.calls.ProfileCalls``. ``DreamOperations`` extends opening and
    hibernating, to resume and stop a profile's dream with them.
    """
