"""Recall: query analysis, retrieval channels in parallel, weighted reciprocal rank fusion.

Pure async code over a ``ProfileStore``; the query embedding comes from an
``embed`` coroutine that the caller provides (a model pool, or a local model).
"""

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import numpy as np

from raymem.config import RecallSettings
from raymem.models import rules
from raymem.store import ProfileStore
from raymem.types import Memory, RecallHit, RecallRequest, RecallResult, StoredMessage

log = logging.getLogger(__name__)

EmbedFn = Callable[[list[str]], Awaitable[np.ndarray]]

STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "user",
        "users",
        "tell",
        "know",
        "remember",
        "ever",
    ]
)
TERM = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 32


class Analysis(msgspec.Struct):
    fts_query: str | None
    topic_keys: list[str]


def fts_query(text: str) -> str | None:
    """An FTS5 query that ORs the content words of ``text``, each quoted.

    Quoting makes every FTS5 operator, column filter and quote in user text a
    plain term, so no query can be a syntax error.
    """
    terms: list[str] = []
    for term in TERM.findall(text.lower()):
        if term not in STOPWORDS and term not in terms and (len(term) > 1 or term.isdigit()):
            terms.append(term)
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms[:MAX_TERMS])


def query_topic_keys(query: str) -> list[str]:
    """Topic keys a question is probably about, best first."""
    keys = []
    lowered = query.lower()
    for category, names in rules.CATEGORY_LEXICON.items():
        spelled = category.replace("_", " ")
        if spelled in lowered or any(re.search(rf"\b{re.escape(n)}\b", lowered) for n in names):
            keys.append(f"user.{category}")
    direct = rules.topic_key_for(query, "fact")
    if direct and direct not in keys:
        keys.insert(0, direct)
    return keys


def analyse(query: str) -> Analysis:
    return Analysis(fts_query=fts_query(query), topic_keys=query_topic_keys(query))


class Candidate(msgspec.Struct):
    kind: str  # "memory" or "message"
    seq: int
    score: float = 0.0
    channels: list[str] = []


def fuse(
    rankings: dict[str, list[tuple[str, int]]], weights: dict[str, float], k: float
) -> list[Candidate]:
    """Weighted reciprocal rank fusion of ranked lists of (kind, seq)."""
    fused: dict[tuple[str, int], Candidate] = {}
    for channel, ranked in rankings.items():
        weight = weights.get(channel, 1.0)
        for rank, (kind, seq) in enumerate(ranked):
            candidate = fused.setdefault((kind, seq), Candidate(kind=kind, seq=seq, channels=[]))
            candidate.score += weight / (k + rank + 1)
            candidate.channels.append(channel)
    return list(fused.values())


