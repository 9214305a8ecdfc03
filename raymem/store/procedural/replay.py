"""The replayer of each ledger op procedural memory logs (see ``raymem.store.replay``)."""

from typing import Any

from raymem.store.procedural import actions, metrics, skills
from raymem.store.procedural.rows import insert_rows, upsert_rows
from raymem.store.writer import StoreWriter


async def enabled(writer: StoreWriter, row: dict[str, Any], at: str) -> None:
    await actions.apply_enabled(writer, row)


async def captured(writer: StoreWriter, rows: list[dict[str, Any]], at: str) -> None:
    await insert_rows(writer.conn, "actions", rows)


async def sequences(writer: StoreWriter, payload: dict[str, Any], at: str) -> None:
    await actions.apply_sequences(writer, payload)


async def injections(writer: StoreWriter, rows: list[dict[str, Any]], at: str) -> None:
    await insert_rows(writer.conn, "pattern_injections", rows)


async def patterns(writer: StoreWriter, rows: list[dict[str, Any]], at: str) -> None:
    await upsert_rows(writer.conn, "patterns", rows)


async def metric_rows(writer: StoreWriter, rows: list[dict[str, Any]], at: str) -> None:
    await upsert_rows(writer.conn, "metrics", rows)


async def metric_delete(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    await metrics.apply_delete(writer, data["id"])


async def benchmarks(writer: StoreWriter, rows: list[dict[str, Any]], at: str) -> None:
    await insert_rows(writer.conn, "metric_benchmarks", rows)


async def skill_rows(writer: StoreWriter, rows: list[dict[str, Any]], at: str) -> None:
    await skills.apply_skills(writer, rows)


async def skill_delete(writer: StoreWriter, data: dict[str, Any], at: str) -> None:
    await skills.apply_delete(writer, data["id"])
