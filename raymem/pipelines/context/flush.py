"""Memory flush before compaction: keep what is durable in the slice a harness will summarise.

A flush is an ingest of the slice with the core blocks' entries as known facts,
so that what they already say is not stored again: a configured model is shown
them in its extraction prompt and told not to extract them, and whoever extracted
it, a memory that repeats an entry (by its words, or by embedding when the
embedder is configured: ``pipelines.known``) is left out and counted. It is best
effort: when a stage fails, the slice is ingested again by the rules alone, and
when that fails too, nothing is stored; either way the result says what failed
in ``error`` instead of failing the call, so a harness never waits on memory to
compact its context.
"""

import logging
import time
from collections.abc import Sequence

from raymem.pipelines.classify import TypePrototypes
from raymem.pipelines.generators import Generator
from raymem.pipelines.ingest import ingest
from raymem.pipelines.known import KnownFacts
from raymem.pipelines.reconcile import EmbedFn
from raymem.store import ProfileStore
from raymem.store.blocks import read_blocks
from raymem.types import MemoryCounts, MessageCounts
from raymem.types_context import FlushRequest, FlushResult

log = logging.getLogger(__name__)


async def flush(
    store: ProfileStore,
    request: FlushRequest,
    *,
    block_limits: dict[str, int],
    generator: Generator | None = None,
    embed: EmbedFn | None = None,
    prototypes: TypePrototypes | None = None,
) -> FlushResult:
    """Ingest a slice of conversation, leaving out what the core blocks already say.

    Args:
        store: the profile's store.
        request: the session and its turns.
        block_limits: the default blocks (see ``assemble.block_limits``).
        generator, embed, prototypes: the models, as ``ingest`` takes them.
    """
    started = time.perf_counter()
    entries = [entry for block in read_blocks(store.quick, block_limits) for entry in block.entries]
    attempts = [(generator, embed)]
    if generator is not None or embed is not None:
        attempts.append((None, None))  # the rules alone, when a model stage fails
    errors: list[str] = []
    for model, embedder in attempts:
        known = KnownFacts(entries)
        try:
            result = await ingest(
                store,
                request.session_id,
                request.messages,
                generator=model,
                embed=embedder,
                prototypes=prototypes if embedder is not None else None,
                known=known,
            )
        except Exception as exc:
            log.exception("flush of session %s failed", request.session_id)
            errors.append(f"{type(exc).__name__}: {exc}")
            continue
        return FlushResult(
            session_id=result.session_id,
            messages=result.messages,
            memories=result.memories,
            memory_ids=result.memory_ids,
            known=known.repeated,
            error=_error(errors, stored=True),
            latency_ms={**result.latency_ms, "total": _ms(started)},
        )
    return FlushResult(
        session_id=request.session_id,
        messages=MessageCounts(stored=0, duplicates=0),
        memories=MemoryCounts(added=0, superseded=0, duplicates=0),
        memory_ids=[],
        error=_error(errors, stored=False),
        latency_ms={"total": _ms(started)},
    )


def _error(errors: Sequence[str], *, stored: bool) -> str | None:
    if not errors:
        return None
    outcome = "stored by the rules alone" if stored else "nothing was stored"
    return f"{'; then '.join(errors)} ({outcome})"


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
