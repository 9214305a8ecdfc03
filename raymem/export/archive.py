"""JSON Lines archives of a whole profile: export, and import into a new or empty profile.

An archive is one header line, then every session, message and memory as
stored (ids, timestamps, version chains through ``superseded_by``, provenance
and search queries), one JSON object per line with a ``kind`` field, in
insertion order. Vectors are left out: they are recomputed after an import.
Encoding is deterministic, so export → import → export gives the same bytes
apart from the profile name in the header. A name ending in ``.gz`` is gzipped.
"""

import asyncio
import gzip
import io
import itertools
import math
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Union

import msgspec

from raymem.errors import Conflict, InvalidRequest
from raymem.export.objectstore import ObjectStore, parse_s3_url
from raymem.export.tables import (
    ARCHIVE_FORMAT,
    ARCHIVE_TABLES,
    ARCHIVE_VERSION,
    COUNTED_TABLES,
    ArchiveTable,
    Counts,
    Header,
    Line,
)
from raymem.store import ProfileStore, StoreWriter, to_db_time, utc_now
from raymem.store.connection import open_connection
from raymem.store.replay import restore_rows
from raymem.store.rows import carried_value

BATCH_ROWS = 500

# progress(done, total): rows written or read so far, and rows in the archive.
Progress = Callable[[int, int], None]
Source = str | Path | BinaryIO | bytes
Destination = str | Path | BinaryIO


class ArchiveError(InvalidRequest):
    """The input is not a readable raymem archive."""


class ProfileNotEmpty(Conflict):
    """An import was aimed at a profile that already holds data."""

    code = "profile_not_empty"

    def __init__(self, profile: str) -> None:
        super().__init__(profile)
        self.profile = profile

    def __str__(self) -> str:
        return (
            f"Profile {self.profile!r} is not empty; import only into a new or empty profile"
            " (delete it first, or import under another name)"
        )


_encoder = msgspec.json.Encoder()
_header_decoder = msgspec.json.Decoder(Header)
_row_decoder: msgspec.json.Decoder[Line] = msgspec.json.Decoder(
    Union[tuple(part.line for part in ARCHIVE_TABLES)]  # noqa: UP007
)
_PART_OF_LINE: dict[type[Line], ArchiveTable] = {part.line: part for part in ARCHIVE_TABLES}


def _line(part: ArchiveTable, row: tuple[Any, ...]) -> Line:
    """A row of ``part``'s columns, in order, as its archive line."""
    spec = part.columns
    fields = {
        column: carried_value(spec, column, value)
        for column, value in zip(spec.columns, row, strict=True)
    }
    return part.line(**fields)


def _counts(rows: dict[str, int]) -> Counts:
    """The core tables' counts always, the other tables' when they hold rows (as ``_nonempty``)."""
    other = {table: count for table, count in rows.items() if table not in COUNTED_TABLES and count}
    return Counts(**{table: rows.get(table, 0) for table in COUNTED_TABLES}, other=other)


def _total(counts: Counts) -> int:
    return counts.sessions + counts.messages + counts.memories + sum(counts.other.values())


def _store_path(source: ProfileStore | str | Path) -> Path:
    return source.path if isinstance(source, ProfileStore) else Path(source)


async def iter_archive(
    source: ProfileStore | str | Path, *, profile: str, progress: Progress | None = None
) -> AsyncIterator[bytes]:
    """Yield a profile's archive as chunks of JSON Lines (for streaming over HTTP).

    Reads through its own read-only connection inside one transaction: the
    archive is a consistent point in time while the profile keeps serving.

    Args:
        source: the open store, or the path of a profile's SQLite file.
        profile: the name written in the header.
        progress: called with (rows done, rows total) after each chunk.
    """
    conn = await open_connection(_store_path(source), read_only=True)
    try:
        await conn.execute("BEGIN")  # one read snapshot for every query below
        rows: dict[str, int] = {}
        for part in ARCHIVE_TABLES:
            found = await conn.execute_fetchall(f"SELECT count(*) FROM {part.table}")
            rows[part.table] = next(iter(found))[0]
        found = await conn.execute_fetchall("SELECT coalesce(max(seq), 0) FROM ledger")
        seq = next(iter(found))[0]
        counts = _counts(rows)
        yield _encoder.encode(Header(profile=profile, ledger_seq=seq, counts=counts)) + b"\n"
        total, done = _total(counts), 0
        for part in ARCHIVE_TABLES:
            columns = ", ".join(part.columns.columns)
            after = 0
            while True:
                batch = list(
                    await conn.execute_fetchall(
                        f"SELECT {part.order_by}, {columns} FROM {part.table}"
                        f" WHERE {part.order_by} > ? ORDER BY {part.order_by} LIMIT ?",
                        (after, BATCH_ROWS),
                    )
                )
                if not batch:
                    break
                after = batch[-1][0]
                yield b"".join(_encoder.encode(_line(part, tuple(r[1:]))) + b"\n" for r in batch)
                done += len(batch)
                if progress is not None:
                    progress(done, total)
        await conn.execute("ROLLBACK")
    finally:
        await conn.close()


