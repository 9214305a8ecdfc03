"""Core memory blocks: named, capped lists of entries that every assembled context starts with.

A block's size is the length of its rendered text, its entries joined by
``ENTRY_SEPARATOR`` exactly as context assembly shows them, and a write that would
take it past its limit is refused with ``BlockFull``: nothing is ever cut, so the
caller rewrites or drops entries (the curation that small caps force). Entries are
addressed by their whole text after normalisation (``refs.normalise``), never by
a substring, so an edit cannot land on the wrong entry. The default blocks exist in
every profile with the configured limits; others are created by setting a limit.

Reads run on the blocking read connection (a profile holds a few dozen blocks at
most); checks that decide a write read inside its transaction. Every change is
logged in the ledger, and each op's replayer applies it to another copy.
"""

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from raymem.errors import BlockFull, BlockNotFound, Conflict, EntryNotFound, InvalidRequest
from raymem.store.refs import block_entry_ref, normalise
from raymem.store.rows import to_db_time
from raymem.store.writer import StoreWriter, fetch
from raymem.types import NAME_PATTERN
from raymem.types_context import Block, BlockWrite

ENTRY_SEPARATOR = "\n§\n"
SEPARATOR_MARK = "§"

_NAME = re.compile(NAME_PATTERN)
_LIMITS_SQL = "SELECT name, char_limit FROM context_blocks"
_ENTRIES_SQL = "SELECT seq, content FROM block_entries WHERE block = ? ORDER BY seq"


def rendered(entries: Sequence[str]) -> str:
    """A block's entries as its text: what its size counts and what a context shows."""
    return ENTRY_SEPARATOR.join(entries)


def make_block(name: str, limit: int, entries: Sequence[str]) -> Block:
    return Block(
        name=name,
        limit=limit,
        size=len(rendered(entries)),
        entries=list(entries),
        entry_refs=[block_entry_ref(name, entry) for entry in entries],
    )


def clean_entry(content: str) -> str:
    """An entry's text as stored: trimmed, and without the separator of entries.

    Raises:
        InvalidRequest: the text is blank or holds the separator mark.
    """
    text = content.strip()
    if not text:
        raise InvalidRequest("An entry needs some text")
    if SEPARATOR_MARK in text:
        raise InvalidRequest(f"An entry may not contain {SEPARATOR_MARK!r}: it separates entries")
    return text


def check_name(name: str) -> None:
    """Raises InvalidRequest when ``name`` cannot name a block (the rule of session names)."""
    if not _NAME.match(name):
        raise InvalidRequest(
            f"Invalid block name {name!r}: 1-128 letters, digits, '.', '_' or '-',"
            " not starting with a dot"
        )


# ------------------------------------------------------------------- reads


def read_blocks(quick: Any, defaults: Mapping[str, int]) -> list[Block]:
    """Every block: the defaults first in their configured order, then the others by name."""
    limits = dict(defaults)
    limits.update(quick.execute(_LIMITS_SQL).fetchall())
    entries: dict[str, list[str]] = {name: [] for name in limits}
    for block, content in quick.execute(
        "SELECT block, content FROM block_entries ORDER BY seq"
    ).fetchall():
        entries.setdefault(block, []).append(content)
    names = [*defaults, *sorted(name for name in limits if name not in defaults)]
    return [make_block(name, limits[name], entries[name]) for name in names]


def read_block(quick: Any, name: str, defaults: Mapping[str, int]) -> Block:
    """One block.

    Raises:
        BlockNotFound: no block has this name.
    """
    rows = quick.execute("SELECT char_limit FROM context_blocks WHERE name = ?", (name,))
    found = rows.fetchall()
    if not found and name not in defaults:
        raise BlockNotFound(name)
    limit = found[0][0] if found else defaults[name]
    entries = [row[1] for row in quick.execute(_ENTRIES_SQL, (name,)).fetchall()]
    return make_block(name, limit, entries)


# ------------------------------------------------------------------ writes


