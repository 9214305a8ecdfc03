"""Where clients write exported archives and read archives to import: files, S3 URLs, streams.

``s3://`` URLs are reached with boto3 as the given ``ObjectStoreSettings`` say
(endpoint, region, credentials); their empty fields leave boto3 its usual
sources (``AWS_*`` variables, shared files, instance roles).
"""

import asyncio
import concurrent.futures
import contextlib
import gzip
import os
import tempfile
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from raymem.config import ObjectStoreSettings

if TYPE_CHECKING:
    from raymem.export import ObjectStore

T = TypeVar("T")

Destination = str | Path | BinaryIO
Source = str | Path | bytes | BinaryIO
Progress = Callable[[int], None]  # called with the bytes of each chunk


class _Sink:
    """Counts the bytes written to it; ``written`` becomes the file's size once it is closed."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.written = 0

    def write(self, chunk: bytes) -> None:
        self._stream.write(chunk)
        self.written += len(chunk)


def _object_store(bucket: str, settings: ObjectStoreSettings) -> "ObjectStore":
    """The bucket of an ``s3://`` URL, reached as ``settings`` say (boto3 loaded only now)."""
    from raymem.export import ObjectStore

    return ObjectStore(
        bucket,
        endpoint_url=settings.endpoint_url,
        region=settings.region,
        access_key_id=settings.access_key_id,
        secret_access_key=settings.secret_access_key,
    )


def _run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, whether or not a loop runs here."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@contextlib.contextmanager
def archive_sink(
    destination: Destination, object_store: ObjectStoreSettings | None = None
) -> Iterator[_Sink]:
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
            sink = _Sink(stream)
            yield sink
            if compress:
                stream.close()
        sink.written = os.path.getsize(tmp)  # what the file holds: compressed, for .gz
        if is_s3:
            from raymem.export import parse_s3_url

            bucket, key = parse_s3_url(url)
            store = _object_store(bucket, object_store or ObjectStoreSettings())
            _run_blocking(store.put_file(key, tmp))
        else:
            os.replace(tmp, str(target))
    finally:
        Path(tmp).unlink(missing_ok=True)


def read_archive(source: Source, object_store: ObjectStoreSettings | None = None) -> bytes:
    """The bytes of an archive to import (the server accepts gzipped archives too)."""
    if isinstance(source, bytes):
        return source
    if isinstance(source, str) and source.startswith("s3://"):
        from raymem.export import parse_s3_url

        bucket, key = parse_s3_url(source)
        store = _object_store(bucket, object_store or ObjectStoreSettings())
        return _run_blocking(store.get(key))
    if isinstance(source, str | Path):
        return Path(source).read_bytes()
    return source.read()
