"""Skills, their full-text and vector search, and the vectors of sequences and skills.

A sequence is embedded by its intent summary and a skill by its name, when to use
it and its steps; both are embedded in the background, never while capturing.
The tables are small next to a profile's turns (a sequence holds many actions),
so vector search is sqlite-vec's exact scan rather than an in-memory index.
"""

from collections.abc import Sequence

import aiosqlite
import numpy as np

from raymem.store.procedural.rows import carried, columns, from_row, upsert_rows
from raymem.store.rows import placeholders, vector_blob
from raymem.store.writer import StoreWriter, fetch
from raymem.types_procedural import Skill

#: The vector table of each embedded procedural table, and the SQL of a row's text.
EMBEDDED = {
    "action_sequence_vectors": ("action_sequences", "intent"),
    "skill_vectors": ("skills", "name || char(10) || when_to_use || char(10) || steps"),
}


async def get_skill(conn: aiosqlite.Connection, skill_id: str) -> Skill | None:
    rows = await fetch(conn, f"SELECT {columns('skills')} FROM skills WHERE id = ?", (skill_id,))
    return from_row(Skill, "skills", rows[0]) if rows else None


async def skill_named(conn: aiosqlite.Connection, name: str) -> Skill | None:
    """The skill (not discarded) with this name."""
    rows = await fetch(
        conn,
        f"SELECT {columns('skills')} FROM skills WHERE name = ? AND status != 'discarded'",
        (name,),
    )
    return from_row(Skill, "skills", rows[0]) if rows else None


async def list_skills(
    conn: aiosqlite.Connection, *, status: str | None = "active", limit: int = 100
) -> list[Skill]:
    """Skills by name; ``status`` None lists every status."""
    where, params = ("WHERE status = ?", [status]) if status is not None else ("", [])
    rows = await fetch(
        conn,
        f"SELECT {columns('skills')} FROM skills {where} ORDER BY name, id LIMIT ?",
        [*params, limit],
    )
    return [from_row(Skill, "skills", row) for row in rows]


async def skills_by_seq(conn: aiosqlite.Connection, seqs: Sequence[int]) -> dict[int, Skill]:
    if not seqs:
        return {}
    rows = await fetch(
        conn,
        f"SELECT seq, {columns('skills')} FROM skills WHERE seq IN ({placeholders(len(seqs))})",
        list(seqs),
    )
    return {row[0]: from_row(Skill, "skills", row[1:]) for row in rows}


async def skills_text(conn: aiosqlite.Connection, fts_query: str, *, limit: int) -> list[int]:
    """Seqs of active skills matching an FTS5 query, best BM25 first (name counts double)."""
    sql = (
        "SELECT s.seq FROM skills_fts CROSS JOIN skills s ON s.seq = skills_fts.rowid"
        " WHERE skills_fts MATCH ? AND s.status = 'active'"
        " ORDER BY bm25(skills_fts, 2.0, 1.0, 1.0) LIMIT ?"
    )
    return [row[0] for row in await fetch(conn, sql, (fts_query, limit))]


async def write_skills(writer: StoreWriter, skills: Sequence[Skill]) -> None:
    """Store new skills and new states of stored ones; a changed skill is embedded again."""
    if not skills:
        return
    rows = [carried(skill) for skill in skills]
    await apply_skills(writer, rows)
    await writer.log("skills", rows)


async def apply_skills(writer: StoreWriter, rows: Sequence[dict[str, object]]) -> None:
    """``write_skills`` without the ledger entry."""
    ids = [str(row["id"]) for row in rows]
    stale = await fetch(
        writer.conn, f"SELECT seq FROM skills WHERE id IN ({placeholders(len(ids))})", ids
    )
    await upsert_rows(writer.conn, "skills", rows)
    await writer.conn.executemany("DELETE FROM skill_vectors WHERE rowid = ?", stale)
    await writer.conn.executemany("UPDATE skills SET vectorised = 0 WHERE seq = ?", stale)


async def delete_skill(writer: StoreWriter, skill_id: str) -> bool:
    """Delete a skill and its vector; False when it is unknown."""
    if not await apply_delete(writer, skill_id):
        return False
    await writer.log("skill_delete", {"id": skill_id})
    return True


async def apply_delete(writer: StoreWriter, skill_id: str) -> bool:
    """``delete_skill`` without the ledger entry."""
    rows = await fetch(writer.conn, "SELECT seq FROM skills WHERE id = ?", (skill_id,))
    if not rows:
        return False
    await writer.conn.execute("DELETE FROM skill_vectors WHERE rowid = ?", (rows[0][0],))
    await writer.conn.execute("DELETE FROM skills WHERE seq = ?", (rows[0][0],))
    return True


# ----------------------------------------------------------------- vectors


async def pending_vectors(
    conn: aiosqlite.Connection, table: str, *, limit: int
) -> list[tuple[int, str]]:
    """Rows of ``table`` (a key of ``EMBEDDED``) waiting for a vector: (seq, text)."""
    source, text = EMBEDDED[table]
    rows = await fetch(
        conn,
        f"SELECT seq, {text} FROM {source} WHERE vectorised = 0 ORDER BY seq LIMIT ?",
        (limit,),
    )
    return [(row[0], row[1]) for row in rows]


async def set_vectors(
    writer: StoreWriter, table: str, rows: Sequence[tuple[int, str, np.ndarray]]
) -> None:
    """Store vectors of sequences or skills, given as (seq, embedded text, vector), and mark
    the rows embedded. A row whose text changed meanwhile keeps waiting for a vector of its
    new text. Not logged: vectors are derived, and recomputed after an import or a replay."""
    source, text = EMBEDDED[table]
    seqs = [seq for seq, _, _ in rows]
    if not seqs:
        return
    current = await fetch(
        writer.conn,
        f"SELECT seq, {text} FROM {source} WHERE seq IN ({placeholders(len(seqs))})",
        seqs,
    )
    texts = {row[0]: row[1] for row in current}
    kept = [(seq, vector) for seq, embedded, vector in rows if texts.get(seq) == embedded]
    await writer.conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(s,) for s, _ in kept])
    await writer.conn.executemany(
        f"INSERT INTO {table} (rowid, embedding) VALUES (?, ?)",
        [(seq, vector_blob(vector)) for seq, vector in kept],
    )
    await writer.conn.executemany(
        f"UPDATE {source} SET vectorised = 1 WHERE seq = ?", [(s,) for s, _ in kept]
    )


async def nearest(
    conn: aiosqlite.Connection, table: str, vector: np.ndarray, *, limit: int
) -> list[tuple[int, float]]:
    """The nearest rows of a vector table (a key of ``EMBEDDED``): (seq, cosine distance)."""
    if table not in EMBEDDED:
        raise ValueError(f"Unknown vector table {table!r}")
    rows = await fetch(
        conn,
        f"SELECT rowid, distance FROM {table} WHERE embedding MATCH ? AND k = ? ORDER BY distance",
        (vector_blob(vector), limit),
    )
    return [(row[0], row[1]) for row in rows]
