"""Core memory blocks on real SQLite files: caps, normalised addressing, ledger and replay."""

from datetime import UTC, datetime

import pytest

from raymem.errors import BlockFull, BlockNotFound, Conflict, EntryNotFound, InvalidRequest
from raymem.store import ProfileStore, blocks
from raymem.store.refs import block_entry_ref, parse_ref
from raymem.store.replay import replay

DIM = 8
DEFAULTS = {"user": 1_375, "project": 2_200}
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def store(tmp_path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=DIM)
    yield store
    await store.close()


async def add(store: ProfileStore, block: str, content: str):
    async with store.write() as writer:
        return await blocks.add_entry(writer, block, content, defaults=DEFAULTS, now=NOW)


async def set_limit(store: ProfileStore, block: str, limit: int):
    async with store.write() as writer:
        return await blocks.set_limit(
            writer, block, limit, defaults=DEFAULTS, max_limit=20_000, max_blocks=4, now=NOW
        )


async def test_default_blocks_exist_empty_with_their_limits(store):
    listed = blocks.read_blocks(store.quick, DEFAULTS)
    assert [(b.name, b.limit, b.size, b.entries) for b in listed] == [
        ("user", 1_375, 0, []),
        ("project", 2_200, 0, []),
    ]
    with pytest.raises(BlockNotFound, match="'notes' does not exist"):
        blocks.read_block(store.quick, "notes", DEFAULTS)
    with pytest.raises(BlockNotFound):
        await add(store, "notes", "anything")


async def test_size_is_the_rendered_block_and_duplicates_are_noops(store):
    first = await add(store, "user", "Prefers dark mode")
    second = await add(store, "user", "Lives in Vienna")
    assert not first.duplicate and not second.duplicate
    assert second.block.entries == ["Prefers dark mode", "Lives in Vienna"]
    assert second.block.size == len("Prefers dark mode\n§\nLives in Vienna")
    assert second.source_ref == block_entry_ref("user", "Lives in Vienna")
    assert second.block.entry_refs == [first.source_ref, second.source_ref]

    seq = await store.reads.ledger_seq()
    again = await add(store, "user", "  prefers   DARK mode ")
    assert again.duplicate and again.source_ref == first.source_ref
    assert again.block.entries == ["Prefers dark mode", "Lives in Vienna"]
    assert await store.reads.ledger_seq() == seq  # nothing written, nothing logged


async def test_a_write_past_the_cap_is_refused_and_nothing_is_written(store):
    await set_limit(store, "tiny", 10)
    await add(store, "tiny", "abcd")
    fitted = await add(store, "tiny", "efg")  # "abcd\n§\nefg": exactly 10 characters
    assert fitted.block.size == 10
    seq = await store.reads.ledger_seq()
    with pytest.raises(BlockFull) as refused:
        await add(store, "tiny", "h")
    error = refused.value
    assert (error.status, error.code) == (409, "block_full")
    assert (error.size, error.size_after, error.limit) == (10, 14, 10)
    assert "14 characters, past its limit of 10 (it holds 10 now)" in str(error)
    assert blocks.read_block(store.quick, "tiny", DEFAULTS).entries == ["abcd", "efg"]
    assert await store.reads.ledger_seq() == seq
    with pytest.raises(BlockFull):  # a longer rewrite does not fit either
        async with store.write() as writer:
            await blocks.replace_entry(writer, "tiny", "efg", "efghij", defaults=DEFAULTS, now=NOW)
    assert blocks.read_block(store.quick, "tiny", DEFAULTS).entries == ["abcd", "efg"]


