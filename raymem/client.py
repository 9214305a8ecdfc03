"""HTTP clients: ``Client`` (blocking) and ``AsyncClient``, both over httpx.

Each operation is described once, as a ``_Call`` (method, path, body, result
type); the sync and async classes only differ in how they send it.

    client = raymem.Client("http://127.0.0.1:8000")
    profile = client.get_profile("my-project")
    profile.ingest([{"role": "user", "content": "Use pnpm, not npm."}], session_id="s1")
    print(profile.recall("Which package manager?").answer)
"""

from collections.abc import Iterable, Mapping
from typing import Any

import httpx
import msgspec

from raymem.archive_io import Destination, Progress, Source, archive_sink, read_archive
from raymem.types import (
    ImportResult,
    IngestResult,
    MemoryPage,
    MemoryWithHistory,
    MessageList,
    ProfileList,
    RecallResult,
    SessionDeleted,
    SessionEnded,
    SessionList,
    SnapshotResult,
    StoredMessage,
)

DEFAULT_URL = "http://127.0.0.1:8000"
MessageLike = Mapping[str, Any] | msgspec.Struct


class RaymemHTTPError(Exception):
    """An error response from the server: its status, machine code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(status, code, message)
        self.status, self.code, self.message = status, code, message

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


class RawBody(msgspec.Struct):
    """A request body sent as it is (an archive), not encoded as JSON."""

    data: bytes


class _Call(msgspec.Struct):
    method: str
    path: str
    body: Any = None
    params: dict[str, Any] | None = None
    result: type | None = None


def _as_dict(message: MessageLike) -> dict[str, Any]:
    return msgspec.to_builtins(message) if isinstance(message, msgspec.Struct) else dict(message)


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _result(call: _Call, response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            error = response.json()["error"]
            raise RaymemHTTPError(response.status_code, error["code"], error["message"])
        except (ValueError, KeyError, TypeError):
            raise RaymemHTTPError(response.status_code, "http_error", response.text[:500]) from None
    if call.result is None or response.status_code == 204:
        return None
    return msgspec.json.decode(response.content, type=call.result)


class _Profile:
    """The calls of one profile; subclasses send them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._base = f"/v1/profiles/{name}"

    def _ingest(self, messages: Iterable[MessageLike], session_id: str) -> _Call:
        body = {"session_id": session_id, "messages": [_as_dict(m) for m in messages]}
        return _Call("POST", f"{self._base}/ingest", body, result=IngestResult)

    def _remember(self, content: str, **options: Any) -> _Call:
        body = _drop_none({"content": content, **options})
        return _Call("POST", f"{self._base}/memories", body, result=MemoryWithHistory)

    def _recall(self, query: str, **options: Any) -> _Call:
        body = _drop_none({"query": query, **options})
        return _Call("POST", f"{self._base}/recall", body, result=RecallResult)

    def _list(self, **params: Any) -> _Call:
        return _Call("GET", f"{self._base}/memories", params=_drop_none(params), result=MemoryPage)

    def _get(self, memory_id: str) -> _Call:
        return _Call("GET", f"{self._base}/memories/{memory_id}", result=MemoryWithHistory)

    def _forget(self, memory_id: str) -> _Call:
        return _Call("DELETE", f"{self._base}/memories/{memory_id}")

    def _sessions(self) -> _Call:
        return _Call("GET", f"{self._base}/sessions", result=SessionList)

    def _delete(self) -> _Call:
        return _Call("DELETE", self._base)

    def _snapshot(self) -> _Call:
        return _Call("POST", f"{self._base}/snapshot", result=SnapshotResult)

    def _import(self, archive: bytes) -> _Call:
        return _Call("POST", f"{self._base}/import", RawBody(archive), result=ImportResult)


class _Session:
    def __init__(self, profile: str, session_id: str) -> None:
        self._base = f"/v1/profiles/{profile}/sessions/{session_id}"

    def _append(self, role: str, content: str) -> _Call:
        body = {"role": role, "content": content}
        return _Call("POST", f"{self._base}/messages", body, result=StoredMessage)

    def _last(self, n: int | None) -> _Call:
        params = None if n is None else {"last": n}
        return _Call("GET", f"{self._base}/messages", params=params, result=MessageList)

    def _end(self) -> _Call:
        return _Call("POST", f"{self._base}/end", result=SessionEnded)

    def _delete(self) -> _Call:
        return _Call("DELETE", self._base, result=SessionDeleted)


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _request_kwargs(call: _Call) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"params": call.params}
    if isinstance(call.body, RawBody):
        kwargs["content"] = call.body.data
        kwargs["headers"] = {"Content-Type": "application/x-ndjson"}
    elif call.body is not None:
        kwargs["content"] = msgspec.json.encode(call.body)
        kwargs["headers"] = {"Content-Type": "application/json"}
    return kwargs


# ------------------------------------------------------------------ blocking


