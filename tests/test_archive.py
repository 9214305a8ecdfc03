"""JSON Lines export and import of whole profiles: files, streams and s3:// URLs."""

import gzip
import io
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from raymem.export.archive import (
    ArchiveError,
    ProfileNotEmpty,
    export_archive,
    import_archive,
)
from raymem.export.ledger import LedgerShipper, replay_ledger
from raymem.export.objectstore import ObjectStore
from raymem.store import ProfileStore

Opener = Callable[..., Awaitable[ProfileStore]]
Filler = Callable[[ProfileStore, int], Awaitable[None]]


@pytest.fixture
async def source(open_store: Opener, fill_profile: Filler) -> ProfileStore:
    store = await open_store("src/profile.db")
    await fill_profile(store, 1)
    await fill_profile(store, 2)
    return store


async def test_export_import_export_is_byte_identical_apart_from_the_name(
    source: ProfileStore, open_store: Opener, tmp_path: Path
) -> None:
    first = await export_archive(source, tmp_path / "a.jsonl", profile="work")
    target = await open_store("dst/profile.db")
    imported = await import_archive(target, tmp_path / "a.jsonl", profile="copy")
    second = await export_archive(target, tmp_path / "b.jsonl", profile="copy")

    a = (tmp_path / "a.jsonl").read_bytes().splitlines()
    b = (tmp_path / "b.jsonl").read_bytes().splitlines()
    counts = first.counts
    assert a[1:] == b[1:] and len(a) == 1 + counts.sessions + counts.messages + counts.memories
    assert (counts.sessions, counts.messages) == (2, 3) and counts.memories >= 7
    assert a[0].replace(b'"profile":"work"', b'"profile":"copy"') == b[0]
    assert imported == first and second.ledger_seq == first.ledger_seq > 0
    assert second.counts == first.counts

    # Chains, provenance and timestamps are the source's, not re-derived.
    assert await target.reads.history("m-unittest") == await source.reads.history("m-unittest")
    assert [m.id for m in await target.reads.history("m-pytest")] == [
        "m-pytest",
        "m-unittest",
        "m-vitest",
    ]
    assert await target.reads.get_memory("m-deploy") == await source.reads.get_memory("m-deploy")
    assert await target.reads.list_sessions() == await source.reads.list_sessions()
    assert await target.reads.info("copy") == await source.reads.info("copy")
    assert target.search.memories_text("pnpm", limit=5)  # FTS indexes the import
    assert len(await target.reads.pending_vectors("memory_vectors")) > 0  # vectors are recomputed


async def test_import_refuses_a_profile_that_holds_data(
    source: ProfileStore, tmp_path: Path
) -> None:
    await export_archive(source, tmp_path / "a.jsonl", profile="work")
    before = await source.reads.ledger_seq()
    with pytest.raises(ProfileNotEmpty, match="Profile 'work' is not empty") as caught:
        await import_archive(source, tmp_path / "a.jsonl", profile="work")
    assert caught.value.status == 409
    assert await source.reads.ledger_seq() == before


async def test_s3_url_gzip_and_progress(
    source: ProfileStore,
    open_store: Opener,
    object_store: ObjectStore,
    s3_client: Any,
) -> None:
    url = f"s3://{object_store.bucket}/exports/work.jsonl.gz"
    seen: list[tuple[int, int]] = []
    header = await export_archive(
        source,
        url,
        profile="work",
        object_store=object_store,
        progress=lambda done, total: seen.append((done, total)),
    )
    total = header.counts.sessions + header.counts.messages + header.counts.memories
    assert seen[-1] == (total, total)
    stored = s3_client.get_object(Bucket=object_store.bucket, Key="exports/work.jsonl.gz")
    assert gzip.decompress(stored["Body"].read()).startswith(b'{"kind":"header"')

    target = await open_store("dst/profile.db")
    loaded: list[tuple[int, int]] = []
    await import_archive(
        target,
        url,
        profile="copy",
        object_store=object_store,
        progress=lambda done, total: loaded.append((done, total)),
    )
    assert loaded[-1] == (total, total)
    assert await target.reads.info("x") == await source.reads.info("x")


async def test_streams_and_a_replayable_ledger(
    source: ProfileStore, open_store: Opener, object_store: ObjectStore
) -> None:
    buffer = io.BytesIO()
    await export_archive(source, buffer, profile="work")
    target = await open_store("dst/profile.db")
    await import_archive(target, buffer.getvalue(), profile="copy")

    # The import is in the ledger in full: shipped and replayed, it rebuilds the profile.
    shipper = LedgerShipper(target, object_store, "t", "copy")
    await shipper.start(background=False)
    await shipper.flush()
    rebuilt = await open_store("rebuilt/profile.db")
    assert await replay_ledger(rebuilt, object_store, "t", "copy") > 0
    again = io.BytesIO()
    await export_archive(rebuilt, again, profile="work")
    assert again.getvalue() == buffer.getvalue()


async def test_a_truncated_archive_leaves_the_profile_empty(
    source: ProfileStore, open_store: Opener
) -> None:
    buffer = io.BytesIO()
    await export_archive(source, buffer, profile="work")
    lines = buffer.getvalue().splitlines(keepends=True)
    target = await open_store("dst/profile.db")
    with pytest.raises(ArchiveError, match="incomplete"):
        await import_archive(target, b"".join(lines[:-2]), profile="copy")
    assert await target.reads.ledger_seq() == 0
    assert (await target.reads.info("copy")).messages == 0

    with pytest.raises(ArchiveError, match="Not a raymem archive"):
        await import_archive(target, b'{"hello": "world"}\n', profile="copy")
    bad_row = lines[0] + b'{"kind":"memory","id":"x"}\n'
    with pytest.raises(ArchiveError, match="Line 2"):
        await import_archive(target, bad_row, profile="copy")
    header = msgspec.json.decode(lines[0])
    newer = msgspec.json.encode({**header, "version": 99}) + b"\n"
    with pytest.raises(ArchiveError, match="version 99"):
        await import_archive(target, newer, profile="copy")


def test_every_archived_table_has_a_line_with_its_columns() -> None:
    """An archive line carries exactly the columns its table restores, in order."""
    from raymem.export.tables import ARCHIVE_TABLES
    from raymem.store.rows import RESTORED_TABLES

    assert [part.table for part in ARCHIVE_TABLES] == list(RESTORED_TABLES)
    for part in ARCHIVE_TABLES:
        assert part.line.__struct_fields__ == part.columns.columns, part.table
