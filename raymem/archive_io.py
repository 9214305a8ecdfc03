"""Where clients write exported archives and read archives to import: files, S3 URLs, streams.

Object storage is reached with boto3 and the usual AWS credential sources; an
S3-compatible endpoint comes from ``RAYMEM_OBJECT_STORE_ENDPOINT_URL`` (or
``AWS_ENDPOINT_URL``).
"""

import asyncio
import concurrent.futures
import contextlib
import gzip
import os
import tempfile
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

T = TypeVar("T")

Destination = str | Path | BinaryIO
Source = str | Path | bytes | BinaryIO
Progress = Callable[[int], None]  # called with the bytes of each chunk


class _Sink:
    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.written = 0

    def write(self, chunk: bytes) -> None:
        self._stream.write(chunk)
        self.written += len(chunk)


def _object_store(bucket: str):  # type: ignore[no-untyped-def]
    from raymem.export import ObjectStore

    endpoint = os.environ.get("RAYMEM_OBJECT_STORE_ENDPOINT_URL") or os.environ.get(
        "AWS_ENDPOINT_URL", ""
    )
    region = os.environ.get("RAYMEM_OBJECT_STORE_REGION", "")
    return ObjectStore(bucket, endpoint_url=endpoint, region=region)


def _run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, whether or not a loop runs here."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@contextlib.contextmanager
def archive_sink(destination: Destination) -> Iterator[_Sink]:
    """A sink for archive bytes; a file appears only once complete (temp file, then rename)."""
    if not isinstance(destination, str | Path):
        yield _Sink(destination)
        return
    url = str(destination)
    is_s3 = url.startswith("s3://")
    target = None if is_s3 else Path(destination)
    folder = None if target is None else target.parent
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".raymem-archive-")
    try:
        with os.fdopen(fd, "wb") as raw:
            compress = url.endswith(".gz")
            stream: BinaryIO = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if compress else raw  # type: ignore[assignment]
            yield _Sink(stream)
            if compress:
                stream.close()
        if is_s3:
            from raymem.export import parse_s3_url

            bucket, key = parse_s3_url(url)
            _run_blocking(_object_store(bucket).put_file(key, tmp))
        else:
            os.replace(tmp, str(target))
    finally:
        Path(tmp).unlink(missing_ok=True)


def read_archive(source: Source) -> bytes:
    """The bytes of an archive to import (the server accepts gzipped archives too)."""
    if isinstance(source, bytes):
        return source
    if isinstance(source, str) and source.startswith("s3://"):
        from raymem.export import parse_s3_url

        bucket, key = parse_s3_url(source)
        return _run_blocking(_object_store(bucket).get(key))
    if isinstance(source, str | Path):
        return Path(source).read_bytes()
    return source.read()
