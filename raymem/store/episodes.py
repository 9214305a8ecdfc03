"""Episodes: immutable records of finished work, searchable by full text and by vector.

An episode is written once, when a work item closes or a session ends, and never
changed. Its text (title, summary, resources, decisions, verification) is in an
FTS5 index; its vector (title and summary) is made by the profile's background
vectoriser like a memory's, into ``episode_vectors``. The ``episode`` ledger entry
carries the whole row, so replay writes the same row.

Reads run on the blocking read connection: they are indexed and bounded.
"""

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import aiosqlite

from raymem.errors import EpisodeNotFound
from raymem.store.refs import episode_ref
from raymem.store.rows import (
    EPISODE_LISTS,
    RESTORED_TABLES,
    from_db_time,
    placeholders,
    to_db_time,
)
from raymem.store.writer import StoreWriter, fetch
from raymem.types import Memory
from raymem.types_context import Episode

LEDGER_OP = "episode"
LIST_COLUMNS = EPISODE_LISTS
ROW_COLUMNS = RESTORED_TABLES["episodes"].columns
EPISODE_COLUMNS = "seq, " + ", ".join(ROW_COLUMNS)
#: What an episode's vector embeds: its title and the start of its summary.
VECTOR_TEXT_CHARS = 1_000


def episode_from_row(row: Sequence[Any]) -> Episode:
    """An ``Episode`` from a row of ``EPISODE_COLUMNS`` (its seq first, ignored)."""
    fields = dict(zip(ROW_COLUMNS, row[1:], strict=True))
    for column in LIST_COLUMNS:
        fields[column] = json.loads(fields[column])
    for column in ("ended_at", "created_at"):
        fields[column] = datetime.fromisoformat(fields[column])
    fields["started_at"] = from_db_time(fields["started_at"])
    return Episode(source_ref=episode_ref(fields["id"]), **fields)


def episode_row(episode: Episode) -> dict[str, Any]:
    """An episode's columns as the ledger carries them (times as stored, lists as lists)."""
    row: dict[str, Any] = {column: getattr(episode, column) for column in ROW_COLUMNS}
    for column in ("started_at", "ended_at", "created_at"):
        moment = row[column]
        row[column] = None if moment is None else to_db_time(moment)
    return row


def vector_text(title: str, summary: str) -> str:
    """The text an episode's vector embeds."""
    return f"{title}\n{summary}"[:VECTOR_TEXT_CHARS].strip()


# ------------------------------------------------------------------ reads


def read_episode(quick: Any, episode_id: str) -> Episode:
    """One episode.

    Raises:
        EpisodeNotFound: no episode has this id.
    """
    rows = quick.execute(
        f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE id = ?", (episode_id,)
    ).fetchall()
    if not rows:
        raise EpisodeNotFound(episode_id)
    return episode_from_row(rows[0])


def list_episodes(
    quick: Any,
    *,
    session_id: str | None = None,
    limit: int = 50,
    before_seq: int | None = None,
) -> tuple[list[Episode], int | None]:
    """Episodes, newest first; returns the page and the cursor (a seq) of the next one."""
    where: list[str] = []
    params: list[Any] = []
    if session_id is not None:
        where.append("session_id = ?")
        params.append(session_id)
    if before_seq is not None:
        where.append("seq < ?")
        params.append(before_seq)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = quick.execute(
        f"SELECT {EPISODE_COLUMNS} FROM episodes {clause} ORDER BY seq DESC LIMIT ?",
        [*params, limit + 1],
    ).fetchall()
    next_seq = rows[limit - 1][0] if len(rows) > limit else None
    return [episode_from_row(row) for row in rows[:limit]], next_seq


def episodes_by_seq(quick: Any, seqs: Sequence[int]) -> dict[int, Episode]:
    if not seqs:
        return {}
    rows = quick.execute(
        f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE seq IN ({placeholders(len(seqs))})",
        list(seqs),
    ).fetchall()
    return {row[0]: episode_from_row(row) for row in rows}


def episode_memories_by_seq(quick: Any, seqs: Sequence[int]) -> dict[int, Memory]:
    """Episodes in a memory's shape (type "episode", "title: summary"), so recall fuses and
    returns them like memories.

    Only the columns that shape needs are read: a whole episode parses five JSON
    lists, which made loading recall's episode candidates (up to 50) a fifth of
    a context assembly's recall at 100K memories.
    """
    if not seqs:
        return {}
    rows = quick.execute(
        "SELECT seq, id, title, summary, session_id, ended_at FROM episodes"
        f" WHERE seq IN ({placeholders(len(seqs))})",
        list(seqs),
    ).fetchall()
    return {
        seq: Memory(
            id=episode_id,
            type="episode",
            content=f"{title}: {summary}",
            session_id=session_id,
            created_at=datetime.fromisoformat(ended_at),
        )
        for seq, episode_id, title, summary, session_id, ended_at in rows
    }


def episodes_text(quick: Any, fts_query: str, *, limit: int) -> list[int]:
    """Seqs of episodes matching an FTS5 query, best BM25 first (the title counts double)."""
    rows = quick.execute(
        "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ?"
        " ORDER BY bm25(episodes_fts, 2.0, 1.0, 1.0, 1.0, 1.0) LIMIT ?",
        (fts_query, limit),
    ).fetchall()
    return [row[0] for row in rows]


async def session_covered_until(conn: aiosqlite.Connection, session_id: str) -> datetime | None:
    """Where the newest episode of a session ends: its later turns are in no episode yet.

    ``conn``: the async read connection, or a write transaction's (to check again there).
    """
    rows = await fetch(
        conn,
        "SELECT max(ended_at) FROM episodes WHERE session_id = ? AND trigger = 'session'",
        (session_id,),
    )
    return from_db_time(rows[0][0]) if rows else None


async def pending_vectors(
    reader: aiosqlite.Connection, *, limit: int, newest_first: bool = False
) -> list[tuple[int, str]]:
    """Episodes still waiting for a vector: (seq, text to embed), on the async read connection."""
    order = "DESC" if newest_first else "ASC"
    rows = await fetch(
        reader,
        f"SELECT seq, title, summary FROM episodes WHERE vectorised = 0 ORDER BY seq {order}"
        " LIMIT ?",
        (limit,),
    )
    return [(row[0], vector_text(row[1], row[2])) for row in rows]


# ----------------------------------------------------------------- writes


async def insert_episode(writer: StoreWriter, episode: Episode) -> None:
    """Write a finalised episode and log it."""
    row = episode_row(episode)
    await apply(writer, row, row["created_at"])
    await writer.log(LEDGER_OP, row, at=row["created_at"])


async def apply(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    """Insert an episode's row (the write above, or replay of its ``episode`` entry)."""
    values = [
        json.dumps(data[column]) if column in LIST_COLUMNS else data[column]
        for column in ROW_COLUMNS
    ]
    await writer.conn.execute(
        f"INSERT OR IGNORE INTO episodes ({', '.join(ROW_COLUMNS)})"
        f" VALUES ({placeholders(len(ROW_COLUMNS))})",
        values,
    )
