"""A profile actor's memory operations: ingest, remember, recall, list, get, forget."""

import numpy as np

from raymem.actors.profile.base import ProfileBase, entry
from raymem.errors import MemoryNotFound
from raymem.pipelines import ingest as ingest_pipeline
from raymem.types import (
    IngestRequest,
    IngestResult,
    MemoryPage,
    MemoryType,
    MemoryWithHistory,
    RecallRequest,
    RecallResult,
    RememberRequest,
)


class MemoryOperations(ProfileBase):
    @entry
    async def ingest(self, request: IngestRequest) -> IngestResult:
        result = await ingest_pipeline.ingest(
            self._open_store, request.session_id, request.messages, **self._models()
        )
        await self._after_write()
        return result

    @entry
    async def remember(self, request: RememberRequest, memory_id: str) -> MemoryWithHistory:
        store = self._open_store
        try:  # a retried call: the memory was already written under this id
            await store.reads.get_memory(memory_id)
            held_by = memory_id
        except MemoryNotFound:
            held_by, _ = await ingest_pipeline.remember(
                store,
                request.content,
                memory_id=memory_id,
                session_id=request.session_id,
                memory_type=request.type,
                importance=request.importance,
                **self._models(),
            )
        await self._after_write()
        return await self._with_history(held_by)

    @entry
    async def recall(
        self, request: RecallRequest, query_vector: np.ndarray | None = None
    ) -> RecallResult:
        """Recall; ``query_vector``, when the caller has embedded the query already.

        Pass the vector as a numpy array: Ray pickles an array as one buffer, while a
        list of 384 floats took 1.4 ms more per call here.
        """
        vector = None if query_vector is None else np.asarray(query_vector, dtype=np.float32)
        result = await self._open_recaller.recall(request, query_vector=vector)
        self._note_use(result)  # ranking's prior and a dream's decay read it
        return result

    @entry
    async def list_memories(
        self,
        *,
        types: list[MemoryType] | None,
        session_id: str | None,
        include_superseded: bool,
        limit: int,
        before_seq: int | None,
    ) -> MemoryPage:
        memories, next_seq = await self._open_store.reads.list_memories(
            types=types,
            session_id=session_id,
            include_superseded=include_superseded,
            limit=limit,
            before_seq=before_seq,
        )
        return MemoryPage(
            memories=memories, next_cursor=None if next_seq is None else str(next_seq)
        )

    @entry
    async def get_memory(self, memory_id: str) -> MemoryWithHistory:
        return await self._with_history(memory_id)

    async def _with_history(self, memory_id: str) -> MemoryWithHistory:
        store = self._open_store
        memory = await store.reads.get_memory(memory_id)
        history = await store.reads.history(memory_id)
        return MemoryWithHistory(
            **{f: getattr(memory, f) for f in memory.__struct_fields__}, history=history
        )

    @entry
    async def forget(self, memory_id: str) -> None:
        async with self._open_store.write() as writer:
            if not await writer.forget(memory_id):
                raise MemoryNotFound(memory_id)
        await self._after_write()
