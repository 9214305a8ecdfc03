"""Erasure: an erased text leaves every byte of the file, its log, the ledger, object storage and exports.

Each test writes unique marker words into turns, erases some, and greps every
byte of every artefact for them: the SQLite file with its ``-wal`` and ``-shm``,
every object in the bucket (decompressed where gzipped), a fresh export. The
markers of what was not erased must still be found, and the rest of the profile
(other sessions, memories, version chains) must be intact.
"""

import asyncio
import gzip
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from botocore.exceptions import ClientError

from raymem.actors.durability import Durability, OldCopiesRemain
from raymem.config import load_settings
from raymem.errors import MemoryErased, MemoryNotFound
from raymem.export.archive import export_archive, import_archive, iter_archive
from raymem.export.erasure import replace_older_copies
from raymem.export.ledger import LedgerShipper, list_segments
from raymem.export.objectstore import ObjectStore
from raymem.export.restore import open_restored
from raymem.export.snapshot import list_snapshots, take_snapshot
from raymem.pipelines import ingest
from raymem.store import NewMemory, ProfileStore, erase, to_db_time, utc_now
from raymem.store.connection import open_sync
from raymem.store.replay import replay
from raymem.types import MessageIn

DIM = 8
T, P = "alice", "p1"
_numbers = itertools.count(10_000_001)


def marker() -> str:
    """A word found nowhere else, that tokenizing and stemming leave as it is."""
    return f"zqvx{next(_numbers)}k"


def turns(*contents: str) -> list[MessageIn]:
    return [MessageIn(role="user", content=c) for c in contents]


def file_artefacts(path: Path) -> dict[str, bytes]:
    """The bytes of a SQLite file and of its write-ahead log and shared-memory index."""
    return {
        name: Path(f"{path}{suffix}").read_bytes()
        for name, suffix in (("file", ""), ("wal", "-wal"), ("shm", "-shm"))
        if Path(f"{path}{suffix}").exists()
    }


def bucket_artefacts(object_store: ObjectStore, s3_client: Any) -> dict[str, bytes]:
    """Every version of every object in the bucket, gunzipped where it is gzipped.

    Named by key, and by key and version where the bucket keeps older versions.
    """
    found = {}
    bucket = object_store.bucket
    listing = s3_client.list_object_versions(Bucket=bucket)
    for item in listing.get("Versions", []):
        key, version = item["Key"], item["VersionId"]
        data = s3_client.get_object(Bucket=bucket, Key=key, VersionId=version)["Body"].read()
        name = key if version == "null" else f"{key}?versionId={version}"
        found[name] = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    assert not listing.get("IsTruncated")
    return found


def holding(artefacts: dict[str, bytes], text: str) -> list[str]:
    """The artefacts whose bytes contain ``text`` (as UTF-8), by name."""
    return [name for name, data in artefacts.items() if text.encode() in data]


async def export_bytes(store: ProfileStore) -> bytes:
    return b"".join([chunk async for chunk in iter_archive(store, profile=P)])


async def rows(store: ProfileStore) -> list[Any]:
    """Every session, message and memory row, as an archive carries them."""
    return [msgspec.json.decode(line) for line in (await export_bytes(store)).splitlines()[1:]]


async def ledger(store: ProfileStore) -> list[tuple[int, str, str, str]]:
    return await store.reads.ledger_entries(0, limit=100_000)


async def replayed_copies(
    store: ProfileStore, unredacted: list[tuple[int, str, str, str]], tmp_path: Path
) -> AsyncIterator[tuple[str, ProfileStore]]:
    """Copies of ``store`` rebuilt by replay: one from its redacted ledger, one from the
    entries it had before the erasures followed by the erase entries (which redact)."""
    redacted = await ledger(store)
    for name, entries in (
        ("redacted", redacted),
        ("old", unredacted + [e for e in redacted if e[2] == "erase"]),
    ):
        copy = await ProfileStore.open(tmp_path / name / "profile.db", dim=DIM)
        try:
            async with copy.write() as writer:
                for entry in entries:
                    assert await replay(writer, *entry)
            yield name, copy
        finally:
            await copy.close()


