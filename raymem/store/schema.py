"""The schema of a profile's file: creation, forward migrations and the embedder it follows.

The core tables (``schema.sql``) are versioned with ``PRAGMA user_version``. A
subsystem that keeps tables of its own (core memory blocks, procedural memory,
...) adds an entry to ``PARTS``: its scripts are applied in order, and the
number applied is kept in ``meta`` under ``schema.<name>``, so parts evolve
independently and a file made by an older version gains the new tables when
it is opened.
"""

import logging
from importlib import resources
from pathlib import Path
from typing import Any

import aiosqlite

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
#: Forward migrations of the core tables: MIGRATIONS[v] names the script that takes a
#: store at version v to v + 1 (a new file runs schema.sql, then every migration).
MIGRATIONS: dict[int, str] = {1: "migrate_2.sql"}

#: Subsystems' tables: part name -> SQL resource files in raymem/store/, applied in order.
PARTS: dict[str, tuple[str, ...]] = {
    "context": ("context.sql",),
    "dreams": ("dreams.sql",),  # dream jobs, memory use, the review queue
    "erasure": ("erasure.sql",),
    "procedural": ("procedural.sql",),
}

#: Every vector table and the table whose rows it embeds (rowid = the row's seq, which has
#: a ``vectorised`` flag); a subsystem with vectors of its own adds its tables here.
VECTOR_SOURCES: dict[str, str] = {
    "memory_vectors": "memories",
    "message_vectors": "messages",
    "episode_vectors": "episodes",
    "action_sequence_vectors": "action_sequences",
    "skill_vectors": "skills",
}


def _script(name: str, dim: int) -> str:
    """A SQL resource of this package; ``{dim}`` is the embedding dimension."""
    return resources.files("raymem.store").joinpath(name).read_text().replace("{dim}", str(dim))


async def _rows(conn: aiosqlite.Connection, sql: str, params: tuple[object, ...] = ()) -> list[Any]:
    return list(await conn.execute_fetchall(sql, params))


async def migrate(conn: aiosqlite.Connection, *, dim: int, embedder: str) -> None:
    """Create the schema of a new file, or bring an older one up to date."""
    version = (await _rows(conn, "PRAGMA user_version"))[0][0]
    if version == 0:
        await conn.executescript(
            f"BEGIN IMMEDIATE;\n{_script('schema.sql', int(dim))}\n"
            f"INSERT INTO meta (key, value) VALUES ('dim', '{int(dim)}');\n"
            "PRAGMA user_version = 1;\nCOMMIT;"
        )
        await conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('embedder', ?)", (embedder,)
        )
        version = 1
    while version < SCHEMA_VERSION:
        await conn.executescript(
            f"BEGIN IMMEDIATE;\n{_script(MIGRATIONS[version], int(dim))}\n"
            f"PRAGMA user_version = {version + 1};\nCOMMIT;"
        )
        version += 1
    for part, scripts in PARTS.items():
        await _migrate_part(conn, part, scripts, dim=int(dim))


async def _migrate_part(
    conn: aiosqlite.Connection, part: str, scripts: tuple[str, ...], *, dim: int
) -> None:
    key = f"schema.{part}"
    rows = await _rows(conn, "SELECT value FROM meta WHERE key = ?", (key,))
    applied = int(rows[0][0]) if rows else 0
    for number in range(applied, len(scripts)):
        await conn.executescript(
            f"BEGIN IMMEDIATE;\n{_script(scripts[number], dim)}\n"
            f"INSERT OR REPLACE INTO meta (key, value) VALUES ('{key}', '{number + 1}');\nCOMMIT;"
        )


async def check_dimension(conn: aiosqlite.Connection, path: Path, dim: int) -> None:
    """Refuse a file made for embeddings of another dimension.

    Raises:
        ValueError: the file holds vectors of another dimension.
    """
    rows = await _rows(conn, "SELECT value FROM meta WHERE key = 'dim'")
    stored = int(rows[0][0])
    if stored != dim:
        raise ValueError(
            f"Store {str(path)!r} holds {stored}-d vectors; the embedder makes {dim}-d"
        )


async def follow_embedder(conn: aiosqlite.Connection, path: Path, embedder: str) -> None:
    """Record ``embedder``; if the vectors were made by another model, queue them all again.

    Vectors of two models cannot be compared, so a store opened under another model
    drops its vectors and the background vectoriser embeds everything again; a change
    of precision only (``model@bfloat16``) keeps them.
    """
    if not embedder:
        return
    rows = await _rows(conn, "SELECT value FROM meta WHERE key = 'embedder'")
    stored = rows[0][0] if rows else ""
    if stored == embedder:
        return
    await conn.execute("BEGIN IMMEDIATE")
    try:
        if stored and stored.split("@")[0] != embedder.split("@")[0]:
            log.warning(
                "store %s: vectors were made by %s, the embedder is now %s;"
                " embedding everything again",
                path,
                stored,
                embedder,
            )
            for table, source in VECTOR_SOURCES.items():
                await conn.execute(f"DELETE FROM {table}")
                await conn.execute(f"UPDATE {source} SET vectorised = 0 WHERE vectorised = 1")
        await conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('embedder', ?)", (embedder,)
        )
    except BaseException:
        await conn.execute("ROLLBACK")
        raise
    await conn.execute("COMMIT")
