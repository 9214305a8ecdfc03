"""Metric definitions and their benchmark rows."""

from collections.abc import Sequence
from datetime import datetime

import aiosqlite

from raymem.store.procedural.rows import carried, columns, from_row, insert_rows, upsert_rows
from raymem.store.writer import StoreWriter, fetch
from raymem.types_procedural import Metric, MetricValueAt


async def list_metrics(conn: aiosqlite.Connection) -> list[Metric]:
    """Every metric, built-ins first, in the order they were defined."""
    rows = await fetch(
        conn,
        f"SELECT {columns('metrics')} FROM metrics ORDER BY builtin DESC, seq",
    )
    return [from_row(Metric, "metrics", row) for row in rows]


async def get_metric(conn: aiosqlite.Connection, metric_id: str) -> Metric | None:
    rows = await fetch(conn, f"SELECT {columns('metrics')} FROM metrics WHERE id = ?", (metric_id,))
    return from_row(Metric, "metrics", rows[0]) if rows else None


async def write_metrics(writer: StoreWriter, metrics: Sequence[Metric]) -> None:
    """Store new metrics and new states of stored ones."""
    if not metrics:
        return
    rows = [carried(metric) for metric in metrics]
    await upsert_rows(writer.conn, "metrics", rows)
    await writer.log("metrics", rows)


async def delete_metric(writer: StoreWriter, metric_id: str) -> bool:
    """Delete a metric and its benchmark rows; False when it is unknown."""
    if not await apply_delete(writer, metric_id):
        return False
    await writer.log("metric_delete", {"id": metric_id})
    return True


async def apply_delete(writer: StoreWriter, metric_id: str) -> bool:
    """``delete_metric`` without the ledger entry."""
    await writer.conn.execute("DELETE FROM metric_benchmarks WHERE metric_id = ?", (metric_id,))
    cursor = await writer.conn.execute("DELETE FROM metrics WHERE id = ?", (metric_id,))
    return bool(cursor.rowcount)


async def insert_benchmarks(writer: StoreWriter, rows: Sequence[MetricValueAt]) -> None:
    """Store benchmark rows; a metric's row for a time already stored is kept as it was."""
    if not rows:
        return
    carried_rows = [carried(row) for row in rows]
    await insert_rows(writer.conn, "metric_benchmarks", carried_rows)
    await writer.log("metric_benchmarks", carried_rows)


async def benchmarks(
    conn: aiosqlite.Connection, metric_id: str, *, limit: int = 1000
) -> list[MetricValueAt]:
    """A metric's benchmark rows, the newest ``limit`` of them, oldest first."""
    rows = await fetch(
        conn,
        f"SELECT * FROM (SELECT seq, {columns('metric_benchmarks')} FROM metric_benchmarks"
        " WHERE metric_id = ? ORDER BY at DESC, seq DESC LIMIT ?) ORDER BY at, seq",
        (metric_id, limit),
    )
    return [from_row(MetricValueAt, "metric_benchmarks", row[1:]) for row in rows]


async def latest_benchmark_time(conn: aiosqlite.Connection) -> datetime | None:
    """When the newest benchmark row was measured (None before the first)."""
    rows = await fetch(conn, "SELECT max(at) FROM metric_benchmarks")
    return datetime.fromisoformat(rows[0][0]) if rows and rows[0][0] else None
