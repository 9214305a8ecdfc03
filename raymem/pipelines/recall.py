"""Recall: the channels over one store, fused into ranked evidence, and the answer.

Pure async code over a ``ProfileStore``; query embeddings come from an ``embed``
coroutine that the caller provides (a model pool, or a local model). Every
model-dependent stage degrades: without vectors the text channels still answer.

The pipeline:
1. analyse the query (``query``, deterministic): content words with inflection
   variants for FTS, candidate topic keys, a HyDE statement, and time ranges;
2. run the channels. The query's embedding is requested from the model first and
   computed there while the text channels run here: topic keys, memory FTS,
   raw-message FTS and raw messages in the query's time ranges, one after another
   (each is an indexed read of tens of microseconds to a few milliseconds on the
   actor's own thread, so running them as concurrent tasks would gain nothing).
   Once the vectors arrive, vector search of memories and messages (in-memory
   indexes) runs with the query and, when weighted, the HyDE statement;
3. fuse (``fusion``): weighted reciprocal rank fusion, every memory folded into the
   turn it was extracted from (one turn, one slot), the neighbours of the
   strongest turns added, ordered by score with ties broken by recency;
4. answer (``answer``): date arithmetic computed here, then an extractive synthesis.
"""

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec
import numpy as np

from raymem.config import RecallSettings
from raymem.models.chat import ChatModel
from raymem.pipelines.answer import compose, date_facts, evidence_lines
from raymem.pipelines.context import episodes
from raymem.pipelines.currency import apply_currency
from raymem.pipelines.fusion import (
    Ranked,
    Scored,
    context_lifts,
    favour_recent,
    favour_speakers,
    fuse,
    group_by_turn,
    order,
)
from raymem.pipelines.prior import apply_prior
from raymem.pipelines.query import Analysis, analyse, widen, within_budget
from raymem.pipelines.recall_model import QueryExpansion, answer_question, expand_query
from raymem.store import ProfileStore, to_db_time, utc_now
from raymem.store.episodes import episode_memories_by_seq
from raymem.store.refs import episode_ref, memory_ref, message_ref
from raymem.types import Memory, RecallHit, RecallRequest, RecallResult

log = logging.getLogger(__name__)

EmbedFn = Callable[[list[str]], Awaitable[np.ndarray]]


