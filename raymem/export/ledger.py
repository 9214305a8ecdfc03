"""Ledger shipping: committed ledger entries go to object storage as ordered segments.

A segment is a gzipped JSON Lines object named after the seq interval it
covers, ``<prefix>/<tenant>/<profile>/ledger/<first_seq>-<last_seq>.jsonl.gz``
(zero-padded so that names sort in order). ``first_seq`` is one past the last
seq already shipped, so the intervals tile the ledger with no gaps even where
the seqs themselves jump (an import keeps its source's ledger seq). Replaying
the segments newer than a snapshot onto it reproduces the newer state.
"""

import asyncio
import contextlib
import gzip
import logging
import re
from collections.abc import Awaitable, Callable

import msgspec

from raymem.export.objectstore import ObjectStore
from raymem.export.snapshot import SEQ_DIGITS
from raymem.store import ProfileStore
from raymem.store.replay import replay

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_ENTRIES = 1000  # entries per segment at most
DEFAULT_SHIP_INTERVAL_S = 1.0  # "shipped" durability: entries leave within about this long
SEGMENT_NAME = re.compile(rf"^(\d{{{SEQ_DIGITS}}})-(\d{{{SEQ_DIGITS}}})\.jsonl\.gz$")


class LedgerEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One ledger row; the payload is the stored JSON text, kept byte for byte."""

    seq: int
    at: str
    op: str
    payload: msgspec.Raw


class Segment(msgspec.Struct, frozen=True, kw_only=True):
    """A shipped segment: the seq interval it covers and its key."""

    first_seq: int
    last_seq: int
    key: str


class LedgerGap(Exception):
    """The shipped segments do not continue the local ledger; a snapshot is needed first."""


_decoder = msgspec.json.Decoder(LedgerEntry)


def ledger_prefix(object_store: ObjectStore, tenant: str, profile: str) -> str:
    """The key prefix under which a profile's ledger segments live (ends with a slash)."""
    return object_store.key(tenant, profile, "ledger") + "/"


def segment_key(
    object_store: ObjectStore, tenant: str, profile: str, first_seq: int, last_seq: int
) -> str:
    """The key of the segment covering seqs ``first_seq`` to ``last_seq``."""
    prefix = ledger_prefix(object_store, tenant, profile)
    return f"{prefix}{first_seq:0{SEQ_DIGITS}d}-{last_seq:0{SEQ_DIGITS}d}.jsonl.gz"


def encode_segment(entries: list[LedgerEntry]) -> bytes:
    """Entries as gzipped JSON Lines."""
    lines = b"".join(msgspec.json.encode(entry) + b"\n" for entry in entries)
    return gzip.compress(lines, compresslevel=6, mtime=0)


def decode_segment(data: bytes) -> list[LedgerEntry]:
    """The entries of a segment, in order."""
    return [_decoder.decode(line) for line in gzip.decompress(data).splitlines() if line]


async def list_segments(object_store: ObjectStore, tenant: str, profile: str) -> list[Segment]:
    """A profile's shipped segments, in seq order."""
    prefix = ledger_prefix(object_store, tenant, profile)
    segments = []
    for info in await object_store.list(prefix):
        match = SEGMENT_NAME.match(info.key[len(prefix) :])
        if match:
            first, last = int(match[1]), int(match[2])
            segments.append(Segment(first_seq=first, last_seq=last, key=info.key))
    return sorted(segments, key=lambda s: (s.first_seq, s.last_seq))


async def shipped_seq(object_store: ObjectStore, tenant: str, profile: str) -> int:
    """The last seq that object storage holds a segment for (0 for none)."""
    return max((s.last_seq for s in await list_segments(object_store, tenant, profile)), default=0)


async def ship_ledger(
    store: ProfileStore,
    object_store: ObjectStore,
    tenant: str,
    profile: str,
    *,
    after_seq: int,
    max_entries: int = DEFAULT_SEGMENT_ENTRIES,
) -> int:
    """Upload the committed entries after ``after_seq`` as segments.

    Args:
        store: the profile; only committed entries are visible to its reader.
        object_store: where segments go.
        tenant: the profile's tenant.
        profile: the profile's name.
        after_seq: the last seq already shipped.
        max_entries: entries per segment at most.

    Returns:
        The last seq now shipped (``after_seq`` when there was nothing new).
    """
    while True:
        rows = await store.reads.ledger_entries(after_seq, limit=max_entries)
        if not rows:
            return after_seq
        entries = [
            LedgerEntry(seq=seq, at=at, op=op, payload=msgspec.Raw(payload.encode()))
            for seq, at, op, payload in rows
        ]
        key = segment_key(object_store, tenant, profile, after_seq + 1, entries[-1].seq)
        await object_store.put(key, encode_segment(entries), content_type="application/gzip")
        after_seq = entries[-1].seq


