"""An in-memory nearest-neighbour index over one vector table of a profile.

sqlite-vec's ``vec0`` tables stay the durable copy of every embedding; this
index is a cache of them that answers queries in a few milliseconds at 100K
vectors, where a brute-force ``vec0`` scan takes about 50 ms on one core.

Each vector is held twice, compactly:
- a sign code (one bit per dimension, 48 bytes for 384 dimensions) for a coarse
  pass: the Hamming distance between sign codes tracks the angle between vectors;
- an int8 copy with a per-vector scale (about 390 bytes) to rescore the coarse
  pass's best few hundred candidates, and every vector when the index is small.

So a query costs one XOR-and-popcount sweep over the codes plus a few hundred
short dot products, and 100K vectors take about 44 MB of memory.
"""

import asyncio
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from raymem.store.connection import open_sync

#: Up to this many live vectors every vector is rescored: the coarse pass would
#: keep most of them anyway, and exact ranking is cheaper than the sweep.
EXACT_UP_TO = 2048
#: The coarse pass keeps ``max(COARSE_MIN, COARSE_PER_HIT * limit, live / COARSE_SHARE)``
#: candidates for the exact rescoring, which costs about 0.1 ms per thousand.
COARSE_MIN = 512
COARSE_PER_HIT = 10
COARSE_SHARE = 100
_GROWTH = 1.5


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Float32 rows scaled to unit length (a zero row stays zero)."""
    rows = np.asarray(vectors, dtype=np.float32).reshape(-1, vectors.shape[-1])
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1, norms)


def sign_codes(rows: np.ndarray) -> np.ndarray:
    """One bit per dimension (set where the component is positive), packed into uint64 words."""
    bits = np.packbits(rows > 0, axis=1)
    pad = (-bits.shape[1]) % 8
    if pad:
        bits = np.pad(bits, ((0, 0), (0, pad)))
    return bits.view(np.uint64)


class VectorIndex:
    """Cosine nearest neighbours over (seq, vector) pairs, with upserts and removals."""

    def __init__(self, dim: int, capacity: int = 1024, *, exact_up_to: int = EXACT_UP_TO) -> None:
        self.dim = dim
        self.exact_up_to = exact_up_to
        self._words = (dim + 63) // 64
        self._seqs = np.zeros(capacity, dtype=np.int64)
        # Word-major (one row per 64 dimensions): the sweep reads each word of every
        # code as one contiguous array, five times faster than code by code.
        self._codes = np.zeros((self._words, capacity), dtype=np.uint64)
        self._quantised = np.zeros((capacity, dim), dtype=np.int8)
        self._scales = np.zeros(capacity, dtype=np.float32)
        self._alive = np.zeros(capacity, dtype=bool)
        self._slot_of: dict[int, int] = {}  # seq -> row
        self._used = 0  # rows in use, dead ones included

    def __len__(self) -> int:
        return len(self._slot_of)

    def upsert(self, seqs: Sequence[int], vectors: np.ndarray) -> None:
        """Add vectors, replacing the vector of a seq already held."""
        if not len(seqs):
            return
        rows = unit_rows(np.asarray(vectors))
        if rows.shape != (len(seqs), self.dim):
            raise ValueError(f"expected {len(seqs)} vectors of {self.dim} dimensions")
        last = {int(seq): i for i, seq in enumerate(seqs)}  # a seq given twice: the last wins
        if len(last) < len(seqs):
            seqs, rows = list(last), rows[list(last.values())]
        self.remove(seqs)
        self._reserve(self._used + len(seqs))
        span = slice(self._used, self._used + len(seqs))
        scales = np.abs(rows).max(axis=1) / 127
        self._seqs[span] = seqs
        self._codes[:, span] = sign_codes(rows).T
        self._quantised[span] = np.rint(rows / np.where(scales == 0, 1, scales)[:, None])
        self._scales[span] = scales
        self._alive[span] = True
        for offset, seq in enumerate(seqs):
            self._slot_of[int(seq)] = self._used + offset
        self._used += len(seqs)

    def remove(self, seqs: Iterable[int]) -> None:
        """Drop the vectors of these seqs; unknown seqs are ignored."""
        for seq in seqs:
            slot = self._slot_of.pop(int(seq), None)
            if slot is not None:
                self._alive[slot] = False
        if self._used > 4096 and len(self._slot_of) < self._used * 0.75:
            self._compact()

    def search(self, vector: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """The ``limit`` nearest vectors as (seq, cosine distance), nearest first."""
        if not self._slot_of or limit <= 0:
            return []
        query = unit_rows(np.asarray(vector))[0]
        used = self._used
        live = len(self._slot_of)
        if live <= max(self.exact_up_to, limit):
            candidates = np.flatnonzero(self._alive[:used])
        else:
            keep = max(COARSE_MIN, COARSE_PER_HIT * limit, live // COARSE_SHARE)
            candidates = self._coarse(query, keep, used)
        scores = (self._quantised[candidates].astype(np.float32) @ query) * self._scales[candidates]
        best = np.argsort(-scores, kind="stable")[:limit]
        return [(int(self._seqs[candidates[i]]), float(1.0 - scores[i])) for i in best]

    def _coarse(self, query: np.ndarray, keep: int, used: int) -> np.ndarray:
        """Rows of about ``keep`` live codes nearest the query's code in Hamming distance."""
        code = sign_codes(query[None, :])[0]
        distances = np.bitwise_count(self._codes[0, :used] ^ code[0]).astype(np.uint16)
        for word in range(1, self._words):
            distances += np.bitwise_count(self._codes[word, :used] ^ code[word])
        farthest = self._words * 64
        if len(self._slot_of) < used:  # removed rows lie beyond every live one
            distances[~self._alive[:used]] = farthest + 1
        # The smallest distance within which ``keep`` codes lie: a histogram is cheaper
        # than partitioning 100K distances.
        within = np.cumsum(np.bincount(distances, minlength=farthest + 2))
        radius = int(np.searchsorted(within, keep))
        rows = np.flatnonzero(distances <= min(radius, farthest))
        if len(rows) > 2 * keep:  # many ties at the radius
            rows = rows[np.argpartition(distances[rows], keep)[:keep]]
        return rows

    def _reserve(self, size: int) -> None:
        capacity = len(self._seqs)
        if size <= capacity:
            return
        capacity = max(size, int(capacity * _GROWTH))
        self._seqs = _grown(self._seqs, capacity)
        self._codes = _grown(self._codes.T, capacity).T.copy()
        self._quantised = _grown(self._quantised, capacity)
        self._scales = _grown(self._scales, capacity)
        self._alive = _grown(self._alive, capacity)

    def _compact(self) -> None:
        """Rewrite the arrays without their removed rows."""
        live = np.flatnonzero(self._alive[: self._used])
        self._codes[:, : len(live)] = self._codes[:, live]
        self._codes[:, len(live) : self._used] = 0
        for name in ("_seqs", "_quantised", "_scales", "_alive"):
            array = getattr(self, name)
            array[: len(live)] = array[live]
            array[len(live) : self._used] = 0
        self._used = len(live)
        self._slot_of = {int(seq): row for row, seq in enumerate(self._seqs[: self._used])}


