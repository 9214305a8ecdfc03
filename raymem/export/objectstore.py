"""Object storage access: one bucket of any S3-compatible service through boto3.

boto3 blocks, so every call runs in a worker thread (``asyncio.to_thread``).
Retries live in one place, here: botocore's own retries are switched off and
tenacity retries throttling (503 SlowDown, 429), other 5xx answers and
connection errors with jittered exponential backoff. A 4xx is the caller's
mistake (missing key, no permission) and is raised at once.
"""

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import boto3
import msgspec
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from raymem import metrics
from raymem.config import ObjectStoreSettings

log = logging.getLogger(__name__)

T = TypeVar("T")

# Error codes S3-compatible services use for "slow down" besides a 503 or 429 status.
THROTTLING_CODES = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests"}
)
MIB = 2**20
DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys
# Answers of a service that does not offer object versions to these credentials.
VERSIONS_UNAVAILABLE = frozenset({"AccessDenied", "NotImplemented", "MethodNotAllowed"})


class ObjectInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One listed object."""

    key: str
    size: int


class ObjectNotFound(KeyError):
    """The key does not exist in the bucket."""

    def __init__(self, bucket: str, key: str) -> None:
        super().__init__(bucket, key)
        self.bucket, self.key = bucket, key

    def __str__(self) -> str:
        return f"Object 's3://{self.bucket}/{self.key}' does not exist"


def is_retryable(exc: BaseException) -> bool:
    """True for throttling, 5xx and connection errors, also when wrapped by s3transfer.

    ``upload_file`` re-raises a ``ClientError`` as ``S3UploadFailedError`` without
    keeping its status, so the chain of causes is searched too.
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, BotoConnectionError | HTTPClientError):
            return True
        if isinstance(seen, ClientError):
            status = seen.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            code = seen.response.get("Error", {}).get("Code", "")
            return status >= 500 or status == 429 or code in THROTTLING_CODES
        seen = seen.__cause__ or seen.__context__
    return False


def _is_not_found(exc: ClientError) -> bool:
    code = exc.response.get("Error", {}).get("Code", "")
    return code in ("404", "NoSuchKey", "NotFound")


def parse_s3_url(url: str) -> tuple[str, str]:
    """Split ``s3://bucket/key`` into bucket and key.

    Raises:
        ValueError: the URL is not of that form.
    """
    parts = urlsplit(url)
    key = parts.path.lstrip("/")
    if parts.scheme != "s3" or not parts.netloc or not key:
        raise ValueError(f"Expected an s3://bucket/key URL, got {url!r}")
    return parts.netloc, key