async def replay_ledger(
    store: ProfileStore, object_store: ObjectStore, tenant: str, profile: str
) -> int:
    """Apply the shipped entries newer than the store's ledger seq, in order.

    Each segment is applied in one transaction, and entries the store already
    holds are skipped, so replay is idempotent and may be repeated after a crash.

    Returns:
        The number of entries applied.

    Raises:
        LedgerGap: the segments start after the store's ledger seq (restore a newer snapshot).
        ValueError: an entry has an op this version cannot replay.
    """
    local = await store.reads.ledger_seq()
    applied = 0
    for segment in await list_segments(object_store, tenant, profile):
        if segment.last_seq <= local:
            continue
        if segment.first_seq > local + 1:
            raise LedgerGap(
                f"Ledger of {tenant}/{profile} holds seqs up to {local}; the next shipped"
                f" segment {segment.key!r} starts at {segment.first_seq}"
            )
        entries = decode_segment(await object_store.get(segment.key))
        async with store.write() as writer:
            for entry in entries:
                applied += await replay(
                    writer, entry.seq, entry.at, entry.op, bytes(entry.payload).decode()
                )
        local = max(local, segment.last_seq)
    return applied


async def prune_segments(
    object_store: ObjectStore, tenant: str, profile: str, *, upto_seq: int
) -> list[str]:
    """Delete the segments wholly covered by a snapshot at ``upto_seq``; returns their keys.

    Call it with the ledger seq of the oldest snapshot kept, so that every kept
    snapshot can still be brought up to date.
    """
    doomed = [
        s.key for s in await list_segments(object_store, tenant, profile) if s.last_seq <= upto_seq
    ]
    if doomed:
        await object_store.delete(*doomed)
    return doomed


class LedgerShipper:
    """Ships one profile's ledger: in the background, and on demand before an acknowledgement.

    ``shipped`` durability: call ``notify()`` after each write; a background task
    ships within ``interval_s``. ``replicated``: ``await flush()`` after each write,
    before answering. Concurrent flushes share one upload (group commit).
    """

    def __init__(
        self,
        store: ProfileStore,
        object_store: ObjectStore,
        tenant: str,
        profile: str,
        *,
        interval_s: float = DEFAULT_SHIP_INTERVAL_S,
        max_entries: int = DEFAULT_SEGMENT_ENTRIES,
    ) -> None:
        self.store, self.object_store = store, object_store
        self.tenant, self.profile = tenant, profile
        self.interval_s, self.max_entries = interval_s, max_entries
        self.shipped_seq = 0
        self._stopped = False
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, *, background: bool = True) -> None:
        """Learn what is already shipped and, with ``background``, start the shipping loop."""
        self.shipped_seq = await shipped_seq(self.object_store, self.tenant, self.profile)
        if background:
            self._task = asyncio.create_task(self._run())
            self._wake.set()  # ship what an earlier life of the profile left behind

    def notify(self) -> None:
        """A write was committed: ship it soon."""
        self._wake.set()

    async def flush(self) -> int:
        """Ship every committed entry now; returns the last seq shipped."""
        async with self._lock:
            if not self._stopped and await self.store.reads.ledger_seq() > self.shipped_seq:
                self.shipped_seq = await ship_ledger(
                    self.store,
                    self.object_store,
                    self.tenant,
                    self.profile,
                    after_seq=self.shipped_seq,
                    max_entries=self.max_entries,
                )
            return self.shipped_seq

    async def restart_from(self, take: Callable[[], Awaitable[int]]) -> int:
        """Hold shipping while ``take`` runs, then ship from the seq it returns on.

        ``take`` replaces what object storage holds (after an erasure: a new snapshot,
        older segments deleted) and returns the ledger seq its snapshot covers. No
        upload of older entries can land meanwhile or after.
        """
        async with self._lock:
            self.shipped_seq = await take()
            return self.shipped_seq

    async def stop(self) -> None:
        """Stop shipping for good, without a last upload (the profile is being deleted).

        An upload in progress is waited for rather than cancelled: its thread would
        carry on and land the segment after the caller deleted everything.
        """
        async with self._lock:
            self._stopped = True
            await self._cancel_loop()

    async def _cancel_loop(self) -> None:
        """Cancel the background loop; called holding the lock, so no upload is under way."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        failures = 0
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.interval_s)
            self._wake.clear()
            try:
                await self.flush()
                failures = 0
            except Exception:  # the entries stay in the local ledger; the next round retries
                failures += 1
                log.exception(
                    "shipping the ledger of %s/%s failed (%d in a row)",
                    self.tenant,
                    self.profile,
                    failures,
                )
                await asyncio.sleep(min(self.interval_s * 2**failures, 60.0))

    async def close(self) -> None:
        """Stop the loop and ship what is left (hibernation); errors propagate.

        An upload in progress is waited for rather than cancelled: its thread would
        carry on, and could land entries an erasure meanwhile removed.
        """
        async with self._lock:
            await self._cancel_loop()
        await self.flush()