async def vectorise(store: ProfileStore, seed: int = 0) -> dict[int, bytes]:
    """Give every pending memory and turn a random vector; returns the turns' vector bytes."""
    rng = np.random.default_rng(seed)
    turn_vectors = {}
    for table in ("memory_vectors", "message_vectors"):
        pending = await store.reads.pending_vectors(table)
        vectors = rng.standard_normal((len(pending), DIM)).astype(np.float32)
        async with store.write() as writer:
            await writer.set_vectors(
                table, [(seq, vectors[i]) for i, (seq, _) in enumerate(pending)]
            )
        if table == "message_vectors":
            turn_vectors = {seq: vectors[i].tobytes() for i, (seq, _) in enumerate(pending)}
    return turn_vectors


async def memory_with(store: ProfileStore, text: str) -> str:
    """The id of the current memory whose content contains ``text``."""
    memories, _ = await store.reads.list_memories(include_superseded=True, limit=1000)
    [found] = [m.id for m in memories if text in m.content]
    return found


async def erase_memory(store: ProfileStore, memory_id: str) -> erase.Erasure:
    async with store.write() as writer:
        erased = await erase.erase_memories(writer, [memory_id], at=to_db_time(utc_now()))
    assert await store.truncate_wal()
    return erased


@pytest.fixture
async def store(tmp_path: Path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=DIM)
    yield store
    await store.close()


# ------------------------------------------------------------------ the file


async def test_erasing_a_memory_leaves_no_byte_of_its_text_in_the_file(store: ProfileStore):
    secret, kept, other = marker(), marker(), marker()
    await ingest.ingest(
        store,
        "s1",
        turns(f"My locker code is {secret}.", f"Remember that {kept} opens the gym locker."),
    )
    await ingest.ingest(store, "s2", turns(f"My sister moved to {other} last spring."))
    turn_vectors = await vectorise(store)
    [(secret_seq, _)] = [
        (seq, m) for seq, m in await store.reads.session_messages("s1") if secret in m.content
    ]
    assert await store.truncate_wal()
    before = file_artefacts(store.path)
    assert holding(before, secret) == ["file"]  # the control: the grep can find it
    assert turn_vectors[secret_seq] in before["file"]

    erased = await erase_memory(store, await memory_with(store, secret))

    assert (len(erased.memories), len(erased.messages), erased.sessions) == (1, 1, [])
    after = file_artefacts(store.path)
    assert holding(after, secret) == []
    assert turn_vectors[secret_seq] not in after["file"]  # sqlite-vec zeroes a deleted vector
    assert after.get("wal", b"") == b""  # truncated: no old page image is left in it
    for word in (kept, other):  # what was not erased is all still there
        assert holding(after, word) == ["file"]
        assert await memory_with(store, word)
    assert [m.content for _, m in await store.reads.session_messages("s1")] == [
        f"Remember that {kept} opens the gym locker."
    ]
    assert store.search.messages_text(f'"{secret}"', limit=5) == []
    assert store.search.memories_text(f'"{secret}"', limit=5) == []
    assert len(store.search.messages_text(f'"{kept}"', limit=5)) == 1
    assert secret.encode() not in await export_bytes(store)


async def test_the_erased_memory_stays_in_its_chain_as_a_tombstone(store: ProfileStore):
    paris, berlin, lisbon = marker(), marker(), marker()
    for memory_id, city in (("m-1", paris), ("m-2", berlin), ("m-3", lisbon)):
        await ingest.remember(store, f"I live in {city}.", memory_id=memory_id)
    assert [m.id for m in await store.reads.history("m-3")] == ["m-1", "m-2", "m-3"]

    erased = await erase_memory(store, "m-2")

    assert erased.memories == ["m-2"] and erased.messages == []
    with pytest.raises(MemoryErased, match="Memory 'm-2' was erased") as caught:
        await store.reads.get_memory("m-2")
    assert caught.value.status == 410 and caught.value.code == "memory_erased"
    with pytest.raises(MemoryErased):
        await store.reads.history("m-2")
    chain = await store.reads.history("m-1")
    assert [m.id for m in chain] == ["m-1", "m-2", "m-3"]  # the chain keeps its shape
    tombstone = chain[1]
    assert (tombstone.content, tombstone.topic_key, tombstone.source_message_ids) == ("", None, [])
    assert tombstone.erased_at is not None and tombstone.forgotten_at == tombstone.erased_at
    assert tombstone.superseded_by == "m-3" and chain[0].superseded_by == "m-2"
    assert [m.content for m in chain] == [f"I live in {paris}.", "", f"I live in {lisbon}."]
    listed, _ = await store.reads.list_memories(include_superseded=True)
    assert "m-2" not in {m.id for m in listed}
    assert holding(file_artefacts(store.path), berlin) == []
    assert (await store.reads.info(P)).memories == 1  # m-3, the head, is still current


