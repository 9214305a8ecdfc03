"""Snapshots: consistent, compressed copies of a profile's SQLite file in object storage.

A snapshot is taken online with ``VACUUM INTO`` on a separate read-only
connection: SQLite writes a transactionally consistent copy while the
profile keeps serving (a raw copy of a live WAL database can be torn). The
copy is gzipped and stored as ``<prefix>/<tenant>/<profile>/snapshots/<seq>``,
``seq`` being the ledger seq the copy contains, zero-padded so that keys sort
in seq order; a JSON manifest beside it (``<seq>.json``), written last, marks
the snapshot complete and carries its checksum.
"""

import asyncio
import gzip
import hashlib
import logging
import os
import shutil
import tempfile
import zlib
from pathlib import Path

import msgspec

from raymem.export.objectstore import ObjectNotFound, ObjectStore
from raymem.store import COUNTS_SQL, ProfileStore, to_db_time, utc_now
from raymem.store.connection import Error as SqliteError
from raymem.store.connection import open_sync
from raymem.store.schema import SCHEMA_VERSION

log = logging.getLogger(__name__)

SNAPSHOT_FORMAT = 1
DEFAULT_RETENTION = 3  # snapshots kept per profile; candidate for DurabilitySettings
SEQ_DIGITS = 20  # a signed 64-bit seq has at most 19 digits
MANIFEST_SUFFIX = ".json"


class SnapshotManifest(msgspec.Struct, frozen=True, kw_only=True):
    """What a snapshot holds; stored as JSON beside the compressed database."""

    format: int = SNAPSHOT_FORMAT
    key: str  # the object holding the gzipped database
    ledger_seq: int  # the last ledger entry the database contains
    schema_version: int  # PRAGMA user_version of the database
    sha256: str  # of the stored (compressed) object
    size: int  # bytes of the stored object
    db_size: int  # bytes of the uncompressed database
    compression: str = "gzip"
    counts: dict[str, int]  # messages, memories (current), sessions
    created_at: str


class SnapshotRef(msgspec.Struct, frozen=True, kw_only=True):
    """A complete snapshot found by listing: its data key has a manifest beside it."""

    ledger_seq: int
    key: str
    manifest_key: str


class SnapshotError(Exception):
    """A snapshot cannot be used: missing, corrupt, truncated or from a newer schema."""


def snapshots_prefix(object_store: ObjectStore, tenant: str, profile: str) -> str:
    """The key prefix under which a profile's snapshots live (ends with a slash)."""
    return object_store.key(tenant, profile, "snapshots") + "/"


def snapshot_key(object_store: ObjectStore, tenant: str, profile: str, ledger_seq: int) -> str:
    """The key of the snapshot that contains the ledger up to ``ledger_seq``."""
    return f"{snapshots_prefix(object_store, tenant, profile)}{ledger_seq:0{SEQ_DIGITS}d}"


async def list_snapshots(object_store: ObjectStore, tenant: str, profile: str) -> list[SnapshotRef]:
    """A profile's complete snapshots, newest (highest ledger seq) first."""
    prefix = snapshots_prefix(object_store, tenant, profile)
    refs = []
    for info in await object_store.list(prefix):
        name = info.key[len(prefix) :]
        stem = name.removesuffix(MANIFEST_SUFFIX)
        if name.endswith(MANIFEST_SUFFIX) and stem.isdigit() and len(stem) == SEQ_DIGITS:
            refs.append(SnapshotRef(ledger_seq=int(stem), key=prefix + stem, manifest_key=info.key))
    return sorted(refs, key=lambda ref: ref.ledger_seq, reverse=True)


async def read_manifest(object_store: ObjectStore, ref: SnapshotRef) -> SnapshotManifest:
    """Fetch and decode one snapshot's manifest.

    Raises:
        SnapshotError: the manifest is missing or malformed.
    """
    try:
        return msgspec.json.decode(await object_store.get(ref.manifest_key), type=SnapshotManifest)
    except (ObjectNotFound, msgspec.DecodeError) as exc:
        raise SnapshotError(f"manifest {ref.manifest_key!r} is unusable: {exc}") from exc


