"""Finding sequences and skills by text and by vector: full-text and vector rankings, fused."""

import re
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from raymem.store import ProfileStore
from raymem.store.procedural.actions import sequences_by_seq, sequences_text
from raymem.store.procedural.skills import nearest
from raymem.types_procedural import ActionSequence

EmbedFn = Callable[[list[str]], Awaitable[np.ndarray]]

#: Reciprocal rank fusion's k: a small k lets each ranking's first hits count most.
RRF_K = 5.0
CANDIDATES_PER_CHANNEL = 50


def fts_query(text: str) -> str:
    """Any of the words of ``text``, each quoted for FTS5 (empty when it has none)."""
    words = dict.fromkeys(re.findall(r"\w+", text.lower()))
    return " OR ".join(f'"{word}"' for word in words)


def fuse(rankings: Sequence[Sequence[int]]) -> list[tuple[int, float]]:
    """Reciprocal rank fusion of rankings of seqs: (seq, score), best first (ties: lower seq)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, seq in enumerate(ranking):
            scores[seq] = scores.get(seq, 0.0) + 1.0 / (RRF_K + rank + 1)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


async def vector_ranking(
    store: ProfileStore, table: str, query: str, embed: EmbedFn | None
) -> list[int]:
    """Seqs of the rows of a vector table nearest to the query (none without ``embed``)."""
    if embed is None:
        return []
    vector = np.asarray((await embed([query]))[0], dtype=np.float32)
    return [
        seq for seq, _ in await nearest(store.reader, table, vector, limit=CANDIDATES_PER_CHANNEL)
    ]


async def search_sequences(
    store: ProfileStore, query: str, *, limit: int = 10, embed: EmbedFn | None = None
) -> list[ActionSequence]:
    """Sequences whose intent summary matches the query, best first."""
    words = fts_query(query)
    text = await sequences_text(store.reader, words, limit=CANDIDATES_PER_CHANNEL) if words else []
    near = await vector_ranking(store, "action_sequence_vectors", query, embed)
    ranked = fuse([text, near])[:limit]
    found = await sequences_by_seq(store.reader, [seq for seq, _ in ranked])
    return [found[seq] for seq, _ in ranked if seq in found]