async def test_memories_drawn_from_an_erased_turn_are_erased_too(store: ProfileStore):
    first, second, third = marker(), marker(), marker()
    await ingest.ingest(store, "s1", turns(f"I keep {first} and {second} in the shed.", third))
    [turn] = [m for _, m in await store.reads.session_messages("s1") if first in m.content]
    [other_turn] = [m for _, m in await store.reads.session_messages("s1") if m.content == third]
    now = to_db_time(utc_now())
    drawn = [
        NewMemory(type="fact", content=f"The shed holds {word}.", id=f"drawn-{i}", created_at=now)
        for i, word in enumerate((first, second))
    ]
    both = NewMemory(
        type="fact", content="Two turns.", id="both", created_at=now, source_message_ids=[]
    )
    async with store.write() as writer:
        for memory in drawn:
            memory.source_message_ids = [turn.id]
            await writer.insert_memory(memory)
        both.source_message_ids = [other_turn.id, turn.id]
        await writer.insert_memory(both)

    erased = await erase_memory(store, "drawn-0")

    assert erased.messages == [turn.id]
    assert set(erased.memories) >= {"drawn-0", "drawn-1", "both"}  # every memory of that turn
    for memory_id in ("drawn-0", "drawn-1", "both"):
        with pytest.raises(MemoryErased):
            await store.reads.get_memory(memory_id)
    assert holding(file_artefacts(store.path), first) == []
    assert holding(file_artefacts(store.path), second) == []
    # The other turn of "both" stays: only the turns of the erased memory are erased.
    assert [m.content for _, m in await store.reads.session_messages("s1")] == [third]


async def test_erasing_twice_or_an_unknown_memory(store: ProfileStore):
    await ingest.remember(store, "I like green tea.", memory_id="m-tea")
    assert (await erase_memory(store, "m-tea")).memories == ["m-tea"]
    seq = await store.reads.ledger_seq()
    again = await erase_memory(store, "m-tea")
    assert again.is_empty() and await store.reads.ledger_seq() == seq  # nothing new logged
    with pytest.raises(MemoryNotFound):
        await erase_memory(store, "m-nope")
    async with store.write() as writer:  # forgetting a tombstone changes nothing
        assert await writer.forget("m-tea")


async def test_erasing_a_session_removes_its_turns_memories_and_row(store: ProfileStore):
    gone, kept = marker(), marker()
    await ingest.ingest(store, "s1", turns(f"My locker code is {gone}.", "I play the cello."))
    await ingest.remember(store, f"Call me {gone}-ish.", memory_id="m-s1", session_id="s1")
    await ingest.ingest(store, "s2", turns(f"My sister moved to {kept}."))
    await vectorise(store)
    s1_memories, _ = await store.reads.list_memories(session_id="s1")

    async with store.write() as writer:
        erased = await erase.erase_session(writer, "s1", at=to_db_time(utc_now()))
    assert await store.truncate_wal()

    assert erased.erasure.sessions == ["s1"] and len(erased.erasure.messages) == 2
    assert set(erased.erasure.memories) == {m.id for m in s1_memories}
    assert erased.memories_forgotten == len(s1_memories)
    assert [s.id for s in await store.reads.list_sessions()] == ["s2"]
    after = file_artefacts(store.path)
    assert holding(after, gone) == [] and holding(after, "cello") == []
    assert holding(after, kept) == ["file"]
    assert (await store.reads.info(P)).messages == 1
    async with store.write() as writer:
        unknown = await erase.erase_session(writer, "s1", at=to_db_time(utc_now()))
    assert unknown.erasure.is_empty()