async def _current(
    writer: StoreWriter, name: str, defaults: Mapping[str, int]
) -> tuple[int, list[tuple[int, str]]]:
    """A block's limit and its entries (seq, text), read inside the write transaction."""
    rows = await fetch(writer.conn, "SELECT char_limit FROM context_blocks WHERE name = ?", (name,))
    if not rows and name not in defaults:
        raise BlockNotFound(name)
    limit = int(rows[0][0]) if rows else defaults[name]
    return limit, [(row[0], row[1]) for row in await fetch(writer.conn, _ENTRIES_SQL, (name,))]


def _matching(entries: Sequence[tuple[int, str]], text: str) -> tuple[int, str] | None:
    """The entry whose whole text is ``text`` after normalisation."""
    wanted = normalise(text)
    return next((entry for entry in entries if normalise(entry[1]) == wanted), None)


def _check_fits(name: str, before: Sequence[str], after: Sequence[str], limit: int) -> None:
    """Refuse a write that takes the block past its limit (one that shrinks it always passes)."""
    size, size_after = len(rendered(before)), len(rendered(after))
    if size_after > limit and size_after > size:
        raise BlockFull(name, size, size_after, limit)


async def set_limit(
    writer: StoreWriter,
    name: str,
    limit: int,
    *,
    defaults: Mapping[str, int],
    max_limit: int,
    max_blocks: int,
    now: datetime,
) -> tuple[Block, bool]:
    """Create a block with ``limit``, or change its limit; returns it and whether it is new.

    Raises:
        InvalidRequest: a bad name or a limit above ``max_limit``.
        BlockFull: the block holds more than the new limit.
        Conflict: the profile holds ``max_blocks`` blocks already.
    """
    check_name(name)
    if not 1 <= limit <= max_limit:
        raise InvalidRequest(f"A block's limit is 1 to {max_limit:,} characters, not {limit:,}")
    rows = await fetch(writer.conn, _LIMITS_SQL)
    known = {row[0] for row in rows} | set(defaults)
    created = name not in known
    if created and len(known) >= max_blocks:
        raise Conflict(f"This profile holds {len(known)} blocks, the most it may hold")
    entries = [] if created else [text for _, text in (await _current(writer, name, defaults))[1]]
    size = len(rendered(entries))
    if size > limit:
        raise BlockFull(name, size, size, limit)
    at = to_db_time(now)
    payload = {"name": name, "limit": limit, "at": at}
    await apply_limit(writer, payload, at)
    await writer.log("block_limit", payload)
    return make_block(name, limit, entries), created


async def delete_block(writer: StoreWriter, name: str, *, defaults: Mapping[str, int]) -> None:
    """Delete a block that was created, with its entries.

    Raises:
        InvalidRequest: a default block (remove its entries instead).
        BlockNotFound: no block has this name.
    """
    if name in defaults:
        raise InvalidRequest(
            f"The default block {name!r} cannot be deleted; remove its entries instead"
        )
    await _current(writer, name, defaults)  # BlockNotFound
    payload = {"name": name}
    await apply_delete(writer, payload, "")
    await writer.log("block_delete", payload)


async def add_entry(
    writer: StoreWriter, name: str, content: str, *, defaults: Mapping[str, int], now: datetime
) -> BlockWrite:
    """Append an entry; a normalised duplicate of an entry is a no-op that says so.

    Raises:
        BlockNotFound: no block has this name.
        BlockFull: the entry does not fit (nothing is written).
        InvalidRequest: the text holds the separator mark.
    """
    text = clean_entry(content)
    limit, entries = await _current(writer, name, defaults)
    before = [entry for _, entry in entries]
    same = _matching(entries, text)
    if same is not None:
        return BlockWrite(
            block=make_block(name, limit, before),
            duplicate=True,
            source_ref=block_entry_ref(name, same[1]),
        )
    after = [*before, text]
    _check_fits(name, before, after, limit)
    at = to_db_time(now)
    payload = {"block": name, "content": text, "at": at}
    await apply_add(writer, payload, at)
    await writer.log("block_entry_add", payload)
    return BlockWrite(block=make_block(name, limit, after), source_ref=block_entry_ref(name, text))