class Recaller:
    """Runs recall over one store; the profile actor keeps one."""

    def __init__(
        self,
        store: ProfileStore,
        settings: RecallSettings,
        embed: EmbedFn | None,
        chat: ChatModel | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.embed = embed
        self.chat = chat  # a configured model: query expansion, HyDE and the answer

    def light(self, candidates_per_channel: int) -> "Recaller":
        """A cheaper recall over the same store, for context assembly.

        No model stages (query expansion, a model's HyDE statement, the answer:
        context assembly asks for evidence, not an answer, on every turn) and at
        most ``candidates_per_channel`` candidates from each channel. Vectors of
        rows still waiting are embedded with the query as in a full recall.
        """
        settings = msgspec.structs.replace(
            self.settings,
            candidates_per_channel=min(
                candidates_per_channel, self.settings.candidates_per_channel
            ),
            hyde_memory_vector_weight=0.0,
            hyde_message_vector_weight=0.0,
        )
        return Recaller(self.store, settings, self.embed, chat=None)

    def weights(self) -> dict[str, float]:
        s = self.settings
        return {
            "topic_key": s.topic_key_weight,
            "memory_fts": s.memory_fts_weight,
            "memory_vector": s.memory_vector_weight,
            "message_fts": s.message_fts_weight,
            "message_vector": s.message_vector_weight,
            "message_time": s.message_time_weight,
            "memory_time": s.memory_time_weight,
            "hyde_memory_vector": s.hyde_memory_vector_weight,
            "hyde_message_vector": s.hyde_message_vector_weight,
            "episode_fts": s.episode_weight,
            "episode_vector": s.episode_weight,
        }

    async def recall(
        self, request: RecallRequest, *, query_vector: np.ndarray | None = None
    ) -> RecallResult:
        """Answer ``request``: channels, fusion, grouping by turn, synthesis.

        Args:
            request: the query and its options.
            query_vector: the query's embedding when the caller has it already
                (benchmarks embed their questions once); None embeds it here.
        """
        timings: dict[str, float] = {}
        generated_by = {"analysis": "rules", "answer": "rules"}
        started = time.perf_counter()
        anchor = request.as_of or utc_now()  # "now" for relative dates: never the data's own
        expanding = (
            asyncio.ensure_future(self._expand(request.query, generated_by)) if self.chat else None
        )
        analysis = analyse(request.query, anchor)
        weights = self.weights()
        hyde = (
            analysis.hyde
            if weights["hyde_memory_vector"] or weights["hyde_message_vector"]
            else None
        )
        expansion = await expanding if expanding is not None else None
        if expansion is not None:
            analysis = widen(analysis, expansion.terms)
            if expansion.statement:
                hyde = expansion.statement
                weights["hyde_memory_vector"] = weights["hyde_message_vector"] = (
                    self.settings.model_hyde_weight
                )
        timings["analyse"] = _ms(started)
        # The query is embedded by the model pool while the text channels run here.
        backlog = await self._vector_backlog(query_vector)
        embed_task = asyncio.ensure_future(
            self._embed_query(request.query, hyde, query_vector, backlog, timings)
        )
        try:
            await asyncio.sleep(0)  # the embedding request leaves before the text channels run
            text_rankings = await self._text_channels(request, analysis, timings)
            query_vec, hyde_vec = await embed_task
        finally:
            embed_task.cancel()  # a no-op once it is done
        vector_rankings = await self._vector_channels(request, query_vec, hyde_vec, timings)
        vector_rankings.update(await self._episode_channel(request, analysis, query_vec))

        fuse_started = time.perf_counter()
        fused = fuse({**text_rankings, **vector_rankings}, weights, self.settings.rrf_k)
        items = group_by_turn(await self._load(fused, request))
        favour_speakers(items, analysis, self.settings.speaker_share)
        favour_recent(items, analysis, self.settings.recent_share)
        apply_prior(items, self.settings, anchor, self.store.quick)
        wanted = functools.partial(_memory_matches, request=request)
        items = apply_currency(items, self.store.search, wanted)
        items = await self._add_neighbours(items, request)
        items = apply_currency(items, self.store.search, wanted)  # the neighbours just added
        items = order(items)[: request.limit]
        hits = [_hit(item) for item in items]
        timings["fuse"] = _ms(fuse_started)

        synth_started = time.perf_counter()
        answer = ""
        if request.synthesize:
            facts = await date_facts(self.store, request.query, anchor, request.session_id)
            answer = compose(request.query, items, facts)
            if self.chat is not None:
                lines = [*facts, *evidence_lines(request.query, items)]
                answer = await self._model_answer(request.query, lines, answer, generated_by)
        timings["synthesize"] = _ms(synth_started)
        timings["total"] = _ms(started)
        channels = sorted({c for hit in hits for c in hit.channels})
        return RecallResult(
            answer=answer,
            memories=hits,
            method="hybrid:" + "+".join(channels) if channels else "hybrid",
            latency_ms=timings,
            generated_by=generated_by,
        )

    async def _expand(self, query: str, generated_by: dict[str, str]) -> QueryExpansion | None:
        """The model's wider query, or None (and why, in ``generated_by``) when it fails."""
        assert self.chat is not None
        try:
            expansion = await expand_query(
                self.chat, query, timeout_s=self.settings.model_timeout_s
            )
        except Exception as exc:  # a model stage is best effort: the rules' analysis stands
            log.warning("query expansion by the model failed, using rules: %r", exc)
            generated_by["analysis"] = f"rules (model failed: {type(exc).__name__})"
            return None
        generated_by["analysis"] = "rules+model"
        return expansion

    async def _model_answer(
        self, query: str, lines: list[str], fallback: str, generated_by: dict[str, str]
    ) -> str:
        """The model's answer from the ranked current facts, or ``fallback`` when it fails."""
        assert self.chat is not None
        try:
            answer = await answer_question(
                self.chat, query, lines, timeout_s=self.settings.model_timeout_s
            )
        except Exception as exc:  # best effort: the composed answer stands
            log.warning("the model could not answer, using rules: %r", exc)
            generated_by["answer"] = f"rules (model failed: {type(exc).__name__})"
            return fallback
        generated_by["answer"] = "model"
        return answer

    async def _vector_backlog(self, given: np.ndarray | None) -> list[tuple[str, int, str]]:
        """Rows written but not yet embedded, newest first: (table, seq, text to embed).

        Memories are written with their vectors; an ingest's turns get theirs in the
        background. A recall right after the ingest embeds the newest of them (up
        to ``catch_up_vectors``) in the same model call as the query, so what was
        acknowledged is found by the vector channels too (read-your-writes). With
        no backlog this costs one indexed lookup.
        """
        cap = self.settings.catch_up_vectors
        if self.embed is None or given is not None or cap <= 0:
            return []
        if not self.store.search.has_pending_vectors():
            return []
        backlog = []
        for table in ("memory_vectors", "message_vectors"):
            pending = await self.store.reads.pending_vectors(table, limit=cap, newest_first=True)
            backlog += [(table, seq, text) for seq, text in pending]
        return backlog[:cap]

    async def _embed_query(
        self,
        query: str,
        hyde: str | None,
        given: np.ndarray | None,
        backlog: Sequence[tuple[str, int, str]],
        timings: dict[str, float],
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Vectors of the query and the HyDE statement, one model call; (None, None) on failure.

        The same call embeds the ``backlog``, whose vectors are stored before it returns.
        """
        texts = ([] if given is not None else [query]) + ([hyde] if hyde else [])
        if self.embed is None or not texts:
            return given, None
        started = time.perf_counter()
        try:
            vectors = await self.embed(texts + [text for _, _, text in backlog])
        except Exception:  # a failed model stage degrades to the text channels
            log.exception("query embedding failed; recalling without vectors")
            return given, None
        finally:
            timings["embed"] = _ms(started)
        if backlog:
            caught_up = vectors[len(texts) :]
            async with self.store.write() as writer:
                for table in ("memory_vectors", "message_vectors"):
                    rows = [
                        (seq, caught_up[i]) for i, (t, seq, _) in enumerate(backlog) if t == table
                    ]
                    if rows:
                        await writer.set_vectors(table, rows)
        query_vec = given if given is not None else vectors[0]
        return query_vec, (vectors[len(texts) - 1] if hyde else None)

    async def _text_channels(
        self, request: RecallRequest, analysis: Analysis, timings: dict[str, float]
    ) -> dict[str, list[tuple[str, int]]]:
        started = time.perf_counter()
        parts = [
            await self._topic_channel(request, analysis),
            await self._memory_text_channel(request, analysis),
            await self._message_text_channels(request, analysis),
        ]
        timings["text_channels"] = _ms(started)
        return {name: ranking for part in parts for name, ranking in part.items()}

    async def _topic_channel(
        self, request: RecallRequest, analysis: Analysis
    ) -> dict[str, list[tuple[str, int]]]:
        if not analysis.topic_keys or (
            request.types and not {"fact", "instruction"} & set(request.types)
        ):
            return {}
        seqs = self.store.search.topic_heads(analysis.topic_keys)
        return {"topic_key": [("memory", seq) for seq in seqs]}

    async def _memory_text_channel(
        self, request: RecallRequest, analysis: Analysis
    ) -> dict[str, list[tuple[str, int]]]:
        memory_query = await self._budgeted_query("memories", analysis.fts_terms)
        limit = self._limit(request)
        types, session_id = request.types, request.session_id
        rankings: dict[str, list[tuple[str, int]]] = {}
        if memory_query is not None:
            seqs = self.store.search.memories_text(
                memory_query, limit=limit, types=types, session_id=session_id
            )
            rankings["memory_fts"] = [("memory", seq) for seq in seqs]
        dated: list[tuple[str, int]] = []
        for period in analysis.time_ranges:
            # Events and tasks dated in the period: those matching the query first.
            days = (period.start.date().isoformat(), period.end.date().isoformat())
            if memory_query is not None:
                seqs = self.store.search.memories_text(
                    memory_query,
                    limit=limit,
                    types=types,
                    session_id=session_id,
                    event_between=days,
                )
                dated.extend(("memory", seq) for seq in seqs)
            seqs = self.store.search.memories_dated(
                *days, limit=limit, types=types, session_id=session_id
            )
            dated.extend(("memory", seq) for seq in seqs)
        if dated:
            rankings["memory_time"] = list(dict.fromkeys(dated))[:limit]
        return rankings

    async def _message_text_channels(
        self, request: RecallRequest, analysis: Analysis
    ) -> dict[str, list[tuple[str, int]]]:
        if not _wants_messages(request):
            return {}
        message_query = await self._budgeted_query("messages", analysis.fts_terms)
        limit = self._limit(request)
        rankings: dict[str, list[tuple[str, int]]] = {}
        if message_query is not None:
            seqs = self.store.search.messages_text(
                message_query, limit=limit, session_id=request.session_id
            )
            rankings["message_fts"] = [("message", seq) for seq in seqs]
        in_range: list[tuple[str, int]] = []
        for period in analysis.time_ranges:
            # Turns of the period that match the query first, then the rest of it, newest first.
            between = (to_db_time(period.start), to_db_time(period.end))
            if message_query is not None:
                seqs = self.store.search.messages_text(
                    message_query, limit=limit, session_id=request.session_id, between=between
                )
                in_range.extend(("message", seq) for seq in seqs)
            seqs = self.store.search.messages_between(
                *between, limit=limit, session_id=request.session_id
            )
            in_range.extend(("message", seq) for seq in seqs)
        if in_range:
            rankings["message_time"] = list(dict.fromkeys(in_range))[:limit]
        return rankings

    def _limit(self, request: RecallRequest) -> int:
        return max(self.settings.candidates_per_channel, request.limit)

    async def _budgeted_query(self, table: str, phrases: Sequence[str]) -> str | None:
        """An FTS5 query over ``table`` without the phrases too common to be worth scoring."""
        budget = self.settings.fts_postings_budget
        counts = self.store.search.term_counts(table, phrases, cap=budget + 1)
        return " OR ".join(within_budget(phrases, counts, budget)) or None

    async def _vector_channels(
        self,
        request: RecallRequest,
        query_vec: np.ndarray | None,
        hyde_vec: np.ndarray | None,
        timings: dict[str, float],
    ) -> dict[str, list[tuple[str, int]]]:
        started = time.perf_counter()
        limit = max(self.settings.candidates_per_channel, request.limit)
        rankings: dict[str, list[tuple[str, int]]] = {}
        for prefix, vector in (("", query_vec), ("hyde_", hyde_vec)):
            if vector is None:
                continue
            for kind, table in (("memory", "memory_vectors"), ("message", "message_vectors")):
                if kind == "message" and not _wants_messages(request):
                    continue
                found = await self.store.search.vectors(table, vector, limit=limit)
                rankings[f"{prefix}{kind}_vector"] = [(kind, seq) for seq, _ in found]
        timings["vector_channels"] = _ms(started)
        return rankings

    async def _episode_channel(
        self, request: RecallRequest, analysis: Analysis, query_vec: np.ndarray | None
    ) -> dict[str, list[tuple[str, int]]]:
        """Episodes (records of finished work), by full text and by vector."""
        if not self.settings.episode_weight or (request.types and "episode" not in request.types):
            return {}
        fts = " OR ".join(analysis.fts_terms) or None  # episodes are few: no postings budget
        found = await episodes.rankings(self.store, fts, query_vec, limit=self._limit(request))
        return {channel: [("episode", seq) for seq in seqs] for channel, seqs in found.items()}

    async def _load(self, fused: list[Ranked], request: RecallRequest) -> list[Scored]:
        """Rows for the fused candidates, filtered by type, session and supersession."""
        memories = self.store.search.memories_with_turns(
            [c.seq for c in fused if c.kind == "memory"]
        )
        messages = self.store.search.messages_by_seq([c.seq for c in fused if c.kind == "message"])
        found = episode_memories_by_seq(
            self.store.quick, [c.seq for c in fused if c.kind == "episode"]
        )
        items = []
        for candidate in fused:
            if candidate.kind == "episode":
                memory = found.get(candidate.seq)
                if memory is not None and _memory_matches(memory, request=request):
                    items.append(Scored(dict(candidate.parts), memory=memory))
            elif candidate.kind == "memory":
                memory, turn_seq, turn_at = memories.get(candidate.seq, (None, None, None))
                if memory is not None and _memory_matches(memory, request=request):
                    items.append(
                        Scored(
                            dict(candidate.parts),
                            memory=memory,
                            message_seq=turn_seq,
                            turn_at=turn_at,
                        )
                    )
            else:
                message = messages.get(candidate.seq)
                if message is not None and (
                    request.session_id is None or message.session_id == request.session_id
                ):
                    items.append(
                        Scored(dict(candidate.parts), message=message, message_seq=candidate.seq)
                    )
        return items

    async def _add_neighbours(self, items: list[Scored], request: RecallRequest) -> list[Scored]:
        """Add the turns next to the strongest ones: an answer often sits beside its question."""
        if not _wants_messages(request) or not items:
            return items
        lifts = context_lifts(items, self.settings.context_window, self.settings.context_share)
        # A stale turn's neighbours talk about what no longer holds: it lifts none.
        top = sorted(
            (item for item in items if not item.stale), key=lambda item: item.score, reverse=True
        )[: self.settings.neighbour_top]
        parents = {item.message_seq: item for item in top if item.message_seq is not None}
        adjacent = self.store.search.adjacent_messages(
            list(parents), window=self.settings.neighbour_window
        )
        by_seq = {item.message_seq: item for item in items if item.message_seq is not None}
        for parent_seq, neighbours in adjacent.items():
            parent = parents[parent_seq]
            asks = parent.content.rstrip().endswith("?")
            for seq, message in neighbours:
                share = (
                    self.settings.reply_share
                    if asks and seq == parent_seq + 1
                    else self.settings.neighbour_share
                )
                bonus = parent.score * share
                if seq not in by_seq:
                    by_seq[seq] = Scored({}, message=message, message_seq=seq)
                    items.append(by_seq[seq])
                # Several strong turns around one: it keeps the largest lift.
                parts = by_seq[seq].parts
                parts["neighbour"] = max(parts.get("neighbour", 0.0), bonus)
        # The found turns (the neighbours were appended after them): being near a
        # strong turn is one reason, so a turn keeps the larger of the two lifts.
        for item, lift in zip(items, lifts, strict=False):
            if lift > item.parts.get("neighbour", 0.0):
                item.parts.pop("neighbour", None)
                item.parts["context"] = lift
        return items


def _wants_messages(request: RecallRequest) -> bool:
    return request.include_messages and not request.types


def _memory_matches(memory: Memory, *, request: RecallRequest) -> bool:
    if memory.superseded_by is not None or memory.forgotten_at is not None:
        return False
    if request.types and memory.type not in request.types:
        return False
    return request.session_id is None or memory.session_id == request.session_id


def _hit(item: Scored) -> RecallHit:
    if item.memory is not None:
        fields: dict[str, Any] = msgspec.structs.asdict(item.memory)
        is_episode = item.memory.type == "episode"
        return RecallHit(
            **fields,
            score=round(item.score, 6),
            channels=item.channels,
            source_ref=(episode_ref if is_episode else memory_ref)(item.memory.id),
        )
    message = item.message
    assert message is not None
    return RecallHit(
        id=message.id,
        type="message",
        content=message.content,
        session_id=message.session_id,
        source_message_ids=[message.id],
        created_at=message.created_at,
        superseded_by=item.replaced_by,
        role=message.role,
        score=round(item.score, 6),
        channels=item.channels,
        stale=item.stale,
        source_ref=message_ref(message.id),
    )


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