async def test_retention_erases_old_turns_and_keeps_their_memories(store: ProfileStore):
    old, young = marker(), marker()
    async with store.write() as writer:
        await writer.insert_messages(ingest.build_messages("s1", turns(f"Old chatter {old}.")))
    cutoff = to_db_time(utc_now())
    await ingest.ingest(store, "s2", turns(f"I adopted a cat named {young}."))
    await ingest.remember(store, "I like green tea.", memory_id="m-tea")

    async with store.write() as writer:
        assert await erase.erase_turns_before(writer, cutoff) == 1
    assert await store.truncate_wal()

    after = file_artefacts(store.path)
    assert holding(after, old) == []
    assert holding(after, young) == ["file"]
    assert {m.content for m in (await store.reads.list_memories())[0]} == {
        f"I adopted a cat named {young}.",
        "I like green tea.",
    }
    [(op, payload)] = [(op, payload) for _, _, op, payload in await ledger(store)][-1:]
    assert op == "purge" and json.loads(payload) == {"before": cutoff, "count": 1}


async def test_the_pending_mark_follows_the_newest_erasure(store: ProfileStore):
    await ingest.remember(store, "I like green tea.", memory_id="m-tea")
    await ingest.remember(store, "I like black coffee.", memory_id="m-coffee")
    async with store.write() as writer:
        assert await erase.pending_seq(writer) is None
    await erase_memory(store, "m-tea")
    first = await store.reads.ledger_seq()
    await erase_memory(store, "m-coffee")
    second = await store.reads.ledger_seq()
    async with store.write() as writer:
        assert await erase.pending_seq(writer) == second
        await erase.clear_pending(writer, upto_seq=first)  # older than the newest: kept
        assert await erase.pending_seq(writer) == second
        await erase.clear_pending(writer, upto_seq=second)
        assert await erase.pending_seq(writer) is None


# ---------------------------------------------------------------- the ledger


async def test_the_ledger_is_redacted_and_records_the_erasure_by_ids(store: ProfileStore):
    secret, kept = marker(), marker()
    await ingest.ingest(store, "s1", turns(f"My locker code is {secret}.", f"I like {kept}."))
    memory_id = await memory_with(store, secret)
    entries_before = len(await ledger(store))

    erased = await erase_memory(store, memory_id)

    entries = await ledger(store)
    assert len(entries) == entries_before + 1  # rewritten in place, plus one entry
    assert not [entry for entry in entries if secret in entry[3]]
    assert [entry for entry in entries if kept in entry[3]]
    _, at, op, payload = entries[-1]
    assert op == "erase" and msgspec.json.decode(payload, type=erase.Erasure) == erased
    assert erased.at == at
    [memory_entry] = [e for e in entries if e[2] == "memory" and memory_id in e[3]]
    redacted = json.loads(memory_entry[3])
    assert redacted["content"] == "" and redacted["search_queries"] == []


async def test_replaying_a_redacted_ledger_gives_the_same_profile(
    store: ProfileStore, tmp_path: Path
):
    secret = marker()
    await ingest.ingest(store, "s1", turns(f"My locker code is {secret}.", "I play the cello."))
    await ingest.ingest(store, "s2", turns("My sister lives in Porto."))
    await ingest.remember(store, "I live in Paris.", memory_id="m-1")
    await ingest.remember(store, "I live in Berlin.", memory_id="m-2")
    unredacted = await ledger(store)
    await erase_memory(store, await memory_with(store, secret))
    await erase_memory(store, "m-1")
    async with store.write() as writer:
        await erase.erase_session(writer, "s2", at=to_db_time(utc_now()))
    redacted = await ledger(store)

    # A copy replays the redacted ledger; another the entries it had before the
    # erasures and then the erase entries, which redact what it holds.
    async for name, copy in replayed_copies(store, unredacted, tmp_path):
        assert await copy.truncate_wal()
        assert await rows(copy) == await rows(store), name
        assert await ledger(copy) == redacted, name
        assert holding(file_artefacts(copy.path), secret) == [], name
        assert await copy.reads.history("m-2") == await store.reads.history("m-2")
        assert "m-1" in [m.id for m in await copy.reads.history("m-2")]