async def replace_entry(
    writer: StoreWriter,
    name: str,
    old: str,
    new: str,
    *,
    defaults: Mapping[str, int],
    now: datetime,
) -> BlockWrite:
    """Rewrite the entry whose whole text is ``old``, in its place.

    When ``new`` repeats another entry, the old one is removed and the result says
    ``duplicate``: the block never holds the same entry twice.

    Raises:
        BlockNotFound: no block has this name.
        EntryNotFound: no entry reads ``old``.
        BlockFull: the new text does not fit (nothing is written).
    """
    text = clean_entry(new)
    limit, entries = await _current(writer, name, defaults)
    target = _matching(entries, old)
    if target is None:
        raise EntryNotFound(f"block {name!r}", old)
    other = _matching([entry for entry in entries if entry[0] != target[0]], text)
    before = [entry for _, entry in entries]
    if other is not None:
        after = [entry for seq, entry in entries if seq != target[0]]
    else:
        after = [text if seq == target[0] else entry for seq, entry in entries]
        _check_fits(name, before, after, limit)
    at = to_db_time(now)
    payload = {"block": name, "old": normalise(old), "content": text, "at": at}
    await apply_replace(writer, payload, at)
    await writer.log("block_entry_replace", payload)
    return BlockWrite(
        block=make_block(name, limit, after),
        duplicate=other is not None,
        source_ref=block_entry_ref(name, text),
    )


async def remove_entry(
    writer: StoreWriter, name: str, content: str, *, defaults: Mapping[str, int]
) -> Block:
    """Remove the entry whose whole text is ``content``.

    Raises:
        BlockNotFound: no block has this name.
        EntryNotFound: no entry reads ``content``.
    """
    limit, entries = await _current(writer, name, defaults)
    target = _matching(entries, content)
    if target is None:
        raise EntryNotFound(f"block {name!r}", content)
    payload = {"block": name, "content": normalise(content)}
    await apply_remove(writer, payload, "")
    await writer.log("block_entry_remove", payload)
    return make_block(name, limit, [entry for seq, entry in entries if seq != target[0]])


# ---------------------------- applying a change: the write above, or replay of its op


async def _entries(writer: StoreWriter, block: str) -> list[tuple[int, str]]:
    return [(row[0], row[1]) for row in await fetch(writer.conn, _ENTRIES_SQL, (block,))]


async def apply_limit(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    await writer.conn.execute(
        "INSERT INTO context_blocks (name, char_limit, created_at) VALUES (?, ?, ?)"
        " ON CONFLICT (name) DO UPDATE SET char_limit = excluded.char_limit",
        (data["name"], data["limit"], data["at"]),
    )


async def apply_delete(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    await writer.conn.execute("DELETE FROM block_entries WHERE block = ?", (data["name"],))
    await writer.conn.execute("DELETE FROM context_blocks WHERE name = ?", (data["name"],))


async def apply_add(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    await writer.conn.execute(
        "INSERT INTO block_entries (block, content, created_at, updated_at) VALUES (?, ?, ?, ?)",
        (data["block"], data["content"], data["at"], data["at"]),
    )


async def apply_replace(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    entries = await _entries(writer, data["block"])
    target = _matching(entries, data["old"])
    if target is None:
        return
    if _matching([entry for entry in entries if entry[0] != target[0]], data["content"]):
        await writer.conn.execute("DELETE FROM block_entries WHERE seq = ?", (target[0],))
        return
    await writer.conn.execute(
        "UPDATE block_entries SET content = ?, updated_at = ? WHERE seq = ?",
        (data["content"], data["at"], target[0]),
    )


async def apply_remove(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    target = _matching(await _entries(writer, data["block"]), data["content"])
    if target is not None:
        await writer.conn.execute("DELETE FROM block_entries WHERE seq = ?", (target[0],))
