"""The agent's context travels with the profile: archives, ledger shipping and snapshots."""

import io
from datetime import UTC, datetime

import pytest

from raymem.config import ContextSettings
from raymem.export.archive import export_archive, import_archive
from raymem.export.ledger import LedgerShipper, replay_ledger
from raymem.pipelines import ingest
from raymem.pipelines.context import episodes
from raymem.pipelines.context.assemble import block_limits
from raymem.store import ProfileStore, blocks, work
from raymem.store import episodes as episode_store
from raymem.types import MessageIn
from raymem.types_context import WorkItemOpen, WorkItemUpdate

SETTINGS = ContextSettings()
LIMITS = block_limits(SETTINGS)
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


async def fill_context(store: ProfileStore) -> None:
    await ingest.ingest(
        store, "s1", [MessageIn(role="user", content="Tests passed for web/app.py", created_at=NOW)]
    )
    async with store.write() as writer:
        await blocks.set_limit(
            writer, "notes", 500, defaults=LIMITS, max_limit=20_000, max_blocks=32, now=NOW
        )
        await blocks.add_entry(
            writer, "notes", "Deploys go through staging", defaults=LIMITS, now=NOW
        )
        await blocks.add_entry(writer, "user", "Prefers short answers", defaults=LIMITS, now=NOW)
        for item_id in ("w1", "w2"):
            await work.open_item(
                writer,
                WorkItemOpen(objective=f"Item {item_id}", session_id="s1", todos=["a", "b"]),
                item_id=item_id,
                now=NOW,
            )
        await work.update_item(writer, "w1", WorkItemUpdate(check_todos=["a"]), now=NOW)
    await episodes.close_work_item(store, "w1", "done", settings=SETTINGS, now=NOW)
    await episodes.finalise_session(store, "s1", settings=SETTINGS, now=NOW)


def context_of(store: ProfileStore) -> tuple:
    return (
        blocks.read_blocks(store.quick, LIMITS),
        work.list_items(store.quick),
        episode_store.list_episodes(store.quick),
    )


@pytest.fixture
async def source(open_store) -> ProfileStore:
    store = await open_store("src/profile.db")
    await fill_context(store)
    return store


async def test_archives_carry_blocks_work_items_and_episodes_byte_for_byte(
    source: ProfileStore, open_store, tmp_path
) -> None:
    first = await export_archive(source, tmp_path / "a.jsonl", profile="work")
    assert {table: count for table, count in first.counts.other.items() if count} == {
        "context_blocks": 1,
        "block_entries": 2,
        "work_items": 2,
        "work_entries": 4,
        "episodes": 2,
    }
    target = await open_store("dst/profile.db")
    await import_archive(target, tmp_path / "a.jsonl", profile="copy")
    await export_archive(target, tmp_path / "b.jsonl", profile="copy")
    a = (tmp_path / "a.jsonl").read_bytes().splitlines()
    b = (tmp_path / "b.jsonl").read_bytes().splitlines()
    assert a[1:] == b[1:]
    assert context_of(target) == context_of(source)
    pending = await target.reads.pending_vectors("episode_vectors", limit=10)
    assert len(pending) == 2  # episodes are embedded again after an import, like memories


async def test_shipped_ledger_rebuilds_the_context(source: ProfileStore, open_store, object_store):
    shipper = LedgerShipper(source, object_store, "t", "p")
    await shipper.start(background=False)
    await shipper.flush()
    rebuilt = await open_store("rebuilt/profile.db")
    assert await replay_ledger(rebuilt, object_store, "t", "p") > 0
    assert context_of(rebuilt) == context_of(source)
    exported, again = io.BytesIO(), io.BytesIO()
    await export_archive(source, exported, profile="p")
    await export_archive(rebuilt, again, profile="p")
    assert again.getvalue() == exported.getvalue()