async def test_an_import_entry_is_redacted_and_still_replays(store: ProfileStore, tmp_path: Path):
    secret, kept = marker(), marker()
    source = await ProfileStore.open(tmp_path / "source" / "profile.db", dim=DIM)
    try:
        await ingest.ingest(source, "s1", turns(f"My locker code is {secret}."))
        await ingest.ingest(source, "s2", turns(f"I like {kept}."))
        await export_archive(source, tmp_path / "a.jsonl", profile="source")
    finally:
        await source.close()
    await import_archive(store, tmp_path / "a.jsonl", profile=P)

    async with store.write() as writer:
        await erase.erase_session(writer, "s1", at=to_db_time(utc_now()))
    assert await store.truncate_wal()

    entries = await ledger(store)
    assert [e[2] for e in entries] == ["import", "erase"]
    assert secret not in entries[0][3] and kept in entries[0][3]
    assert holding(file_artefacts(store.path), secret) == []
    copy = await ProfileStore.open(tmp_path / "copy" / "profile.db", dim=DIM)
    try:
        async with copy.write() as writer:
            for entry in entries:
                assert await replay(writer, *entry)
        assert await rows(copy) == await rows(store)
    finally:
        await copy.close()


# ------------------------------------------------------------------ exports


async def test_an_export_after_an_erasure_carries_tombstones_and_no_text(
    store: ProfileStore, tmp_path: Path
):
    secret = marker()
    await ingest.remember(store, f"I live in {secret}.", memory_id="m-1")
    await ingest.remember(store, "I live in Berlin.", memory_id="m-2")
    await ingest.ingest(store, "s1", turns("I play the cello."))
    await erase_memory(store, "m-1")

    first = await export_archive(store, tmp_path / "a.jsonl", profile=P)
    data = (tmp_path / "a.jsonl").read_bytes()
    assert secret.encode() not in data and b"cello" in data
    [tombstone] = [json.loads(line) for line in data.splitlines() if b'"m-1"' in line[:40]]
    assert tombstone["content"] == "" and tombstone["erased_at"] is not None
    # Lines of memories never erased keep the form older versions read.
    assert all(b"erased_at" not in line for line in data.splitlines() if b'"m-1"' not in line)

    copy = await ProfileStore.open(tmp_path / "copy" / "profile.db", dim=DIM)
    try:
        await import_archive(copy, tmp_path / "a.jsonl", profile="copy")
        second = await export_archive(copy, tmp_path / "b.jsonl", profile=P)
        assert (tmp_path / "b.jsonl").read_bytes() == data and second.counts == first.counts
        assert [m.id for m in await copy.reads.history("m-2")] == ["m-1", "m-2"]
        with pytest.raises(MemoryErased):
            await copy.reads.get_memory("m-1")
    finally:
        await copy.close()


# ----------------------------------------------------------- object storage


