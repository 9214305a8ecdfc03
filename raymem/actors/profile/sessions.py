"""A profile actor's session operations: append a turn, read the last turns, list, end
(consolidate, and finalise the session's episode), erase."""

from raymem.actors.profile.base import ProfileBase, entry
from raymem.errors import SessionNotFound
from raymem.pipelines import ingest as ingest_pipeline
from raymem.pipelines.context import episodes
from raymem.pipelines.procedural.sequences import close_session as close_action_sequence
from raymem.store import erase, to_db_time, utc_now
from raymem.types import (
    AppendRequest,
    MemoryCounts,
    MessageIn,
    MessageList,
    Session,
    SessionDeleted,
    SessionEnded,
    SessionList,
    StoredMessage,
)


class SessionOperations(ProfileBase):
    @entry
    async def append_message(self, session_id: str, request: AppendRequest) -> StoredMessage:
        turn = MessageIn(role=request.role, content=request.content, created_at=request.created_at)
        stored = await ingest_pipeline.append_turn(
            self._open_store, session_id, turn, embed=self._embed
        )
        await self._after_write()
        return stored

    @entry
    async def last_messages(self, session_id: str, last: int | None) -> MessageList:
        store = self._open_store
        await store.reads.get_session(session_id)  # 404 for an unknown session
        rows = await store.reads.session_messages(session_id, last=last)
        return MessageList(messages=[message for _, message in rows])

    @entry
    async def list_sessions(self) -> SessionList:
        return SessionList(sessions=await self._open_store.reads.list_sessions())

    @entry
    async def end_session(self, session_id: str) -> SessionEnded:
        """Consolidate the session's turns into memories, and close its agent's actions
        into a sequence (procedural memory). A session known only by its actions ends too."""
        store = self._open_store
        sequence = await close_action_sequence(
            store, session_id, utc_now(), summariser=self._intent_summariser()
        )
        try:
            await store.reads.get_session(session_id)
        except SessionNotFound:
            if sequence is None:
                raise
            await self._after_write()
            return SessionEnded(
                session=Session(
                    id=session_id, started_at=sequence.started_at, ended_at=sequence.closed_at
                ),
                memories=MemoryCounts(added=0, superseded=0, duplicates=0),
                memory_ids=[],
                action_sequence_id=sequence.id,
            )
        reconciled = await ingest_pipeline.consolidate_session(store, session_id, **self._models())
        chat, builder = self._episode_model()
        episode = await episodes.finalise_session(
            store,
            session_id,
            settings=self.settings.context,
            chat=chat,
            builder=builder,
            now=utc_now(),
        )
        await self._after_write()
        return SessionEnded(
            session=await store.reads.get_session(session_id),
            memories=MemoryCounts(
                added=len(reconciled.added),
                superseded=reconciled.superseded,
                duplicates=reconciled.duplicates,
            ),
            memory_ids=reconciled.added,
            episode_id=None if episode is None else episode.id,
            action_sequence_id=None if sequence is None else sequence.id,
        )

    @entry
    async def delete_session(self, session_id: str) -> SessionDeleted:
        """Erase a session: its turns, its memories and the memories drawn from its turns,
        and what the subsystems keep of it (``raymem.store.erase_tables``).

        A retry after ``ErasureIncomplete`` finishes removing the old copies, then
        answers ``SessionNotFound``: the session is gone.
        """
        async with self._open_store.write() as writer:
            erased = await erase.erase_session(writer, session_id, at=to_db_time(utc_now()))
        if not erased.erasure.is_empty():
            await self._after_erasure()
        await self._finish_erasure(f"Session {session_id!r}")
        if erased.erasure.is_empty():
            raise SessionNotFound(session_id)
        return SessionDeleted(
            session_id=session_id,
            messages_deleted=len(erased.erasure.messages),
            memories_forgotten=erased.memories_forgotten,
            memories_erased=len(erased.erasure.memories),
        )