async def test_entries_are_addressed_by_their_whole_normalised_text(store):
    for text in ("Prefers dark mode", "Lives in Vienna", "Works at Acme"):
        await add(store, "user", text)
    with pytest.raises(EntryNotFound, match="No entry of block 'user' reads 'dark mode'"):
        async with store.write() as writer:  # a substring never matches
            await blocks.remove_entry(writer, "user", "dark mode", defaults=DEFAULTS)
    async with store.write() as writer:
        replaced = await blocks.replace_entry(
            writer, "user", "LIVES  in vienna", "Lives in Graz", defaults=DEFAULTS, now=NOW
        )
    assert replaced.block.entries == ["Prefers dark mode", "Lives in Graz", "Works at Acme"]
    assert not replaced.duplicate
    async with store.write() as writer:  # rewriting into another entry's text merges them
        merged = await blocks.replace_entry(
            writer, "user", "works at acme", "prefers dark MODE", defaults=DEFAULTS, now=NOW
        )
    assert merged.duplicate and merged.block.entries == ["Prefers dark mode", "Lives in Graz"]
    async with store.write() as writer:
        left = await blocks.remove_entry(writer, "user", " prefers dark mode", defaults=DEFAULTS)
    assert left.entries == ["Lives in Graz"]


async def test_bad_entries_names_and_limits_are_refused(store):
    with pytest.raises(InvalidRequest, match="may not contain '§'"):
        await add(store, "user", "one § two")
    with pytest.raises(InvalidRequest, match="Invalid block name"):
        await set_limit(store, "../x", 100)
    with pytest.raises(InvalidRequest, match="1 to 20,000 characters"):
        await set_limit(store, "notes", 20_001)
    await add(store, "user", "x" * 50)
    with pytest.raises(BlockFull):  # a limit below what the block holds
        await set_limit(store, "user", 49)
    assert (await set_limit(store, "notes", 100))[1] is True
    assert (await set_limit(store, "notes", 200))[1] is False
    await set_limit(store, "more", 100)
    with pytest.raises(Conflict, match="holds 4 blocks"):
        await set_limit(store, "one-too-many", 100)
    with pytest.raises(InvalidRequest, match="default block 'user' cannot be deleted"):
        async with store.write() as writer:
            await blocks.delete_block(writer, "user", defaults=DEFAULTS)
    async with store.write() as writer:
        await blocks.delete_block(writer, "notes", defaults=DEFAULTS)
    assert [b.name for b in blocks.read_blocks(store.quick, DEFAULTS)] == [
        "user",
        "project",
        "more",
    ]


async def test_every_change_is_in_the_ledger_and_replays_to_the_same_blocks(store, tmp_path):
    await set_limit(store, "notes", 300)
    await add(store, "notes", "Deploys go through staging")
    await add(store, "user", "Prefers dark mode")
    await add(store, "user", "Lives in Vienna")
    async with store.write() as writer:
        await blocks.replace_entry(
            writer, "user", "lives in vienna", "Lives in Graz", defaults=DEFAULTS, now=NOW
        )
        await blocks.remove_entry(writer, "user", "prefers dark mode", defaults=DEFAULTS)
    await set_limit(store, "gone", 50)
    async with store.write() as writer:
        await blocks.delete_block(writer, "gone", defaults=DEFAULTS)
    entries = await store.reads.ledger_entries(0)
    assert [op for _, _, op, _ in entries] == [
        "block_limit",
        "block_entry_add",
        "block_entry_add",
        "block_entry_add",
        "block_entry_replace",
        "block_entry_remove",
        "block_limit",
        "block_delete",
    ]
    copy = await ProfileStore.open(tmp_path / "copy" / "profile.db", dim=DIM)
    try:
        async with copy.write() as writer:
            for seq, at, op, payload in entries:
                assert await replay(writer, seq, at, op, payload)
        assert blocks.read_blocks(copy.quick, DEFAULTS) == blocks.read_blocks(store.quick, DEFAULTS)
    finally:
        await copy.close()


def test_block_entry_refs_are_url_safe_and_parse_back():
    ref = block_entry_ref("team.notes_2", "Prefers  DARK mode")
    assert ref == block_entry_ref("team.notes_2", "prefers dark mode")
    assert ref.startswith("blk_team.notes_2_") and len(ref.rsplit("_", 1)[1]) == 12
    parsed = parse_ref(ref)
    assert (parsed.kind, parsed.block) == ("block_entry", "team.notes_2")


def test_errors_survive_pickling_as_ray_sends_them():
    import pickle

    for error in (BlockFull("user", 10, 14, 10), EntryNotFound("block 'user'", "x")):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error)
