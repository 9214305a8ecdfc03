"""The Python clients: one surface, sync and async, over real HTTP; s3:// archives as settings say."""

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from s3_fixtures import REGION

from raymem.client import (
    AsyncClient,
    AsyncProfile,
    AsyncSessionClient,
    Client,
    Profile,
    RaymemHTTPError,
    SessionClient,
)
from raymem.config import ObjectStoreSettings
from raymem.errors import InvalidRequest

PAIRS = [(Client, AsyncClient), (Profile, AsyncProfile), (SessionClient, AsyncSessionClient)]
RETURN_OBJECTS = {"get_profile", "session"}  # hand out an object at once, in both forms


def public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    return {
        name: member
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


@pytest.mark.parametrize(("sync", "aio"), PAIRS, ids=lambda cls: cls.__name__)
def test_the_async_surface_is_exactly_the_sync_one(sync: type, aio: type) -> None:
    sync_methods, async_methods = public_methods(sync), public_methods(aio)
    assert sync_methods.keys() == async_methods.keys()
    assert inspect.signature(sync.__init__).parameters.keys() == (
        inspect.signature(aio.__init__).parameters.keys()
    )
    for name, method in sync_methods.items():
        twin = async_methods[name]
        expected, actual = inspect.signature(method), inspect.signature(twin)
        assert list(actual.parameters.values()) == list(expected.parameters.values()), name
        returns = str(actual.return_annotation).replace("Async", "")
        assert returns == str(expected.return_annotation), name
        assert not inspect.iscoroutinefunction(method), name
        assert inspect.iscoroutinefunction(twin) == (name not in RETURN_OBJECTS), name


def test_every_option_is_a_typed_keyword() -> None:
    for sync, aio in PAIRS:
        for cls in (sync, aio):
            for name, method in public_methods(cls).items():
                for parameter in inspect.signature(method).parameters.values():
                    assert parameter.kind is not inspect.Parameter.VAR_KEYWORD, (cls, name)
                    if parameter.name != "self":
                        assert parameter.annotation is not inspect.Parameter.empty, (cls, name)


def test_sync_and_async_clients_answer_alike(serve_app: str, profile_name: str) -> None:
    with Client(serve_app) as client:
        assert client.health()["status"] == "ok"
        profile = client.get_profile(profile_name)
        memory = profile.remember("The boiler is serviced every March.", type="fact")
        profile.session("s1").append("user", "Remind me about the boiler.")
        hits = profile.recall("When is the boiler serviced?", limit=3, synthesize=False)
        page = profile.list(type="fact", limit=5)

    async def the_same_asynchronously() -> tuple[Any, ...]:
        async with AsyncClient(serve_app) as client:
            health = await client.health()
            profile = client.get_profile(profile_name)
            recalled = await profile.recall(
                "When is the boiler serviced?", limit=3, synthesize=False
            )
            listed = await profile.list(type="fact", limit=5)
            turns = await profile.session("s1").last(1)
            with pytest.raises(RaymemHTTPError) as missing:
                await profile.get("no-such-memory")
            return health, recalled, listed, turns, missing.value

    health, recalled, listed, turns, missing = asyncio.run(the_same_asynchronously())
    assert health["status"] == "ok"
    assert memory.id in [m.id for m in hits.memories]
    assert memory.id in [m.id for m in recalled.memories]
    assert listed.memories == page.memories and [m.id for m in page.memories] == [memory.id]
    assert turns.messages[0].content == "Remind me about the boiler."
    assert (missing.status, missing.code) == (404, "memory_not_found")


def test_s3_archives_are_reached_as_the_object_store_settings_say(
    serve_app: str, profile_name: str, s3_endpoint: str, bucket: str
) -> None:
    settings = ObjectStoreSettings(endpoint_url=s3_endpoint, region=REGION)
    url = f"s3://{bucket}/exports/{profile_name}.jsonl.gz"
    with Client(serve_app, object_store=settings) as client:
        client.get_profile(profile_name).remember("The fuse box is behind the coats.")
        written = client.get_profile(profile_name).export(url)
        stored = boto3.client("s3", endpoint_url=s3_endpoint, region_name=REGION).get_object(
            Bucket=bucket, Key=f"exports/{profile_name}.jsonl.gz"
        )
        assert written == stored["ContentLength"] > 0  # the compressed size, as stored
        imported = client.get_profile(f"{profile_name}-copy").import_archive(url)
    assert imported.counts.memories == 1


def test_path_segments_cannot_reach_another_route(serve_app: str, profile_name: str) -> None:
    with Client(serve_app) as client:
        profile = client.get_profile(profile_name)
        kept = profile.remember("The spare key is under the blue pot.")
        for escape in ("../..", "..", ".", "x/../.."):
            with pytest.raises(RaymemHTTPError) as refused:
                profile.forget(escape)
            assert refused.value.status == 404, escape
            with pytest.raises(RaymemHTTPError):
                profile.get(escape)
        assert [m.id for m in profile.list().memories] == [kept.id]
        for bad_name in ("../other", "a/b", ".hidden", ""):
            with pytest.raises(InvalidRequest, match="profile name"):
                client.get_profile(bad_name)
            with pytest.raises(InvalidRequest, match="session name"):
                profile.session(bad_name)
    with pytest.raises(InvalidRequest):
        AsyncClient(serve_app).get_profile("../other")
