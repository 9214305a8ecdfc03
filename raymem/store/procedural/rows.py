"""The procedural tables' rows: Structs to and from SQLite values, inserts, upserts, ids.

Each table has a Struct in ``raymem.types_procedural`` whose fields are the table's
columns (``RESTORED_TABLES``) in order. Ledger payloads and archive lines carry a
row as JSON values: times as ``to_db_time`` text, JSON columns as lists or objects,
flags as booleans, so that replay and import store exactly what the original holds.
"""

import asyncio
import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import aiosqlite
import msgspec

from raymem.store.rows import RESTORED_TABLES, carried_value, placeholders, stored_value, to_db_time

S = TypeVar("S", bound=msgspec.Struct)

#: Carried rows: column -> JSON value, as a ledger payload or an archive line holds them.
Row = dict[str, Any]
#: From this many rows, decoding them (about 10 µs each) goes to a thread, so that a pass
#: over a large profile leaves the actor's event loop free for captures meanwhile.
DECODE_OFF_LOOP_ROWS = 500


def content_id(*parts: str | None) -> str:
    """An id derived from content: the first 128 bits of SHA-256 over the parts as a JSON array
    (which keeps them apart: moving text from one part to the next changes the id)."""
    return hashlib.sha256(msgspec.json.encode(parts)).hexdigest()[:32]


def carried(item: msgspec.Struct) -> Row:
    """A table's Struct as a carried row: times as ``to_db_time`` text."""
    row: Row = {}
    for name in item.__struct_fields__:
        value = getattr(item, name)
        row[name] = to_db_time(value) if isinstance(value, datetime) else msgspec.to_builtins(value)
    return row


def columns(table: str) -> str:
    """The table's carried columns, comma-separated, for a SELECT."""
    return ", ".join(RESTORED_TABLES[table].columns)


def from_row(kind: type[S], table: str, row: Sequence[Any]) -> S:
    """The Struct of a row selected with ``columns(table)``."""
    spec = RESTORED_TABLES[table]
    fields = {
        column: carried_value(spec, column, value)
        for column, value in zip(spec.columns, row, strict=True)
    }
    return msgspec.convert(fields, kind)


async def from_rows(kind: type[S], table: str, rows: Sequence[Sequence[Any]]) -> list[S]:
    """The Structs of many rows; a large batch is decoded off the event loop."""
    if len(rows) < DECODE_OFF_LOOP_ROWS:
        return [from_row(kind, table, row) for row in rows]
    return await asyncio.to_thread(lambda: [from_row(kind, table, row) for row in rows])


def _values(table: str, rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    spec = RESTORED_TABLES[table]
    return [
        tuple(stored_value(spec, column, row.get(column)) for column in spec.columns)
        for row in rows
    ]


async def insert_rows(
    conn: aiosqlite.Connection, table: str, rows: Sequence[Mapping[str, Any]]
) -> None:
    """Insert carried rows; a row whose id (or other unique key) is stored already is skipped."""
    if not rows:
        return
    names = RESTORED_TABLES[table].columns
    await conn.executemany(
        f"INSERT OR IGNORE INTO {table} ({', '.join(names)}) VALUES ({placeholders(len(names))})",
        _values(table, rows),
    )


async def upsert_rows(
    conn: aiosqlite.Connection, table: str, rows: Sequence[Mapping[str, Any]]
) -> None:
    """Insert carried rows, or update every column of the stored row with the same id."""
    if not rows:
        return
    names = RESTORED_TABLES[table].columns
    updates = ", ".join(f"{name} = excluded.{name}" for name in names if name != "id")
    await conn.executemany(
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({placeholders(len(names))})"
        f" ON CONFLICT (id) DO UPDATE SET {updates}",
        _values(table, rows),
    )