def _gzip_writer(raw: BinaryIO) -> BinaryIO:
    # No file name and no time in the gzip header: the same archive gives the same bytes.
    return gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0)  # type: ignore[return-value]


async def _write_file(chunks: AsyncIterator[bytes], path: Path, *, compress: bool) -> None:
    """Write to a temporary file beside ``path``, then rename: never half an archive there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as raw:
            out = _gzip_writer(raw) if compress else raw
            async for chunk in chunks:
                await asyncio.to_thread(out.write, chunk)
            if compress:
                out.close()
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


async def export_archive(
    source: ProfileStore | str | Path,
    destination: Destination,
    *,
    profile: str,
    object_store: ObjectStore | None = None,
    progress: Progress | None = None,
) -> Header:
    """Write a profile's archive to a local file, an ``s3://bucket/key`` URL or a binary stream.

    Args:
        source: the open store, or the path of a profile's SQLite file.
        destination: a path (gzipped when it ends in ``.gz``), an ``s3://`` URL
            (uploaded in parts when large), or a writable binary stream.
        profile: the name written in the header.
        object_store: the service (endpoint, region) an ``s3://`` URL is reached
            through; its bucket is replaced by the URL's. Default: AWS.
        progress: called with (rows done, rows total).

    Returns:
        The archive's header.
    """
    headers: list[Header] = []

    async def chunks() -> AsyncIterator[bytes]:
        async for chunk in iter_archive(source, profile=profile, progress=progress):
            if not headers:
                headers.append(_header_decoder.decode(chunk))
            yield chunk

    if isinstance(destination, str) and destination.startswith("s3://"):
        bucket, key = parse_s3_url(destination)
        target = object_store.for_bucket(bucket) if object_store else ObjectStore(bucket)
        with tempfile.TemporaryDirectory(prefix="raymem-export-") as tmp:
            local = Path(tmp) / "archive"
            await _write_file(chunks(), local, compress=key.endswith(".gz"))
            await target.put_file(key, local)
    elif isinstance(destination, str | Path):
        path = Path(destination)
        await _write_file(chunks(), path, compress=path.suffix == ".gz")
    else:
        async for chunk in chunks():
            await asyncio.to_thread(destination.write, chunk)
    return headers[0]


def _open_lines(stream: BinaryIO) -> BinaryIO:
    """Undo gzip when the stream starts with its magic bytes (seekable streams only)."""
    if stream.seekable():
        start = stream.tell()
        magic = stream.read(2)
        stream.seek(start)
        if magic == b"\x1f\x8b":
            return gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[return-value]
    return stream


def _batches(stream: BinaryIO) -> Iterator[list[bytes]]:
    lines = (line for line in _open_lines(stream) if line.strip())
    while batch := list(itertools.islice(lines, BATCH_ROWS)):
        yield batch


class _LedgerChunks:
    """Logs imported rows as replayable ``import`` ledger entries.

    The last entry takes the source's ledger seq (when higher), so a re-export
    carries the same seq; the chunk size keeps the entry count within it.
    """

    def __init__(self, writer: StoreWriter, header: Header) -> None:
        self.writer, self.header = writer, header
        self.size = max(BATCH_ROWS, math.ceil(_total(header.counts) / max(header.ledger_seq, 1)))
        self.rows: dict[str, list[Line]] = _by_table()
        self.pending: dict[str, list[Line]] | None = None
        self.last_seq = 0

    async def add(self, table: str, line: Line) -> None:
        self.rows[table].append(line)
        if sum(map(len, self.rows.values())) >= self.size:
            await self._rotate()

    async def _rotate(self) -> None:
        if self.pending is not None:
            self.last_seq = await self.writer.log("import", _nonempty(self.pending))
        self.pending = self.rows
        self.rows = _by_table()

    async def finish(self) -> None:
        if any(self.rows.values()):
            await self._rotate()
        if self.pending is None:
            return
        source = {"profile": self.header.profile, "ledger_seq": self.header.ledger_seq}
        payload = msgspec.json.encode({**_nonempty(self.pending), "source": source}).decode()
        seq = max(self.header.ledger_seq, self.last_seq + 1)
        await self.writer.append_ledger(seq, to_db_time(utc_now()), "import", payload)


def _by_table() -> dict[str, list[Line]]:
    return {part.table: [] for part in ARCHIVE_TABLES}


def _nonempty(rows: dict[str, list[Line]]) -> dict[str, list[Line]]:
    """The core tables always (as older versions wrote them), other tables when they hold rows."""
    return {table: lines for table, lines in rows.items() if lines or table in COUNTED_TABLES}


def _kind_of(raw: bytes) -> str:
    """The ``kind`` a broken line claims to be, for the error message."""
    try:
        kind = msgspec.json.decode(raw).get("kind")
    except (msgspec.DecodeError, AttributeError):
        return "unreadable"
    return f"a {kind} line" if isinstance(kind, str) else "no kind"


def _decode_header(line: bytes) -> Header:
    try:
        fields = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        raise ArchiveError(f"Not a raymem archive: the first line is not JSON ({exc})") from exc
    if not isinstance(fields, dict) or fields.get("format") != ARCHIVE_FORMAT:
        raise ArchiveError(f"Not a raymem archive: no {ARCHIVE_FORMAT!r} header line")
    version = fields.get("version")
    if not isinstance(version, int) or version > ARCHIVE_VERSION:
        raise ArchiveError(
            f"Archive version {version!r} is newer than this raymem reads ({ARCHIVE_VERSION})"
        )
    try:
        return _header_decoder.decode(line)
    except msgspec.DecodeError as exc:
        raise ArchiveError(f"Malformed archive header: {exc}") from exc


async def _import_stream(
    store: ProfileStore, stream: BinaryIO, profile: str, progress: Progress | None
) -> Header:
    batches = _batches(stream)
    first = await asyncio.to_thread(next, batches, None)
    if not first:
        raise ArchiveError("The archive is empty")
    header = _decode_header(first[0])
    rows = {part.table: 0 for part in ARCHIVE_TABLES}
    total = _total(header.counts)
    async with store.write() as writer:
        if not await writer.is_empty():
            raise ProfileNotEmpty(profile)
        ledger = _LedgerChunks(writer, header)
        batch: list[bytes] | None = first[1:]
        line_number = 1
        while batch is not None:
            by_table = _by_table()
            for raw in batch:
                line_number += 1
                try:
                    line = _row_decoder.decode(raw)
                except msgspec.DecodeError as exc:
                    raise ArchiveError(
                        f"Line {line_number} of the archive ({_kind_of(raw)}): {exc}"
                    ) from exc
                table = _PART_OF_LINE[type(line)].table
                by_table[table].append(line)
                await ledger.add(table, line)
            for table, lines in by_table.items():
                await restore_rows(writer, table, [msgspec.structs.asdict(x) for x in lines])
                rows[table] += len(lines)
            if progress is not None:
                progress(sum(rows.values()), total)
            batch = await asyncio.to_thread(next, batches, None)
        if _counts(rows) != header.counts:
            raise ArchiveError(
                f"The archive is incomplete: its header announces {header.counts},"
                f" it holds {_counts(rows)}"
            )
        await ledger.finish()
    return header


async def import_archive(
    store: ProfileStore,
    source: Source,
    *,
    profile: str,
    object_store: ObjectStore | None = None,
    progress: Progress | None = None,
) -> Header:
    """Load an archive into a new or empty profile, keeping ids, chains and timestamps.

    Everything is written in one transaction: a failed import leaves the
    profile empty. Memories are left to be vectorised by the profile's owner.

    Args:
        store: the target profile (any name; the archive's name is not used).
        source: a path, an ``s3://bucket/key`` URL, a readable binary stream or
            the archive's bytes; gzipped or not.
        profile: the target's name, for error messages.
        object_store: the service an ``s3://`` URL is reached through (default: AWS).
        progress: called with (rows done, rows total).

    Returns:
        The archive's header.

    Raises:
        ProfileNotEmpty: the target holds data.
        ArchiveError: the input is not a complete archive this version can read.
    """
    if isinstance(source, bytes):
        return await _import_stream(store, io.BytesIO(source), profile, progress)
    if isinstance(source, str) and source.startswith("s3://"):
        bucket, key = parse_s3_url(source)
        origin = object_store.for_bucket(bucket) if object_store else ObjectStore(bucket)
        with tempfile.TemporaryDirectory(prefix="raymem-import-") as tmp:
            local = Path(tmp) / "archive"
            await origin.get_file(key, local)  # not inside the write transaction
            with local.open("rb") as stream:
                return await _import_stream(store, stream, profile, progress)
    if isinstance(source, str | Path):
        with Path(source).open("rb") as stream:
            return await _import_stream(store, stream, profile, progress)
    return await _import_stream(store, source, profile, progress)