@pytest.mark.parametrize("versioned", [False, True], ids=["plain-bucket", "versioned-bucket"])
async def test_older_snapshots_and_segments_are_replaced_after_an_erasure(
    store: ProfileStore, object_store: ObjectStore, s3_client: Any, tmp_path: Path, versioned: bool
):
    bucket = object_store.bucket
    if versioned:
        s3_client.put_bucket_versioning(
            Bucket=bucket, VersioningConfiguration={"Status": "Enabled"}
        )
    secret, kept = marker(), marker()
    await ingest.ingest(store, "s1", turns(f"My locker code is {secret}.", f"I like {kept}."))
    shipper = LedgerShipper(store, object_store, T, P)
    await shipper.start(background=False)
    await take_snapshot(store, object_store, T, P)
    await ingest.ingest(store, "s2", turns(f"Also {secret} opens the shed."))
    await shipper.flush()
    assert len(holding(bucket_artefacts(object_store, s3_client), secret)) == 2  # the control
    # A large upload cut short by a crash leaves parts that no listing of objects shows.
    cut_short = s3_client.create_multipart_upload(Bucket=bucket, Key=f"raymem/{T}/{P}/snapshots/9")
    s3_client.upload_part(
        Bucket=bucket,
        Key=f"raymem/{T}/{P}/snapshots/9",
        UploadId=cut_short["UploadId"],
        PartNumber=1,
        Body=secret.encode() * 1000,
    )

    async with store.write() as writer:
        await erase.erase_session(writer, "s2", at=to_db_time(utc_now()))
    await erase_memory(store, await memory_with(store, f"code is {secret}"))

    async def replace() -> int:
        return (await replace_older_copies(store, object_store, T, P)).ledger_seq

    seq = await shipper.restart_from(replace)
    objects = bucket_artefacts(object_store, s3_client)
    assert holding(objects, secret) == []
    assert [name.split("?")[0] for name in holding(objects, kept)] == [
        f"raymem/{T}/{P}/snapshots/{seq:020d}"
    ]
    assert s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert s3_client.list_object_versions(Bucket=bucket).get("DeleteMarkers", []) == []
    assert [s.ledger_seq for s in await list_snapshots(object_store, T, P)] == [seq]
    assert await list_segments(object_store, T, P) == []
    # Writes after it are shipped from the new snapshot on, and a restore has it all.
    await ingest.remember(store, "I like green tea.", memory_id="m-tea")
    assert await shipper.flush() == await store.reads.ledger_seq()
    assert [(s.first_seq, s.last_seq) for s in await list_segments(object_store, T, P)] == [
        (seq + 1, await store.reads.ledger_seq())
    ]
    restored, report = await open_restored(
        tmp_path / "restored" / "profile.db",
        dim=DIM,
        object_store=object_store,
        tenant=T,
        profile=P,
    )
    try:
        assert report.source == "snapshot" and report.replayed > 0
        assert await rows(restored) == await rows(store)
    finally:
        await restored.close()


async def test_a_copy_left_on_another_node_is_replaced_when_the_profile_wakes_there(
    store: ProfileStore, object_store: ObjectStore, tmp_path: Path
):
    secret = marker()
    await ingest.ingest(store, "s1", turns(f"My locker code is {secret}.", "I like tea."))
    await take_snapshot(store, object_store, T, P)
    left_behind = tmp_path / "other-node" / "profile.db"
    left_behind.parent.mkdir()
    conn = open_sync(store.path)
    try:  # the copy a node kept when the profile moved on
        conn.execute("VACUUM INTO ?", (str(left_behind),))
    finally:
        conn.close()
    await erase_memory(store, await memory_with(store, secret))
    await replace_older_copies(store, object_store, T, P)  # one snapshot, no segment after it

    woken, report = await open_restored(
        left_behind, dim=DIM, object_store=object_store, tenant=T, profile=P
    )
    try:
        assert report.source == "snapshot"
        assert await rows(woken) == await rows(store)
        assert holding(file_artefacts(left_behind), secret) == []
    finally:
        await woken.close()


async def test_a_failed_removal_is_reported_and_a_retry_finishes_it(
    tmp_path: Path, store_via_proxy: Any, throttling_proxy: Any, s3_client: Any, bucket: str
):
    """Durability without Ray: object storage fails after the erasure; the retry completes it."""
    settings = load_settings(
        environ={
            "RAYMEM_DATA_DIR": str(tmp_path / "data"),
            "RAYMEM_OBJECT_STORE_BUCKET": bucket,
            "RAYMEM_OBJECT_STORE_ENDPOINT_URL": throttling_proxy.url,
            "RAYMEM_DURABILITY_MODE": "replicated",
        }
    )
    durability = Durability(settings, T, P)
    durability.object_store = store_via_proxy(attempts=2)
    store = await durability.open(tmp_path / "data" / "profile.db", dim=DIM, embedder="")
    try:
        secret = marker()
        await ingest.ingest(store, "s1", turns(f"My locker code is {secret}.", "I like tea."))
        await durability.snapshot()
        await ingest.ingest(store, "s1", turns(f"Also {secret} opens the shed."))
        await durability.after_write()  # replicated: shipped before this returns
        object_store = durability.object_store
        assert len(holding(bucket_artefacts(object_store, s3_client), secret)) == 2

        async with store.write() as writer:
            await erase.erase_session(writer, "s1", at=to_db_time(utc_now()))
        await durability.after_write()
        throttling_proxy.fail_next(2)
        with pytest.raises(OldCopiesRemain, match="object storage"):
            await durability.remove_erased_copies()
        assert holding(file_artefacts(store.path), secret) == []  # the local part is done
        assert holding(bucket_artefacts(object_store, s3_client), secret)
        async with store.write() as writer:
            assert await erase.pending_seq(writer) is not None

        await durability.remove_erased_copies()  # the retry
        assert holding(bucket_artefacts(object_store, s3_client), secret) == []
        async with store.write() as writer:
            assert await erase.pending_seq(writer) is None
    finally:
        await durability.close()
        await store.close()


