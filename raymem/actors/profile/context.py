"""A profile actor's context operations: core blocks, work items, working memory,
episodes, context assembly, get by reference, and flush before compaction."""

import numpy as np

from raymem.actors.profile.base import ProfileBase, entry
from raymem.errors import WorkItemNotFound
from raymem.pipelines.context import episodes as episode_pipeline
from raymem.pipelines.context.assemble import assemble, block_limits
from raymem.pipelines.context.flush import flush
from raymem.pipelines.context.refs import resolve
from raymem.pipelines.context.working import snapshot
from raymem.store import blocks as block_store
from raymem.store import episodes as episode_store
from raymem.store import utc_now
from raymem.store import work as work_store
from raymem.types_context import (
    Block,
    BlockList,
    BlockSaved,
    BlockWrite,
    ClosedWorkItem,
    ContextRequest,
    ContextResult,
    Episode,
    EpisodePage,
    FlushRequest,
    FlushResult,
    Resolved,
    WorkingMemory,
    WorkItem,
    WorkItemList,
    WorkItemOpen,
    WorkItemStatus,
    WorkItemUpdate,
)


class ContextOperations(ProfileBase):
    # ----------------------------------------------------------- core blocks

    @entry
    async def list_blocks(self) -> BlockList:
        limits = block_limits(self.settings.context)
        return BlockList(blocks=block_store.read_blocks(self._open_store.quick, limits))

    @entry
    async def set_block_limit(self, name: str, limit: int) -> BlockSaved:
        """Create the block with ``limit``, or change its limit."""
        context = self.settings.context
        async with self._open_store.write() as writer:
            block, created = await block_store.set_limit(
                writer,
                name,
                limit,
                defaults=block_limits(context),
                max_limit=context.max_block_limit,
                max_blocks=context.max_blocks,
                now=utc_now(),
            )
        await self._after_write()
        return BlockSaved(block=block, created=created)

    @entry
    async def delete_block(self, name: str) -> None:
        async with self._open_store.write() as writer:
            await block_store.delete_block(
                writer, name, defaults=block_limits(self.settings.context)
            )
        await self._after_write()

    @entry
    async def add_block_entry(self, name: str, content: str) -> BlockWrite:
        async with self._open_store.write() as writer:
            written = await block_store.add_entry(
                writer, name, content, defaults=block_limits(self.settings.context), now=utc_now()
            )
        if not written.duplicate:
            await self._after_write()
        return written

    @entry
    async def replace_block_entry(self, name: str, old: str, new: str) -> BlockWrite:
        async with self._open_store.write() as writer:
            written = await block_store.replace_entry(
                writer, name, old, new, defaults=block_limits(self.settings.context), now=utc_now()
            )
        await self._after_write()
        return written

    @entry
    async def remove_block_entry(self, name: str, content: str) -> Block:
        async with self._open_store.write() as writer:
            block = await block_store.remove_entry(
                writer, name, content, defaults=block_limits(self.settings.context)
            )
        await self._after_write()
        return block

    # ------------------------------------------------ work items and episodes

    @entry
    async def open_work_item(self, request: WorkItemOpen, item_id: str) -> WorkItem:
        """Open a work item under ``item_id`` (chosen by the caller: a retry opens one)."""
        store = self._open_store
        try:
            return work_store.read_item(store.quick, item_id)
        except WorkItemNotFound:
            pass
        async with store.write() as writer:
            item = await work_store.open_item(writer, request, item_id=item_id, now=utc_now())
        await self._after_write()
        return item

    @entry
    async def update_work_item(self, item_id: str, request: WorkItemUpdate) -> WorkItem:
        async with self._open_store.write() as writer:
            item = await work_store.update_item(writer, item_id, request, now=utc_now())
        await self._after_write()
        return item

    @entry
    async def close_work_item(self, item_id: str, outcome: str | None) -> ClosedWorkItem:
        """Close the item and finalise its episode (by the configured model, or the rules)."""
        chat, builder = self._episode_model()
        closed = await episode_pipeline.close_work_item(
            self._open_store,
            item_id,
            outcome,
            settings=self.settings.context,
            chat=chat,
            builder=builder,
            now=utc_now(),
        )
        await self._after_write()
        return closed

    @entry
    async def get_work_item(self, item_id: str) -> WorkItem:
        return work_store.read_item(self._open_store.quick, item_id)

    @entry
    async def list_work_items(
        self,
        *,
        session_id: str | None,
        status: WorkItemStatus | None,
        limit: int,
        before_seq: int | None,
    ) -> WorkItemList:
        items, next_seq = work_store.list_items(
            self._open_store.quick,
            session_id=session_id,
            status=status,
            limit=limit,
            before_seq=before_seq,
        )
        return WorkItemList(
            work_items=items, next_cursor=None if next_seq is None else str(next_seq)
        )

    @entry
    async def working_memory(self, session_id: str | None) -> WorkingMemory:
        return snapshot(self._open_store, self.settings.context, session_id)

    @entry
    async def list_episodes(
        self, *, session_id: str | None, limit: int, before_seq: int | None
    ) -> EpisodePage:
        episodes, next_seq = episode_store.list_episodes(
            self._open_store.quick, session_id=session_id, limit=limit, before_seq=before_seq
        )
        return EpisodePage(
            episodes=episodes, next_cursor=None if next_seq is None else str(next_seq)
        )

    @entry
    async def get_episode(self, episode_id: str) -> Episode:
        return episode_store.read_episode(self._open_store.quick, episode_id)

    # ------------------------------------------------ context, refs and flush

    @entry
    async def context(
        self, request: ContextRequest, query_vector: np.ndarray | None = None
    ) -> ContextResult:
        """The assembled context; ``query_vector`` when the caller has embedded the query."""
        vector = None if query_vector is None else np.asarray(query_vector, dtype=np.float32)
        return await assemble(
            self._open_store,
            self._open_recaller,
            request,
            self.settings.context,
            query_vector=vector,
            slow=self._slow_sections,
        )

    @entry
    async def resolve_ref(self, ref: str) -> Resolved:
        limits = block_limits(self.settings.context)
        return await resolve(self._open_store, ref, block_limits=limits)

    @entry
    async def flush(self, request: FlushRequest) -> FlushResult:
        """Store what is durable in a slice of conversation; best effort, never raises for a
        failed stage (the result's ``error`` says what failed)."""
        result = await flush(
            self._open_store,
            request,
            block_limits=block_limits(self.settings.context),
            **self._models(),
        )
        await self._after_write()
        return result
