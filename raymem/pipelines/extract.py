"""Extraction: conversations cut into overlapping chunks, full and detail passes, merged.

A chunk is about 10,000 characters of whole messages; consecutive chunks share
two messages, so a statement that needs the turn before it is seen with it. Each
chunk is a transcript of numbered lines (one sentence each) with role labels
and absolute dates; generators cite line numbers, which map back to (message
id, sentence index) for provenance. Up to four chunks are processed at once.
"""

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from raymem.pipelines.generators import Generator, RulesGenerator
from raymem.pipelines.language import split_sentences, split_speaker
from raymem.pipelines.types import Chunk, Extracted, Focus, Line
from raymem.store import NewMessage

log = logging.getLogger(__name__)

CHUNK_CHARS = 10_000
OVERLAP_MESSAGES = 2
MAX_CONCURRENT_CHUNKS = 4
DETAIL_MIN_MESSAGES = 9  # shorter conversations get the full pass only
LINE_LABEL_CHARS = 32  # a transcript line's "[12] 2026-04-15 user (Caroline): "

_RULES = RulesGenerator()

# A chunk's items after the per-chunk stages (dates, verification), with their chunk.
ChunkStage = Callable[[list[Extracted], Chunk], list[Extracted]]


def message_lines(message: NewMessage) -> tuple[str | None, list[str]]:
    """A turn's speaker (when named inside it) and its sentences: the transcript lines."""
    speaker, text = split_speaker(message.content)
    sentences = split_sentences(text)
    return speaker, sentences or [text.strip() or message.content]


def plan_chunks(
    sizes: Sequence[int], *, max_chars: int = CHUNK_CHARS, overlap: int = OVERLAP_MESSAGES
) -> list[range]:
    """Message index ranges of the chunks, given each message's rendered size.

    A chunk grows until the next message would take it past ``max_chars``; the
    next chunk starts ``overlap`` messages before the end of the previous one.
    A chunk always holds at least one message the previous one did not, so a
    single message longer than ``max_chars`` is a chunk of its own (plus overlap).

    Args:
        sizes: characters of each message as rendered.
        max_chars: target size of a chunk.
        overlap: messages shared by consecutive chunks.
    """
    chunks: list[range] = []
    start = 0
    while start < len(sizes):
        end = start
        total = 0
        first_new = start if not chunks else chunks[-1].stop
        while end < len(sizes) and (end <= first_new or total + sizes[end] <= max_chars):
            total += sizes[end]
            end += 1
        chunks.append(range(start, end))
        if end >= len(sizes):
            break
        start = max(end - overlap, start + 1)
    return chunks


def build_chunks(
    messages: Sequence[NewMessage], *, max_chars: int = CHUNK_CHARS, overlap: int = OVERLAP_MESSAGES
) -> list[Chunk]:
    """The conversation as overlapping transcript chunks of numbered lines.

    Args:
        messages: the turns, in conversation order.
        max_chars: target size of a chunk's transcript.
        overlap: messages shared by consecutive chunks.
    """
    split = [message_lines(message) for message in messages]
    sizes = [sum(len(s) + LINE_LABEL_CHARS for s in sentences) for _, sentences in split]
    chunks = []
    for number, span in enumerate(plan_chunks(sizes, max_chars=max_chars, overlap=overlap)):
        lines: list[Line] = []
        for position in span:
            message = messages[position]
            speaker, sentences = split[position]
            day = datetime.fromisoformat(message.created_at).date().isoformat()
            for sentence_index, sentence in enumerate(sentences):
                lines.append(
                    Line(
                        index=len(lines),
                        message_id=message.id,
                        line=sentence_index,
                        role=message.role,
                        speaker=speaker,
                        date=day,
                        text=sentence,
                    )
                )
        chunks.append(Chunk(number=number, message_ids=[messages[i].id for i in span], lines=lines))
    return chunks


async def _run_pass(
    generator: Generator,
    chunk: Chunk,
    focus: Focus,
    limit: asyncio.Semaphore,
    known: Sequence[str],
) -> list[Extracted]:
    async with limit:
        if isinstance(generator, RulesGenerator):  # deterministic: an error here is a bug
            return await generator.extract(chunk, focus=focus, known=known)
        try:
            return await generator.extract(chunk, focus=focus, known=known)
        except Exception as exc:  # a malformed answer or a dead endpoint: never a failed ingest
            log.warning(
                "generator %s failed on chunk %d (%s pass), using rules: %s",
                generator.name,
                chunk.number,
                focus,
                exc,
            )
            return await _RULES.extract(chunk, focus=focus)


async def extract_chunks(
    chunks: Sequence[Chunk],
    generator: Generator | None,
    *,
    detail: bool,
    stage: ChunkStage,
    concurrency: int = MAX_CONCURRENT_CHUNKS,
    known: Sequence[str] = (),
) -> list[tuple[Extracted, Chunk]]:
    """Run the full pass (and the detail pass) over every chunk, then ``stage`` per chunk.

    Args:
        chunks: the conversation's chunks.
        generator: the model backend; None for the embedded rules.
        detail: also run the detail pass (conversations of 9 or more messages).
        stage: per-chunk post-processing (date resolution and verification).
        concurrency: chunks in flight at once.
        known: what the agent already holds (a flush's core block entries),
            shown to a model so that it does not extract it again.

    Returns:
        Every surviving item with the chunk whose lines it cites.
    """
    generator = generator or _RULES
    limit = asyncio.Semaphore(concurrency)
    focuses: list[Focus] = ["full", "detail"] if detail else ["full"]
    jobs = [(chunk, focus) for chunk in chunks for focus in focuses]
    answers = await asyncio.gather(
        *(_run_pass(generator, chunk, focus, limit, known) for chunk, focus in jobs)
    )
    out: list[tuple[Extracted, Chunk]] = []
    for (chunk, _), items in zip(jobs, answers, strict=True):
        out.extend((item, chunk) for item in stage(items, chunk))
    return out