class Client:
    """A blocking client for a raymem server."""

    def __init__(
        self, url: str = DEFAULT_URL, token: str | None = None, *, timeout: float = 60.0
    ) -> None:
        self._http = httpx.Client(base_url=url, headers=_headers(token), timeout=timeout)

    def _send(self, call: _Call) -> Any:
        return _result(call, self._http.request(call.method, call.path, **_request_kwargs(call)))

    def get_profile(self, name: str) -> "Profile":
        return Profile(self, name)

    def profiles(self) -> ProfileList:
        return self._send(_Call("GET", "/v1/profiles", result=ProfileList))

    def health(self) -> dict[str, Any]:
        return self._send(_Call("GET", "/healthz", result=dict))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Profile(_Profile):
    def __init__(self, client: Client, name: str) -> None:
        super().__init__(name)
        self._client = client

    def ingest(self, messages: Iterable[MessageLike], *, session_id: str) -> IngestResult:
        return self._client._send(self._ingest(messages, session_id))

    def remember(self, content: str, **options: Any) -> MemoryWithHistory:
        return self._client._send(self._remember(content, **options))

    def recall(self, query: str, **options: Any) -> RecallResult:
        return self._client._send(self._recall(query, **options))

    def list(self, **params: Any) -> MemoryPage:
        return self._client._send(self._list(**params))

    def get(self, memory_id: str) -> MemoryWithHistory:
        return self._client._send(self._get(memory_id))

    def forget(self, memory_id: str) -> None:
        self._client._send(self._forget(memory_id))

    def sessions(self) -> SessionList:
        return self._client._send(self._sessions())

    def session(self, session_id: str) -> "SessionClient":
        return SessionClient(self._client, self.name, session_id)

    def delete(self) -> None:
        self._client._send(self._delete())

    def snapshot(self) -> SnapshotResult:
        """Write a snapshot of the profile to the server's object storage."""
        return self._client._send(self._snapshot())

    def export(self, destination: Destination, progress: Progress | None = None) -> int:
        """Save the whole profile as JSON Lines to a path (gzipped if it ends in .gz),
        an ``s3://bucket/key`` URL, or a binary stream. Returns the bytes written."""
        with (
            archive_sink(destination) as sink,
            self._client._http.stream("GET", f"{self._base}/export") as response,
        ):
            if response.status_code >= 400:
                response.read()
                _result(_Call("GET", ""), response)
            for chunk in response.iter_bytes():
                sink.write(chunk)
                if progress is not None:
                    progress(len(chunk))
            return sink.written

    def import_archive(self, source: Source) -> ImportResult:
        """Load an archive (a path, an ``s3://`` URL, bytes or a stream) into this new or empty profile."""
        return self._client._send(self._import(read_archive(source)))


class SessionClient(_Session):
    def __init__(self, client: Client, profile: str, session_id: str) -> None:
        super().__init__(profile, session_id)
        self._client = client

    def append(self, role: str, content: str) -> StoredMessage:
        return self._client._send(self._append(role, content))

    def last(self, n: int | None = None) -> MessageList:
        return self._client._send(self._last(n))

    def end(self) -> SessionEnded:
        return self._client._send(self._end())

    def delete(self) -> SessionDeleted:
        """Delete the session's turns and forget the memories derived from it."""
        return self._client._send(self._delete())


# --------------------------------------------------------------------- async


class AsyncClient:
    """The same surface as ``Client``, awaited."""

    def __init__(
        self, url: str = DEFAULT_URL, token: str | None = None, *, timeout: float = 60.0
    ) -> None:
        self._http = httpx.AsyncClient(base_url=url, headers=_headers(token), timeout=timeout)

    async def _send(self, call: _Call) -> Any:
        response = await self._http.request(call.method, call.path, **_request_kwargs(call))
        return _result(call, response)

    def get_profile(self, name: str) -> "AsyncProfile":
        return AsyncProfile(self, name)

    async def profiles(self) -> ProfileList:
        return await self._send(_Call("GET", "/v1/profiles", result=ProfileList))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncProfile(_Profile):
    def __init__(self, client: AsyncClient, name: str) -> None:
        super().__init__(name)
        self._client = client

    async def ingest(self, messages: Iterable[MessageLike], *, session_id: str) -> IngestResult:
        return await self._client._send(self._ingest(messages, session_id))

    async def remember(self, content: str, **options: Any) -> MemoryWithHistory:
        return await self._client._send(self._remember(content, **options))

    async def recall(self, query: str, **options: Any) -> RecallResult:
        return await self._client._send(self._recall(query, **options))

    async def list(self, **params: Any) -> MemoryPage:
        return await self._client._send(self._list(**params))

    async def get(self, memory_id: str) -> MemoryWithHistory:
        return await self._client._send(self._get(memory_id))

    async def forget(self, memory_id: str) -> None:
        await self._client._send(self._forget(memory_id))

    async def sessions(self) -> SessionList:
        return await self._client._send(self._sessions())

    def session(self, session_id: str) -> "AsyncSessionClient":
        return AsyncSessionClient(self._client, self.name, session_id)

    async def delete(self) -> None:
        await self._client._send(self._delete())

    async def snapshot(self) -> SnapshotResult:
        return await self._client._send(self._snapshot())

    async def export(self, destination: Destination, progress: Progress | None = None) -> int:
        """As ``Profile.export``."""
        with archive_sink(destination) as sink:
            async with self._client._http.stream("GET", f"{self._base}/export") as response:
                if response.status_code >= 400:
                    await response.aread()
                    _result(_Call("GET", ""), response)
                async for chunk in response.aiter_bytes():
                    sink.write(chunk)
                    if progress is not None:
                        progress(len(chunk))
            return sink.written

    async def import_archive(self, source: Source) -> ImportResult:
        return await self._client._send(self._import(read_archive(source)))


class AsyncSessionClient(_Session):
    def __init__(self, client: AsyncClient, profile: str, session_id: str) -> None:
        super().__init__(profile, session_id)
        self._client = client

    async def append(self, role: str, content: str) -> StoredMessage:
        return await self._client._send(self._append(role, content))

    async def last(self, n: int | None = None) -> MessageList:
        return await self._client._send(self._last(n))

    async def end(self) -> SessionEnded:
        return await self._client._send(self._end())

    async def delete(self) -> SessionDeleted:
        return await self._client._send(self._delete())