def _grown(array: np.ndarray, capacity: int) -> np.ndarray:
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[: len(array)] = array
    return grown


class VectorChange:
    """One committed change to a vector table: vectors upserted, or seqs removed."""

    __slots__ = ("kind", "seqs", "table", "vectors")

    def __init__(
        self,
        kind: Literal["upsert", "remove"],
        table: str,
        seqs: Sequence[int],
        vectors: np.ndarray | None = None,
    ) -> None:
        self.kind, self.table, self.seqs, self.vectors = kind, table, list(seqs), vectors

    def apply(self, index: VectorIndex) -> None:
        if self.kind == "upsert":
            assert self.vectors is not None  # an upsert always carries its vectors
            index.upsert(self.seqs, self.vectors)
        else:
            index.remove(self.seqs)


class CachedIndex:
    """The VectorIndex of one ``vec0`` table: read on first use, then kept in step with commits.

    Changes committed while the table is being read are buffered and replayed on
    the fresh index; upserts and removals are idempotent, so a change the read
    already saw does no harm when replayed.
    """

    def __init__(self, path: Path, table: str, dim: int) -> None:
        self.path, self.table, self.dim = path, table, dim
        self._index: VectorIndex | None = None
        self._buffer: list[VectorChange] | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> VectorIndex:
        """The index, reading the table first if this is the first use."""
        if self._index is not None:
            return self._index
        async with self._lock:
            if self._index is None:
                self._buffer = []
                try:
                    index = await asyncio.to_thread(read_index, self.path, self.table, self.dim)
                    for change in self._buffer:
                        change.apply(index)
                    self._index = index
                finally:
                    self._buffer = None
        return self._index

    def apply(self, change: VectorChange) -> None:
        """Follow a committed change (called right after the commit, before any other await)."""
        if self._index is not None:
            change.apply(self._index)
        elif self._buffer is not None:
            self._buffer.append(change)


def read_index(path: Path, table: str, dim: int, batch: int = 8192) -> VectorIndex:
    """Build the index of a ``vec0`` table from its SQLite file, on a connection of its own.

    Runs in a worker thread; reading in batches keeps at most ``batch`` float
    vectors in memory besides the index itself.
    """
    conn = open_sync(path, read_only=True)
    try:
        count = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        index = VectorIndex(dim, capacity=max(1024, count))
        cursor = conn.execute(f"SELECT rowid, embedding FROM {table}")
        while rows := cursor.fetchmany(batch):
            vectors = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float32)
            index.upsert([row[0] for row in rows], vectors.reshape(len(rows), dim))
        return index
    finally:
        conn.close()