def _copy_and_compress(db_path: Path, workdir: Path) -> tuple[Path, SnapshotManifest]:
    """Blocking: ``VACUUM INTO`` a consistent copy, gzip it, and describe it (key left blank)."""
    copy = workdir / "profile.db"
    source = open_sync(db_path, read_only=True)
    try:
        source.execute("VACUUM INTO ?", (str(copy),))
    finally:
        source.close()
    conn = open_sync(copy, read_only=True)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        seq = conn.execute("SELECT coalesce(max(seq), 0) FROM ledger").fetchone()[0]
        messages, memories, sessions = conn.execute(COUNTS_SQL).fetchone()
    finally:
        conn.close()
    packed = workdir / "profile.db.gz"
    with copy.open("rb") as raw, gzip.open(packed, "wb", compresslevel=6) as out:
        shutil.copyfileobj(raw, out, length=4 * 2**20)
    with packed.open("rb") as stored:
        digest = hashlib.file_digest(stored, "sha256").hexdigest()
    manifest = SnapshotManifest(
        key="",
        ledger_seq=int(seq),
        schema_version=int(version),
        sha256=digest,
        size=packed.stat().st_size,
        db_size=copy.stat().st_size,
        counts={"messages": messages, "memories": memories, "sessions": sessions},
        created_at=to_db_time(utc_now()),
    )
    return packed, manifest


async def take_snapshot(
    store: ProfileStore,
    object_store: ObjectStore,
    tenant: str,
    profile: str,
    *,
    retention: int = DEFAULT_RETENTION,
) -> SnapshotManifest:
    """Upload a consistent snapshot of a live profile, then prune old ones.

    When the newest snapshot already holds the current ledger seq, nothing is
    uploaded and its manifest is returned (periodic snapshots of an idle profile are free).

    Args:
        store: the open profile; it keeps serving while the copy is taken.
        object_store: where snapshots go.
        tenant: the profile's tenant.
        profile: the profile's name.
        retention: how many snapshots to keep, newest first (at least 1).
    """
    existing = await list_snapshots(object_store, tenant, profile)
    if existing and existing[0].ledger_seq == await store.reads.ledger_seq():
        return await read_manifest(object_store, existing[0])
    with tempfile.TemporaryDirectory(dir=store.path.parent, prefix=".snapshot-") as tmp:
        packed, manifest = await asyncio.to_thread(_copy_and_compress, store.path, Path(tmp))
        key = snapshot_key(object_store, tenant, profile, manifest.ledger_seq)
        manifest = msgspec.structs.replace(manifest, key=key)
        # Data first, manifest last: a snapshot without a manifest is never restored.
        await object_store.put_file(manifest.key, packed)
    await object_store.put(
        manifest.key + MANIFEST_SUFFIX,
        msgspec.json.encode(manifest),
        content_type="application/json",
    )
    log.info(
        "snapshot of %s/%s at ledger seq %d: %d bytes (%d uncompressed)",
        tenant,
        profile,
        manifest.ledger_seq,
        manifest.size,
        manifest.db_size,
    )
    await prune_snapshots(object_store, tenant, profile, keep=retention)
    return manifest


async def prune_snapshots(
    object_store: ObjectStore, tenant: str, profile: str, *, keep: int = DEFAULT_RETENTION
) -> list[str]:
    """Delete all but the ``keep`` newest complete snapshots; returns the deleted keys.

    Data objects left without a manifest (an upload cut short) and older than
    the newest complete snapshot are deleted too.
    """
    keep = max(keep, 1)
    prefix = snapshots_prefix(object_store, tenant, profile)
    refs = await list_snapshots(object_store, tenant, profile)
    doomed = []
    for ref in refs[keep:]:
        doomed += [ref.manifest_key, ref.key]  # manifest first: never a manifest without data
    if refs:
        complete = {ref.key for ref in refs}
        for info in await object_store.list(prefix):
            stem = info.key[len(prefix) :]
            orphan = stem.isdigit() and info.key not in complete
            if orphan and int(stem) < refs[0].ledger_seq:
                doomed.append(info.key)
    if doomed:
        await object_store.delete(*doomed)
    return doomed


