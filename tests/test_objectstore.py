"""ObjectStore against moto's S3 server, and a proxy that throttles it."""

import logging
import os
import socket
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from raymem.config import ObjectStoreSettings
from raymem.export.objectstore import ObjectNotFound, ObjectStore, parse_s3_url

MIB = 2**20
StoreFactory = Callable[..., ObjectStore]


async def test_put_get_list_delete(object_store: ObjectStore) -> None:
    keys = [object_store.key("alice", "p1", f"k{i}") for i in range(3)]
    for index, key in enumerate(keys):
        await object_store.put(key, f"value {index}".encode())
    await object_store.put(object_store.key("alice", "p2", "other"), b"x")

    assert keys[0] == "raymem/alice/p1/k0"
    assert await object_store.get(keys[1]) == b"value 1"
    listed = await object_store.list(object_store.key("alice", "p1") + "/")
    assert [info.key for info in listed] == keys
    assert [info.size for info in listed] == [7, 7, 7]

    await object_store.delete(keys[0], keys[2], "raymem/never-existed")
    assert [i.key for i in await object_store.list("raymem/alice/p1/")] == [keys[1]]
    with pytest.raises(ObjectNotFound, match="raymem/alice/p1/k0"):
        await object_store.get(keys[0])


async def test_listing_follows_every_page(
    throttling_proxy: Any, store_via_proxy: StoreFactory
) -> None:
    store = store_via_proxy()
    for index in range(5):
        await store.put(f"many/{index}", b"")
    before = len(throttling_proxy.requests)
    listed = await store.list("many/", page_size=2)
    assert [info.key for info in listed] == [f"many/{i}" for i in range(5)]
    assert len(throttling_proxy.requests) - before == 3  # pages of 2, 2 and 1


async def test_throttling_is_retried(
    throttling_proxy: Any, store_via_proxy: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    store = store_via_proxy()
    throttling_proxy.fail_next(2, status=503, code="SlowDown")
    with caplog.at_level(logging.WARNING, logger="raymem.export.objectstore"):
        await store.put("k", b"payload")
    assert throttling_proxy.statuses() == [503, 503, 200]
    assert sum("SlowDown" in r.getMessage() for r in caplog.records) == 2

    throttling_proxy.fail_next(1, status=429, code="TooManyRequests")
    throttling_proxy.fail_next(1, status=500, code="InternalError")
    assert await store.get("k") == b"payload"
    assert throttling_proxy.statuses()[3:] == [429, 500, 200]


async def test_client_errors_are_not_retried(
    throttling_proxy: Any, store_via_proxy: StoreFactory
) -> None:
    store = store_via_proxy()
    with pytest.raises(ObjectNotFound):
        await store.get("missing")
    throttling_proxy.fail_next(1, status=403, code="AccessDenied")
    with pytest.raises(ClientError, match="AccessDenied"):
        await store.put("k", b"x")
    assert throttling_proxy.statuses() == [404, 403]


async def test_gives_up_after_the_configured_attempts(
    throttling_proxy: Any, store_via_proxy: StoreFactory
) -> None:
    store = store_via_proxy(attempts=3)
    throttling_proxy.fail_next(5, status=503)
    with pytest.raises(ClientError, match="SlowDown"):
        await store.get("k")
    assert throttling_proxy.statuses() == [503, 503, 503]


async def test_connection_errors_are_retried(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = ObjectStore(
        "b", endpoint_url=f"http://127.0.0.1:{port}", region="us-east-1", attempts=3, backoff_s=0.01
    )
    with (
        caplog.at_level(logging.WARNING, logger="raymem.export.objectstore"),
        pytest.raises(Exception, match="Could not connect"),
    ):
        await store.put("k", b"x")
    assert [r.getMessage().split(" (")[1][:12] for r in caplog.records] == [
        "attempt 1 of",
        "attempt 2 of",
    ]


async def test_large_objects_go_in_parts_and_survive_throttling(
    throttling_proxy: Any, store_via_proxy: StoreFactory, s3_client: Any, bucket: str, tmp_path
) -> None:
    store = store_via_proxy(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB)
    data = os.urandom(11 * MIB)
    (tmp_path / "big").write_bytes(data)
    throttling_proxy.fail_next(1)  # the first request of the upload is throttled
    await store.put_file("big", tmp_path / "big")
    assert throttling_proxy.statuses()[0] == 503

    head = s3_client.head_object(Bucket=bucket, Key="big")
    assert head["ETag"].strip('"').endswith("-3")  # a multipart upload of three parts
    await store.get_file("big", tmp_path / "back")
    assert (tmp_path / "back").read_bytes() == data


def test_from_settings_and_urls() -> None:
    assert ObjectStore.from_settings(ObjectStoreSettings()) is None
    store = ObjectStore.from_settings(
        ObjectStoreSettings(bucket="b", prefix="/pre/", endpoint_url="http://127.0.0.1:9")
    )
    assert store is not None and store.key("t", "p") == "pre/t/p"
    assert parse_s3_url("s3://bucket/a/b.jsonl") == ("bucket", "a/b.jsonl")
    with pytest.raises(ValueError, match="s3://bucket/key"):
        parse_s3_url("s3://bucket-only")