async def test_an_erasure_cut_short_is_finished_when_the_profile_wakes_again(
    tmp_path: Path, store_via_proxy: Any, throttling_proxy: Any, s3_client: Any, bucket: str
):
    settings = load_settings(
        environ={
            "RAYMEM_DATA_DIR": str(tmp_path / "data"),
            "RAYMEM_OBJECT_STORE_BUCKET": bucket,
            "RAYMEM_OBJECT_STORE_ENDPOINT_URL": throttling_proxy.url,
            "RAYMEM_DURABILITY_MODE": "replicated",
        }
    )
    path = tmp_path / "data" / "profile.db"
    first = Durability(settings, T, P)
    first.object_store = store_via_proxy(attempts=2)
    store = await first.open(path, dim=DIM, embedder="")
    secret = marker()
    await ingest.ingest(store, "s1", turns(f"My locker code is {secret}.", "I like tea."))
    await first.snapshot()
    async with store.write() as writer:
        await erase.erase_session(writer, "s1", at=to_db_time(utc_now()))
    await first.after_write()  # the erase entry is shipped; only the removal is left
    throttling_proxy.fail_next(2)
    with pytest.raises(OldCopiesRemain):  # hibernation fails: the actor would stay awake
        await first.close()
    await store.close()  # and then crash
    assert holding(bucket_artefacts(first.object_store, s3_client), secret)

    woken = Durability(settings, T, P)
    woken.object_store = store_via_proxy(attempts=2)
    store = await woken.open(path, dim=DIM, embedder="")
    try:
        # Activation retries the removal in the background, before the first snapshot round.
        for _ in range(600):
            try:
                objects = await asyncio.to_thread(bucket_artefacts, woken.object_store, s3_client)
            except ClientError:  # an object listed was removed before it was read
                objects = {}
            if objects and not holding(objects, secret):
                break
            await asyncio.sleep(0.05)
        assert holding(objects, secret) == [] and objects
    finally:
        await woken.close()
        await store.close()


async def test_deleting_a_profile_leaves_nothing_in_the_bucket(
    tmp_path: Path, s3_endpoint: str, s3_client: Any, bucket: str
):
    s3_client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    settings = load_settings(
        environ={
            "RAYMEM_DATA_DIR": str(tmp_path / "data"),
            "RAYMEM_OBJECT_STORE_BUCKET": bucket,
            "RAYMEM_OBJECT_STORE_ENDPOINT_URL": s3_endpoint,
            "RAYMEM_DURABILITY_MODE": "replicated",
        }
    )
    durability = Durability(settings, T, P)
    store = await durability.open(tmp_path / "data" / "profile.db", dim=DIM, embedder="")
    try:
        await ingest.ingest(store, "s1", turns("My locker code is 1234.", "I like tea."))
        await durability.snapshot()
        await ingest.remember(store, "I like green tea.", memory_id="m-tea")
        await durability.after_write()
        await durability.snapshot()  # a second snapshot prunes segments: delete markers
        key = f"raymem/{T}/{P}/snapshots/9"
        s3_client.create_multipart_upload(Bucket=bucket, Key=key)
        other = f"raymem/{T}/{P}-other/keep"
        s3_client.put_object(Bucket=bucket, Key=other, Body=b"another profile's")
        assert len(s3_client.list_object_versions(Bucket=bucket)["Versions"]) > 3

        await durability.destroy()

        versions = s3_client.list_object_versions(Bucket=bucket)
        assert [v["Key"] for v in versions.get("Versions", [])] == [other]
        assert versions.get("DeleteMarkers", []) == []
        assert s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    finally:
        await store.close()
