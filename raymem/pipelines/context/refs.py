"""Get by reference: the exact record a ``source_ref`` names, whatever its kind.

A memory comes with its whole version chain, a raw turn with the turns around it
in its session, a block entry with its block and place, an episode or a work item
as stored. A reference that names nothing here is a ``RefNotFound`` (404), one that
is not a reference an ``InvalidRef`` (400).
"""

from collections.abc import Mapping

from raymem.errors import BlockNotFound, NotFound, RefNotFound
from raymem.store import ProfileStore
from raymem.store.blocks import read_block
from raymem.store.episodes import read_episode
from raymem.store.evidence import message_by_id
from raymem.store.refs import entry_key, parse_ref
from raymem.store.work import read_item
from raymem.types import MemoryWithHistory
from raymem.types_context import (
    ResolvedBlockEntry,
    ResolvedEpisode,
    ResolvedMemory,
    ResolvedMessage,
    ResolvedRef,
    ResolvedWorkItem,
)

NEIGHBOURS = 2  # turns shown on either side of a referenced turn


async def resolve(store: ProfileStore, ref: str, *, block_limits: Mapping[str, int]) -> ResolvedRef:
    """The record ``ref`` names.

    Raises:
        InvalidRef: ``ref`` is not a reference.
        RefNotFound: nothing in this profile has it.
    """
    parsed = parse_ref(ref)
    try:
        if parsed.kind == "memory":
            memory = await store.reads.get_memory(parsed.id)
            history = await store.reads.history(parsed.id)
            fields = {name: getattr(memory, name) for name in memory.__struct_fields__}
            return ResolvedMemory(
                source_ref=ref, memory=MemoryWithHistory(**fields, history=history)
            )
        if parsed.kind == "message":
            return _message(store, ref, parsed.id)
        if parsed.kind == "episode":
            return ResolvedEpisode(source_ref=ref, episode=read_episode(store.quick, parsed.id))
        if parsed.kind == "work_item":
            return ResolvedWorkItem(source_ref=ref, work_item=read_item(store.quick, parsed.id))
        assert parsed.block is not None  # parse_ref gives every block entry its block
        return _block_entry(store, ref, parsed.block, parsed.id, block_limits)
    except NotFound as exc:
        if isinstance(exc, RefNotFound):
            raise
        raise RefNotFound(ref) from exc


def _message(store: ProfileStore, ref: str, message_id: str) -> ResolvedMessage:
    found = message_by_id(store.quick, message_id)
    if found is None:
        raise RefNotFound(ref)
    seq, message = found
    around = store.search.adjacent_messages([seq], window=NEIGHBOURS).get(seq, [])
    return ResolvedMessage(
        source_ref=ref,
        message=message,
        before=[turn for other, turn in around if other < seq],
        after=[turn for other, turn in around if other > seq],
    )


def _block_entry(
    store: ProfileStore, ref: str, block: str, key: str, block_limits: Mapping[str, int]
) -> ResolvedBlockEntry:
    try:
        found = read_block(store.quick, block, block_limits)
    except BlockNotFound as exc:
        raise RefNotFound(ref) from exc
    for position, entry in enumerate(found.entries):
        if entry_key(entry) == key:
            return ResolvedBlockEntry(source_ref=ref, block=block, content=entry, position=position)
    raise RefNotFound(ref)
