"""Snapshots, ledger shipping, replay and restore on activation, against moto's S3 server."""

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from raymem.export.archive import iter_archive
from raymem.export.ledger import (
    LedgerGap,
    LedgerShipper,
    list_segments,
    prune_segments,
    replay_ledger,
)
from raymem.export.objectstore import ObjectStore
from raymem.export.restore import checkpoint, open_restored
from raymem.export.snapshot import (
    SnapshotError,
    list_snapshots,
    restore_latest,
    take_snapshot,
)
from raymem.store import ProfileStore

Opener = Callable[..., Awaitable[ProfileStore]]
Filler = Callable[[ProfileStore, int], Awaitable[None]]
T, P = "alice", "p1"


async def content(store: ProfileStore, *, drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Every session, message and memory row (the archive lines after the header)."""
    data = b"".join([chunk async for chunk in iter_archive(store, profile="x")])
    rows = [msgspec.json.decode(line) for line in data.splitlines()[1:]]
    return [{k: v for k, v in row.items() if k not in drop} for row in rows]


async def ledger(store: ProfileStore) -> list[tuple[int, str, str, str]]:
    return await store.reads.ledger_entries(0, limit=100_000)


async def test_snapshot_restore_round_trip(
    open_store: Opener, fill_profile: Filler, object_store: ObjectStore, tmp_path: Path
) -> None:
    source = await open_store("src/profile.db")
    await fill_profile(source, 1)
    await fill_profile(source, 2)
    pending = await source.reads.pending_vectors("memory_vectors")
    vector = np.linspace(-1, 1, 384, dtype=np.float32)
    async with source.write() as writer:
        await writer.set_vectors("memory_vectors", [(pending[0][0], vector)])

    manifest = await take_snapshot(source, object_store, T, P)

    info = await source.reads.info(P)
    assert manifest.ledger_seq == await source.reads.ledger_seq() > 0
    assert manifest.key == f"raymem/alice/p1/snapshots/{manifest.ledger_seq:020d}"
    assert manifest.counts == {
        "messages": info.messages,
        "memories": info.memories,
        "sessions": info.sessions,
    }
    assert 0 < manifest.size < manifest.db_size  # compressed

    restored_path = tmp_path / "dst" / "profile.db"
    assert (await restore_latest(object_store, T, P, restored_path)) == manifest
    assert not list(restored_path.parent.glob(".restore-*"))  # temporary files are gone
    restored = await open_store(restored_path)
    assert await restored.reads.info(P) == info
    assert await content(restored) == await content(source)
    assert await ledger(restored) == await ledger(source)
    # The indexes came along: FTS5 and the sqlite-vec table answer on the restored file.
    assert restored.search.memories_text("pnpm", limit=5)
    assert (await restored.search.vectors("memory_vectors", vector, limit=1))[0][0] == pending[0][0]


async def test_unchanged_profile_is_not_snapshotted_twice_and_retention_prunes(
    open_store: Opener, fill_profile: Filler, object_store: ObjectStore
) -> None:
    store = await open_store("p/profile.db")
    await fill_profile(store, 1)
    first = await take_snapshot(store, object_store, T, P)
    assert await take_snapshot(store, object_store, T, P) == first
    seqs = [first.ledger_seq]
    for index in range(3):
        async with store.write() as writer:
            await writer.forget("m-pytest" if index == 0 else "m-deploy")
            await writer.log("test", {"round": index})  # a new seq even when nothing changed
        seqs.append((await take_snapshot(store, object_store, T, P, retention=2)).ledger_seq)
    assert [ref.ledger_seq for ref in await list_snapshots(object_store, T, P)] == seqs[:1:-1]
    keys = [info.key for info in await object_store.list("raymem/alice/p1/snapshots/")]
    assert len(keys) == 4  # two snapshots, each a database and a manifest


async def test_corrupt_newest_snapshot_falls_back_to_the_previous_one(
    open_store: Opener,
    fill_profile: Filler,
    object_store: ObjectStore,
    s3_client: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = await open_store("src/profile.db")
    await fill_profile(store, 1)
    older = await take_snapshot(store, object_store, T, P)
    older_content = await content(store)
    await fill_profile(store, 2)
    newer = await take_snapshot(store, object_store, T, P)
    stored = s3_client.get_object(Bucket=object_store.bucket, Key=newer.key)["Body"].read()
    s3_client.put_object(Bucket=object_store.bucket, Key=newer.key, Body=stored[: len(stored) // 2])

    target = tmp_path / "dst" / "profile.db"
    with caplog.at_level(logging.WARNING, logger="raymem.export.snapshot"):
        assert await restore_latest(object_store, T, P, target) == older
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and repr(newer.key) in warnings[0] and "size is" in warnings[0]
    assert await content(await open_store(target)) == older_content


async def test_no_usable_snapshot_leaves_the_local_file_alone(
    open_store: Opener, fill_profile: Filler, object_store: ObjectStore, s3_client: Any
) -> None:
    store = await open_store("src/profile.db")
    await fill_profile(store, 1)
    manifest = await take_snapshot(store, object_store, T, P)
    garbage = b"\x1f\x8b" + b"not really gzip" * 10
    s3_client.put_object(Bucket=object_store.bucket, Key=manifest.key, Body=garbage)
    before = store.path.read_bytes()
    with pytest.raises(SnapshotError, match="None of the 1 snapshots"):
        await restore_latest(object_store, T, P, store.path)
    assert store.path.read_bytes() == before
    assert await restore_latest(object_store, T, "never-snapshotted", store.path) is None


async def test_shipped_ledger_replayed_onto_an_older_snapshot_gives_the_newer_state(
    open_store: Opener, fill_profile: Filler, object_store: ObjectStore, tmp_path: Path
) -> None:
    source = await open_store("src/profile.db")
    shipper = LedgerShipper(source, object_store, T, P, max_entries=4)
    await shipper.start(background=False)
    await fill_profile(source, 1)
    await shipper.flush()
    snapshot = await take_snapshot(source, object_store, T, P)
    await fill_profile(source, 2)  # supersessions, a forget and a session end after it
    assert await shipper.flush() == await source.reads.ledger_seq()

    segments = await list_segments(object_store, T, P)
    assert segments[0].first_seq == 1 and segments[-1].last_seq == await source.reads.ledger_seq()
    assert all(a.last_seq + 1 == b.first_seq for a, b in itertools.pairwise(segments))

    target = tmp_path / "dst" / "profile.db"
    await restore_latest(object_store, T, P, target)
    restored = await open_store(target)
    assert await restored.reads.ledger_seq() == snapshot.ledger_seq
    applied = await replay_ledger(restored, object_store, T, P)

    assert applied == await source.reads.ledger_seq() - snapshot.ledger_seq
    assert await ledger(restored) == await ledger(source)
    # every column, ingested_at and the extracted flag included, comes back exactly
    assert await content(restored) == await content(source)
    chain = [m.id for m in await restored.reads.history("m-vitest")]
    assert chain == ["m-pytest", "m-unittest", "m-vitest"]
    assert (await restored.reads.get_memory("m-deploy")).forgotten_at is not None
    assert await replay_ledger(restored, object_store, T, P) == 0  # idempotent


async def test_replay_refuses_a_gap(
    open_store: Opener, fill_profile: Filler, object_store: ObjectStore
) -> None:
    source = await open_store("src/profile.db")
    await fill_profile(source, 1)
    shipper = LedgerShipper(source, object_store, T, P, max_entries=3)
    await shipper.start(background=False)
    await shipper.flush()
    first = (await list_segments(object_store, T, P))[0]
    assert await prune_segments(object_store, T, P, upto_seq=first.last_seq) == [first.key]
    empty = await open_store("empty/profile.db")
    with pytest.raises(LedgerGap, match="starts at 4"):
        await replay_ledger(empty, object_store, T, P)
    assert await empty.reads.ledger_seq() == 0


async def test_background_shipping_within_the_interval(
    open_store: Opener, fill_profile: Filler, object_store: ObjectStore
) -> None:
    store = await open_store("p/profile.db")
    shipper = LedgerShipper(store, object_store, T, P, interval_s=0.05)
    await shipper.start()
    try:
        await fill_profile(store, 1)
        shipper.notify()
        seq = await store.reads.ledger_seq()
        for _ in range(200):  # poll, at most about 5 s
            segments = await list_segments(object_store, T, P)
            if segments and segments[-1].last_seq == seq:
                break
            await asyncio.sleep(0.025)
        assert segments[-1].last_seq == seq
    finally:
        await shipper.close()
    # A new shipper (a re-activated profile) continues after what is already shipped.
    again = LedgerShipper(store, object_store, T, P)
    await again.start(background=False)
    assert again.shipped_seq == seq


async def test_open_restored_rebuilds_a_lost_local_file(
    open_store: Opener, fill_profile: Filler, object_store: ObjectStore, tmp_path: Path
) -> None:
    source = await open_store("src/profile.db")
    shipper = LedgerShipper(source, object_store, T, P)
    await shipper.start(background=False)
    await fill_profile(source, 1)
    snapshot = await take_snapshot(source, object_store, T, P)
    await fill_profile(source, 2)
    await shipper.flush()

    path = tmp_path / "node2" / "profile.db"
    store, report = await open_restored(
        path, dim=384, object_store=object_store, tenant=T, profile=P
    )
    try:
        assert report.source == "snapshot" and report.snapshot_seq == snapshot.ledger_seq
        assert report.ledger_seq == await source.reads.ledger_seq()
        assert await store.reads.info(P) == await source.reads.info(P)
    finally:
        await store.close()

    # Reopened with the local file present and current: nothing to restore.
    store, report = await open_restored(
        path, dim=384, object_store=object_store, tenant=T, profile=P
    )
    await store.close()
    assert (report.source, report.replayed) == ("local", 0)


async def test_checkpoint_keeps_segments_back_to_the_oldest_kept_snapshot(
    open_store: Opener, fill_profile: Filler, object_store: ObjectStore
) -> None:
    store = await open_store("p/profile.db")
    shipper = LedgerShipper(store, object_store, T, P, max_entries=2)
    await shipper.start(background=False)
    await fill_profile(store, 1)
    await shipper.flush()
    first = await checkpoint(store, object_store, T, P, retention=1)
    assert await list_segments(object_store, T, P) == []  # all covered by the snapshot
    await fill_profile(store, 2)
    await shipper.flush()
    second = await checkpoint(store, object_store, T, P, retention=2)
    segments = await list_segments(object_store, T, P)
    assert segments and all(s.last_seq > first.ledger_seq for s in segments)
    assert segments[-1].last_seq == second.ledger_seq