class Recaller:
    """Runs recall over one store; the profile actor keeps one."""

    def __init__(
        self, store: ProfileStore, settings: RecallSettings, embed: EmbedFn | None
    ) -> None:
        self.store = store
        self.settings = settings
        self.embed = embed

    def weights(self) -> dict[str, float]:
        s = self.settings
        return {
            "topic_key": s.topic_key_weight,
            "memory_fts": s.memory_fts_weight,
            "memory_vector": s.memory_vector_weight,
            "message_fts": s.message_fts_weight,
            "message_vector": s.message_vector_weight,
        }

    async def recall(
        self, request: RecallRequest, *, query_vector: np.ndarray | None = None
    ) -> RecallResult:
        """Answer ``request``: channels in parallel, fused, loaded and synthesised."""
        timings: dict[str, float] = {}
        started = time.perf_counter()
        analysis = analyse(request.query)
        timings["analyse"] = _ms(started)

        vector_task = None
        if query_vector is None and self.embed is not None:
            vector_task = asyncio.ensure_future(self._embed_query(request.query, timings))
        text_rankings = await self._text_channels(request, analysis, timings)
        if vector_task is not None:
            query_vector = await vector_task
        vector_rankings = await self._vector_channels(request, query_vector, timings)

        fuse_started = time.perf_counter()
        fused = fuse({**text_rankings, **vector_rankings}, self.weights(), self.settings.rrf_k)
        hits = await self._load(fused, request)
        timings["fuse"] = _ms(fuse_started)

        synth_started = time.perf_counter()
        answer = rules.synthesize(request.query, [(hit.content, hit.score) for hit in hits])
        timings["synthesize"] = _ms(synth_started)
        timings["total"] = _ms(started)
        channels = sorted({c for hit in hits for c in hit.channels})
        return RecallResult(
            answer=answer if request.synthesize else "",
            memories=hits,
            method="hybrid:" + "+".join(channels) if channels else "hybrid",
            latency_ms=timings,
        )

    async def _embed_query(self, query: str, timings: dict[str, float]) -> np.ndarray | None:
        started = time.perf_counter()
        try:
            assert self.embed is not None
            vectors = await self.embed([query])
            return vectors[0]
        except Exception:  # a failed model stage degrades to the text channels
            log.exception("query embedding failed; recalling without vectors")
            return None
        finally:
            timings["embed"] = _ms(started)

    async def _text_channels(
        self, request: RecallRequest, analysis: Analysis, timings: dict[str, float]
    ) -> dict[str, list[tuple[str, int]]]:
        started = time.perf_counter()
        limit = max(self.settings.candidates_per_channel, request.limit)
        rankings: dict[str, list[tuple[str, int]]] = {}
        if analysis.topic_keys and (
            not request.types or {"fact", "instruction"} & set(request.types)
        ):
            seqs = await self.store.current_by_topic(analysis.topic_keys)
            rankings["topic_key"] = [("memory", seq) for seq in seqs]
        if analysis.fts_query is not None:
            seqs = await self.store.search_memories_text(
                analysis.fts_query, limit=limit, types=request.types, session_id=request.session_id
            )
            rankings["memory_fts"] = [("memory", seq) for seq in seqs]
            if request.include_messages and not request.types:
                seqs = await self.store.search_messages_text(
                    analysis.fts_query, limit=limit, session_id=request.session_id
                )
                rankings["message_fts"] = [("message", seq) for seq in seqs]
        timings["text_channels"] = _ms(started)
        return rankings

    async def _vector_channels(
        self, request: RecallRequest, vector: np.ndarray | None, timings: dict[str, float]
    ) -> dict[str, list[tuple[str, int]]]:
        if vector is None:
            return {}
        started = time.perf_counter()
        limit = max(self.settings.candidates_per_channel, request.limit)
        rankings = {
            "memory_vector": [
                ("memory", seq)
                for seq, _ in await self.store.search_vectors("memory_vectors", vector, limit=limit)
            ]
        }
        if request.include_messages and not request.types:
            rankings["message_vector"] = [
                ("message", seq)
                for seq, _ in await self.store.search_vectors(
                    "message_vectors", vector, limit=limit
                )
            ]
        timings["vector_channels"] = _ms(started)
        return rankings

    async def _load(self, fused: list[Candidate], request: RecallRequest) -> list[RecallHit]:
        """Rows for the fused candidates, filtered, ordered by score then recency."""
        memories = await self.store.memories_by_seq([c.seq for c in fused if c.kind == "memory"])
        messages = await self.store.messages_by_seq([c.seq for c in fused if c.kind == "message"])
        hits = []
        for candidate in fused:
            if candidate.kind == "memory":
                memory = memories.get(candidate.seq)
                if memory is None or not _memory_matches(memory, request):
                    continue
                hits.append(_hit_from_memory(memory, candidate))
            else:
                message = messages.get(candidate.seq)
                if message is None or (
                    request.session_id is not None and message.session_id != request.session_id
                ):
                    continue
                hits.append(_hit_from_message(message, candidate))
        hits.sort(key=lambda hit: (hit.score, hit.created_at), reverse=True)
        return hits[: request.limit]


def _memory_matches(memory: Memory, request: RecallRequest) -> bool:
    if memory.superseded_by is not None or memory.forgotten_at is not None:
        return False
    if request.types and memory.type not in request.types:
        return False
    return request.session_id is None or memory.session_id == request.session_id


def _hit_from_memory(memory: Memory, candidate: Candidate) -> RecallHit:
    fields: dict[str, Any] = msgspec.structs.asdict(memory)
    return RecallHit(**fields, score=round(candidate.score, 6), channels=candidate.channels)


def _hit_from_message(message: StoredMessage, candidate: Candidate) -> RecallHit:
    return RecallHit(
        id=message.id,
        type="message",
        content=message.content,
        session_id=message.session_id,
        source_message_ids=[message.id],
        created_at=message.created_at,
        role=message.role,
        score=round(candidate.score, 6),
        channels=candidate.channels,
    )


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