class ObjectStore:
    """One bucket (and key prefix) of an S3-compatible object store."""

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        endpoint_url: str = "",
        region: str = "",
        attempts: int = 6,
        backoff_s: float = 0.2,
        max_backoff_s: float = 10.0,
        multipart_threshold: int = 16 * MIB,
        multipart_chunksize: int = 16 * MIB,
        access_key_id: str = "",
        secret_access_key: str = "",
        client: Any = None,
    ) -> None:
        """Connect to ``bucket``; credentials come from the usual AWS sources.

        Args:
            bucket: the bucket name.
            prefix: prepended to the keys that ``key()`` builds.
            endpoint_url: an S3-compatible service (MinIO, Ceph, R2, moto); empty for AWS.
                With an endpoint, path-style addressing is used, which they all accept.
            region: the signing region; empty for the default of the environment.
            attempts: tries per operation, the first included.
            backoff_s: the scale of the jittered exponential backoff between tries.
            max_backoff_s: the longest wait between two tries.
            multipart_threshold: objects at least this large are uploaded in parts.
            multipart_chunksize: the size of each part (S3 requires at least 5 MiB).
            access_key_id: explicit credentials; empty for the usual AWS sources.
            secret_access_key: the secret of ``access_key_id``.
            client: a ready boto3 S3 client, instead of building one.
        """
        self._credentials = {
            "aws_access_key_id": access_key_id or None,
            "aws_secret_access_key": secret_access_key or None,
        }
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url
        self.region = region
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._transfer = TransferConfig(
            multipart_threshold=multipart_threshold,
            multipart_chunksize=multipart_chunksize,
            max_concurrency=4,
        )
        self._client = client if client is not None else self._make_client()

    @classmethod
    def from_settings(cls, settings: ObjectStoreSettings, **options: Any) -> "ObjectStore | None":
        """The configured object store, or None when no bucket is configured."""
        if not settings.bucket:
            return None
        return cls(
            settings.bucket,
            prefix=settings.prefix,
            endpoint_url=settings.endpoint_url,
            region=settings.region,
            access_key_id=settings.access_key_id,
            secret_access_key=settings.secret_access_key,
            **options,
        )

    def for_bucket(self, bucket: str) -> "ObjectStore":
        """The same service and options, another bucket and no prefix (for ``s3://`` URLs)."""
        return ObjectStore(
            bucket,
            endpoint_url=self.endpoint_url,
            region=self.region,
            attempts=self._attempts,
            backoff_s=self._backoff_s,
            max_backoff_s=self._max_backoff_s,
            multipart_threshold=self._transfer.multipart_threshold,
            multipart_chunksize=self._transfer.multipart_chunksize,
            access_key_id=self._credentials["aws_access_key_id"] or "",
            secret_access_key=self._credentials["aws_secret_access_key"] or "",
        )

    def _make_client(self) -> Any:
        config = Config(
            # tenacity owns retries: one policy, and attempts that tests can count.
            retries={"total_max_attempts": 1, "mode": "standard"},
            s3={"addressing_style": "path"} if self.endpoint_url else None,
            connect_timeout=10,
            read_timeout=60,
        )
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint_url or None,
            region_name=self.region or None,
            config=config,
            **self._credentials,
        )

    def key(self, *parts: str) -> str:
        """A key under this store's prefix: ``key("alice", "p1", "snapshots")``."""
        return "/".join(part.strip("/") for part in (self.prefix, *parts) if part)

    def _before_retry(self, what: str, state: RetryCallState) -> None:
        metrics.OBJECT_STORE_RETRIES.inc()  # a no-op outside Ray
        log.warning(
            "object store %s failed (attempt %d of %d), retrying in %.2f s: %s",
            what,
            state.attempt_number,
            self._attempts,
            state.upcoming_sleep,
            state.outcome.exception() if state.outcome else None,
        )

    async def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run a blocking boto3 call in a thread, retrying transient failures."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._attempts),
            wait=wait_random_exponential(multiplier=self._backoff_s, max=self._max_backoff_s),
            retry=retry_if_exception(is_retryable),
            before_sleep=lambda state: self._before_retry(what, state),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await asyncio.to_thread(fn)
        raise AssertionError(f"unreachable: tenacity re-raises the last error of {what}")

    async def put(self, key: str, data: bytes, *, content_type: str = "") -> None:
        """Store ``data`` under ``key``, replacing any object there."""
        extra = {"ContentType": content_type} if content_type else {}
        await self._call(
            f"put {key}",
            lambda: self._client.put_object(Bucket=self.bucket, Key=key, Body=data, **extra),
        )

    async def put_file(self, key: str, path: str | Path) -> None:
        """Upload a local file, in parts when it is large."""
        await self._call(
            f"upload {key}",
            lambda: self._client.upload_file(str(path), self.bucket, key, Config=self._transfer),
        )

    async def get(self, key: str) -> bytes:
        """The bytes stored under ``key``.

        Raises:
            ObjectNotFound: there is no such key.
        """

        def read() -> bytes:
            try:
                response = self._client.get_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if _is_not_found(exc):
                    raise ObjectNotFound(self.bucket, key) from exc
                raise
            return bytes(response["Body"].read())

        return await self._call(f"get {key}", read)

    async def get_file(self, key: str, path: str | Path) -> None:
        """Download ``key`` to a local file, in parallel ranges when it is large.

        Raises:
            ObjectNotFound: there is no such key.
        """

        def download() -> None:
            try:
                self._client.download_file(self.bucket, key, str(path), Config=self._transfer)
            except ClientError as exc:
                if _is_not_found(exc):
                    raise ObjectNotFound(self.bucket, key) from exc
                raise

        await self._call(f"download {key}", download)

    async def list(self, prefix: str, *, page_size: int = 1000) -> list[ObjectInfo]:
        """Every object whose key starts with ``prefix``, in key order (all pages)."""

        def list_all() -> list[ObjectInfo]:
            paginator = self._client.get_paginator("list_objects_v2")
            pages = paginator.paginate(
                Bucket=self.bucket, Prefix=prefix, PaginationConfig={"PageSize": page_size}
            )
            found = []
            for page in pages:
                for item in page.get("Contents", []):
                    found.append(ObjectInfo(key=item["Key"], size=int(item["Size"])))
            return found

        return await self._call(f"list {prefix}", list_all)

    async def delete(self, *keys: str) -> None:
        """Delete objects; keys that do not exist are not an error."""
        for start in range(0, len(keys), DELETE_BATCH):
            batch = [{"Key": key} for key in keys[start : start + DELETE_BATCH]]

            def delete_batch(batch: list[dict[str, str]] = batch) -> Any:
                return self._client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
                )

            response = await self._call(f"delete {len(batch)} objects", delete_batch)
            self._check_deleted(response)

    def _check_deleted(self, response: Any) -> None:
        """DeleteObjects answers 200 and lists the keys it could not delete."""
        errors = response.get("Errors", [])
        if errors:
            first = errors[0]
            raise OSError(
                f"Could not delete {len(errors)} objects from bucket {self.bucket!r},"
                f" e.g. {first.get('Key')!r}: {first.get('Code')} {first.get('Message')}"
            )

    async def abort_uploads(self, prefix: str) -> int:
        """Abort unfinished multipart uploads under ``prefix``; returns how many.

        The parts of an upload cut short (a crash in the middle of a large snapshot)
        are stored, unlisted, until the upload is aborted.
        """

        def abort_all() -> int:
            paginator = self._client.get_paginator("list_multipart_uploads")
            uploads = [
                (upload["Key"], upload["UploadId"])
                for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix)
                for upload in page.get("Uploads", [])
            ]
            for key, upload_id in uploads:
                self._client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            return len(uploads)

        return await self._call(f"abort uploads under {prefix}", abort_all)

    async def delete_old_versions(self, prefix: str) -> int:
        """In a versioned bucket, delete the noncurrent versions and delete markers under
        ``prefix`` (what deleting or replacing an object leaves there); returns how many.

        Nothing is listed as such in a bucket without versioning. A service that does
        not let these credentials list versions is logged and left as it is.
        """

        def delete_all() -> int:
            paginator = self._client.get_paginator("list_object_versions")
            old = []
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for version in page.get("Versions", []):
                    if not version["IsLatest"]:
                        old.append({"Key": version["Key"], "VersionId": version["VersionId"]})
                for marker in page.get("DeleteMarkers", []):
                    old.append({"Key": marker["Key"], "VersionId": marker["VersionId"]})
            for start in range(0, len(old), DELETE_BATCH):
                batch = old[start : start + DELETE_BATCH]
                self._check_deleted(
                    self._client.delete_objects(
                        Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
                    )
                )
            return len(old)

        try:
            return await self._call(f"delete old versions under {prefix}", delete_all)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code not in VERSIONS_UNAVAILABLE:
                raise
            log.warning(
                "bucket %r: cannot list object versions (%s); if it is versioned, older"
                " versions under %r remain",
                self.bucket,
                code,
                prefix,
            )
            return 0