def _unpack_and_check(packed: Path, manifest: SnapshotManifest, target: Path) -> None:
    """Blocking: verify the download against its manifest, gunzip it, check the database."""
    size = packed.stat().st_size
    if size != manifest.size:
        raise SnapshotError(f"size is {size} bytes, the manifest says {manifest.size}")
    with packed.open("rb") as stored:
        digest = hashlib.file_digest(stored, "sha256").hexdigest()
    if digest != manifest.sha256:
        raise SnapshotError(f"sha256 is {digest}, the manifest says {manifest.sha256}")
    with gzip.open(packed, "rb") as raw, target.open("wb") as out:
        shutil.copyfileobj(raw, out, length=4 * 2**20)
        out.flush()
        os.fsync(out.fileno())
    conn = open_sync(target, read_only=True)
    try:
        check = conn.execute("PRAGMA quick_check").fetchone()[0]
        seq = conn.execute("SELECT coalesce(max(seq), 0) FROM ledger").fetchone()[0]
    finally:
        conn.close()
    if check != "ok":
        raise SnapshotError(f"quick_check says {check!r}")
    if seq != manifest.ledger_seq:
        raise SnapshotError(f"holds ledger seq {seq}, the manifest says {manifest.ledger_seq}")


def _install(restored: Path, path: Path) -> None:
    """Blocking: move a verified database into place atomically, dropping stale WAL files.

    A leftover ``-wal`` of the old file would be replayed into the restored one.
    """
    for suffix in ("-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(restored, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a crash
    finally:
        os.close(directory)


async def _restore_one(
    object_store: ObjectStore, ref: SnapshotRef, path: Path, workdir: Path
) -> SnapshotManifest:
    manifest = await read_manifest(object_store, ref)
    if manifest.schema_version > SCHEMA_VERSION:
        raise SnapshotError(
            f"schema version {manifest.schema_version} is newer than this raymem's"
            f" ({SCHEMA_VERSION})"
        )
    packed, restored = workdir / f"{ref.ledger_seq}.gz", workdir / f"{ref.ledger_seq}.db"
    try:
        await object_store.get_file(ref.key, packed)
        await asyncio.to_thread(_unpack_and_check, packed, manifest, restored)
    except (ObjectNotFound, OSError, EOFError, zlib.error, SqliteError) as exc:
        # gzip raises BadGzipFile (an OSError) or EOFError on a truncated or garbled file.
        raise SnapshotError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        packed.unlink(missing_ok=True)
    await asyncio.to_thread(_install, restored, path)
    return manifest


async def restore_latest(
    object_store: ObjectStore, tenant: str, profile: str, path: str | Path
) -> SnapshotManifest | None:
    """Replace the file at ``path`` with the newest valid snapshot of a profile.

    Each candidate is downloaded to a temporary file beside ``path``, checked
    (size, sha256, gzip, SQLite quick_check, ledger seq) and only then renamed
    into place, so ``path`` never holds a half-restored file. A bad snapshot is
    logged and the previous one is tried. No store may have ``path`` open.

    Returns:
        The manifest of the restored snapshot, or None when the profile has none.

    Raises:
        SnapshotError: snapshots exist but none of them is usable.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    refs = await list_snapshots(object_store, tenant, profile)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".restore-") as tmp:
        for ref in refs:
            try:
                manifest = await _restore_one(object_store, ref, path, Path(tmp))
            except SnapshotError as exc:
                log.warning(
                    "snapshot %r of %s/%s is unusable (%s); falling back to the previous one",
                    ref.key,
                    tenant,
                    profile,
                    exc,
                )
                continue
            log.info(
                "restored %s/%s from snapshot %r (ledger seq %d)",
                tenant,
                profile,
                ref.key,
                manifest.ledger_seq,
            )
            return manifest
    if refs:
        raise SnapshotError(
            f"None of the {len(refs)} snapshots of {tenant}/{profile} is usable;"
            f" newest: {refs[0].key!r}"
        )
    return None
