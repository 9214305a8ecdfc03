"""A profile actor's erasure of a memory: its text removed from every copy, not hidden.

Forgetting (``memories.forget``) hides a memory; erasing removes its text, the
turns it was drawn from and the memories drawn from those turns, from the file,
the ledger and object storage (``raymem.store.erase``, ``Durability``). Session
erasure is ``sessions.delete_session``; retention's is in ``base``.
"""

from raymem.actors.profile.base import ProfileBase, entry
from raymem.store import erase, to_db_time, utc_now
from raymem.types import MemoryErasure


class ErasureOperations(ProfileBase):
    @entry
    async def erase_memory(self, memory_id: str) -> MemoryErasure:
        """Erase a memory; answers once no copy made before holds its text.

        Raises:
            MemoryNotFound: no memory has this id.
            ErasureIncomplete: erased from the file, but older copies remain; the same
                call again finishes (and erases nothing more).
        """
        async with self._open_store.write() as writer:
            erased = await erase.erase_memories(writer, [memory_id], at=to_db_time(utc_now()))
        if not erased.is_empty():
            await self._after_erasure()
        await self._finish_erasure(f"Memory {memory_id!r}")
        return MemoryErasure(
            memory_id=memory_id,
            memories_erased=len(erased.memories),
            messages_erased=len(erased.messages),
            erased_memory_ids=list(erased.memories),
        )
