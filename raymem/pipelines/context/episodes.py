"""Episodes: finalised when a work item closes or a session ends, then found by recall.

An episode is built from what accumulated: the work item (objective, target,
limits, plan, follow-ups and waits), the turns of its session in its time, and
the memories drawn from them. By rules by default:

- summary: the outcome, the todos done, then the most important memories (or the
  first user sentences), up to ``episode_summary_chars``;
- touched resources: file paths, URLs and ids (``ABC-123``, ``#123``, commit
  hashes) found by pattern in the turns and the item;
- decisions: instructions in memory and sentences that decide ("we decided",
  "we'll", "agreed", "let's go with");
- verification: sentences about tests, CI, checks passing or failing;
- follow-ups carried forward: open todos, unresolved follow-ups and waits, tasks.

With a chat model configured, the model writes title, summary, decisions,
verification and follow-ups from the same material; resources always come from
the patterns, and a failed or malformed answer falls back to the rules.
"""

import logging
import re
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Literal

import msgspec
import numpy as np

from raymem.config import ContextSettings
from raymem.errors import Conflict, WorkItemClosed
from raymem.models.chat import ChatModel, MalformedAnswer
from raymem.pipelines.generators import json_object
from raymem.pipelines.language import split_sentences
from raymem.store import ProfileStore
from raymem.store import episodes as episode_store
from raymem.store import work as work_store
from raymem.store.refs import episode_ref, normalise
from raymem.types import Memory, StoredMessage
from raymem.types_context import ClosedWorkItem, Episode, WorkItem

log = logging.getLogger(__name__)

URL = re.compile(r"\bhttps?://[^\s<>()\"'`]+")
FILE_PATH = re.compile(
    r"(?<![\w/.:-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,8}\b"  # with directories
    r"|(?<![\w/.-])[\w-]+\.(?:py|pyi|js|jsx|ts|tsx|md|rst|json|jsonl|toml|ya?ml|sql|go|rs|java"
    r"|kt|c|h|cc|cpp|hpp|cs|rb|php|sh|txt|cfg|ini|html|css|lock|ipynb)\b"
)
TICKET = re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d+\b")  # ABC-123
ISSUE = re.compile(r"(?<![\w&])#\d+\b")  # #123
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")  # abbreviated or full
DECIDES = re.compile(
    r"\b(?:decided|decide to|we'll|we will|agreed|let's go with|going with|settled on|"
    r"chose|opted for|the plan is)\b",
    re.I,
)
VERIFIES = re.compile(
    r"\b(?:tests?|CI|pytest|checks?|pass(?:ed|es|ing)?|fail(?:ed|s|ing|ure)?|verified|green)\b",
    re.I,
)
MAX_LISTED = 10  # decisions, checks and follow-ups an episode lists, at most
MAX_RESOURCES = 30
MAX_SUMMARY_MEMORIES = 5
TITLE_CHARS = 120
# What a model reads of a long conversation: its start (what was asked) and its
# end (how it ended), at most this many characters of each.
MODEL_HEAD_CHARS, MODEL_TAIL_CHARS = 4_000, 8_000
MODEL_MAX_TOKENS = 768
MAX_MATERIAL = 200  # memories of a session an episode draws on, at most (the newest)
CLOSE_ATTEMPTS = 3  # a work item that keeps changing while it is closed is retried this often


class Material(msgspec.Struct, kw_only=True):
    """What an episode is built from."""

    trigger: Literal["work_item", "session"]
    title: str
    work_item: WorkItem | None = None
    outcome: str | None = None
    session_id: str | None = None
    turns: list[StoredMessage] = msgspec.field(default_factory=list)
    memories: list[Memory] = msgspec.field(default_factory=list)
    started_at: datetime | None = None
    ended_at: datetime


class Draft(msgspec.Struct, kw_only=True):
    """The written part of an episode, from the rules or a model."""

    title: str
    summary: str
    decisions: list[str] = msgspec.field(default_factory=list)
    verification: list[str] = msgspec.field(default_factory=list)
    followups: list[str] = msgspec.field(default_factory=list)


# ------------------------------------------------------------------ rules


def _sentences(turns: Sequence[StoredMessage]) -> list[str]:
    return [sentence for turn in turns for sentence in split_sentences(turn.content)]


def _unique(texts: Iterable[str], limit: int) -> list[str]:
    """Distinct texts (by normal form), trimmed, in order, at most ``limit``."""
    seen: dict[str, str] = {}
    for text in texts:
        cleaned = " ".join(text.split())
        if cleaned and len(seen) < limit:
            seen.setdefault(normalise(cleaned), cleaned)
    return list(seen.values())


def touched_resources(texts: Iterable[str]) -> list[str]:
    """File paths, URLs, ticket and issue ids and commit hashes, in order of appearance."""
    found: list[tuple[int, int, str]] = []
    for number, text in enumerate(texts):
        for pattern in (URL, FILE_PATH, TICKET, ISSUE, COMMIT):
            for match in pattern.finditer(text):
                found.append((number, match.start(), match.group(0).rstrip(".,;:!?)]}")))
    kept: list[str] = []
    for _, _, value in sorted(found):
        if value not in kept and not any(value in longer for longer in kept if "/" in longer):
            kept.append(value)
    return kept[:MAX_RESOURCES]


def _shorten(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, marked when cut."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 0)].rsplit(" ", 1)[0]
    return cut + "…"


def build_by_rules(material: Material, settings: ContextSettings) -> Draft:
    """The episode's written part from patterns, deterministically."""
    # The turns, and the outcome the closer wrote: "tests pass; we'll ship Friday" counts.
    sentences = _sentences(material.turns) + split_sentences(material.outcome or "")
    item = material.work_item
    parts: list[str] = []
    if material.outcome:
        parts.append(f"Outcome: {material.outcome.rstrip('.')}.")
    if item is not None and any(todo.done for todo in item.todos):
        parts.append("Done: " + "; ".join(t.content for t in item.todos if t.done) + ".")
    important = sorted(
        (m for m in material.memories if m.type != "task"),
        key=lambda m: -m.importance,
    )[:MAX_SUMMARY_MEMORIES]
    chosen = {m.id for m in important}
    lines = [m.content for m in material.memories if m.id in chosen]  # in stored order
    if not lines:
        user_turns = [t for t in material.turns if t.role == "user"]
        lines = _sentences(user_turns)[:MAX_SUMMARY_MEMORIES]
    parts.extend(line.rstrip() for line in lines)
    summary = _shorten(" ".join(parts) or material.title, settings.episode_summary_chars)
    decisions = [m.content for m in material.memories if m.type == "instruction"]
    decisions += [s for s in sentences if DECIDES.search(s)]
    return Draft(
        title=material.title,
        summary=summary,
        decisions=_unique(decisions, MAX_LISTED),
        verification=_unique((s for s in sentences if VERIFIES.search(s)), MAX_LISTED),
        followups=_unique(carried_forward(material), MAX_LISTED),
    )


def carried_forward(material: Material) -> list[str]:
    """What is left: open todos, unresolved follow-ups and waits, and current tasks."""
    left: list[str] = []
    item = material.work_item
    if item is not None:
        left += [todo.content for todo in item.todos if not todo.done]
        left += [f.content for f in item.followups if not f.done]
        left += [f"waiting on: {w.content}" for w in item.waits if not w.done]
    left += [m.content for m in material.memories if m.type == "task"]
    return left


# ------------------------------------------------------------------ model

EPISODE_SYSTEM = """You write the record of a finished piece of work for an agent's long-term memory.
Answer with one JSON object and nothing else:
{"title": "what the work was, in a few words",
 "summary": "two to four sentences: what was done and how it ended",
 "decisions": ["decisions taken, one per item"],
 "verification": ["tests, CI runs and checks, with their results as stated"],
 "followups": ["what is left to do"]}
Only state what the material supports; use empty lists where it says nothing."""


class DraftAnswer(msgspec.Struct, kw_only=True):
    title: str = ""
    summary: str
    decisions: list[str] = msgspec.field(default_factory=list)
    verification: list[str] = msgspec.field(default_factory=list)
    followups: list[str] = msgspec.field(default_factory=list)


def _transcript(turns: Sequence[StoredMessage]) -> str:
    text = "\n".join(f"[{t.created_at.date()}] {t.role}: {t.content.strip()}" for t in turns)
    if len(text) <= MODEL_HEAD_CHARS + MODEL_TAIL_CHARS:
        return text
    return f"{text[:MODEL_HEAD_CHARS]}\n[…]\n{text[-MODEL_TAIL_CHARS:]}"


def episode_prompt(material: Material) -> list[dict[str, str]]:
    """The chat messages asking a model to write an episode."""
    lines = [f"Work: {material.title}"]
    item = material.work_item
    if item is not None:
        if item.delivery_target:
            lines.append(f"Delivery target: {item.delivery_target}")
        for todo in item.todos:
            lines.append(f"Todo [{'x' if todo.done else ' '}]: {todo.content}")
        lines += [f"Follow-up: {f.content}" for f in item.followups if not f.done]
        lines += [f"Waiting on: {w.content}" for w in item.waits if not w.done]
    if material.outcome:
        lines.append(f"Outcome: {material.outcome}")
    if material.memories:
        lines.append("Memories:\n" + "\n".join(f"- {m.content}" for m in material.memories))
    if material.turns:
        lines.append("Transcript:\n" + _transcript(material.turns))
    return [
        {"role": "system", "content": EPISODE_SYSTEM},
        {"role": "user", "content": "\n".join(lines)},
    ]


async def build_by_model(chat: ChatModel, material: Material, settings: ContextSettings) -> Draft:
    """The episode's written part from a chat model.

    Raises:
        MalformedAnswer: the answer is not the JSON asked for.
    """
    answer = await chat.complete(episode_prompt(material), max_tokens=MODEL_MAX_TOKENS)
    try:
        parsed = msgspec.convert(json_object(answer), DraftAnswer, strict=False)
    except msgspec.ValidationError as exc:
        raise MalformedAnswer(f"episode answer does not match the schema: {exc}") from exc
    if not parsed.summary.strip():
        raise MalformedAnswer("episode answer has an empty summary")
    return Draft(
        title=_shorten(parsed.title.strip() or material.title, TITLE_CHARS),
        summary=parsed.summary.strip(),
        decisions=_unique(parsed.decisions, MAX_LISTED),
        verification=_unique(parsed.verification, MAX_LISTED),
        followups=_unique(parsed.followups, MAX_LISTED),
    )


async def build(
    material: Material, settings: ContextSettings, chat: ChatModel | None, builder: str
) -> tuple[Draft, str]:
    """The written part, by the model when there is one (rules when it fails); and who wrote it."""
    if chat is not None:
        try:
            return await build_by_model(chat, material, settings), builder
        except Exception as exc:  # a dead endpoint or a bad answer: never a failed close
            log.warning("episode by %s failed, built by rules instead: %s", builder, exc)
    return build_by_rules(material, settings), "rules"


def make_episode(material: Material, draft: Draft, builder: str, *, now: datetime) -> Episode:
    """The immutable record: the draft, the references and the patterns' resources."""
    item = material.work_item
    texts = [t.content for t in material.turns]
    if item is not None:
        texts = [
            item.objective,
            item.delivery_target or "",
            *(entry.content for entry in [*item.todos, *item.followups, *item.waits]),
            material.outcome or "",
            *texts,
        ]
    episode_id = uuid.uuid4().hex
    return Episode(
        id=episode_id,
        source_ref=episode_ref(episode_id),
        trigger=material.trigger,
        work_item_id=item.id if item is not None else None,
        session_id=material.session_id,
        title=draft.title,
        delivery_target=item.delivery_target if item is not None else None,
        summary=draft.summary,
        scope=[*item.scope, *item.constraints] if item is not None else [],
        resources=touched_resources(texts),
        decisions=draft.decisions,
        verification=draft.verification,
        followups=draft.followups,
        source_message_ids=[t.id for t in material.turns],
        source_memory_ids=[m.id for m in material.memories],
        started_at=material.started_at,
        ended_at=material.ended_at,
        created_at=now,
        builder=builder,
    )


# ------------------------------------------------------------- finalising


async def _session_memories(
    store: ProfileStore, session_id: str, turn_ids: set[str], since: datetime | None
) -> list[Memory]:
    """The session's current memories drawn from these turns (or remembered since ``since``)."""
    memories, _ = await store.reads.list_memories(session_id=session_id, limit=MAX_MATERIAL)
    kept = [
        m
        for m in memories
        if (m.source_message_ids and m.source_message_ids[0] in turn_ids)
        or (not m.source_message_ids and (since is None or m.created_at > since))
    ]
    return kept[::-1]  # oldest first


async def work_item_material(
    store: ProfileStore, item: WorkItem, outcome: str | None, now: datetime
) -> Material:
    """A work item and what its session said while it was open."""
    turns: list[StoredMessage] = []
    memories: list[Memory] = []
    if item.session_id is not None:
        rows = await store.reads.session_messages(item.session_id)
        turns = [m for _, m in rows if m.created_at >= item.opened_at]
        memories = await _session_memories(
            store, item.session_id, {t.id for t in turns}, item.opened_at
        )
    return Material(
        trigger="work_item",
        title=_shorten(" ".join(item.objective.split()), TITLE_CHARS),
        work_item=item,
        outcome=outcome,
        session_id=item.session_id,
        turns=turns,
        memories=memories,
        started_at=item.opened_at,
        ended_at=now,
    )


async def close_work_item(
    store: ProfileStore,
    item_id: str,
    outcome: str | None,
    *,
    settings: ContextSettings,
    chat: ChatModel | None = None,
    builder: str = "rules",
    now: datetime,
) -> ClosedWorkItem:
    """Close a work item and finalise its episode, in one transaction.

    The episode is built outside the transaction (a model may take seconds); the
    close then checks that the item did not change meanwhile, and builds again if
    it did.

    Raises:
        WorkItemNotFound: no work item has this id.
        WorkItemClosed: it is closed already.
    """
    for _ in range(CLOSE_ATTEMPTS):
        item = work_store.read_item(store.quick, item_id)
        if item.status != "open":
            raise WorkItemClosed(item_id)
        material = await work_item_material(store, item, outcome, now)
        draft, wrote = await build(material, settings, chat, builder)
        episode = make_episode(material, draft, wrote, now=now)
        async with store.write() as writer:
            closed = await work_store.close_item(
                writer, item_id, outcome=outcome, now=now, expected_update=item.updated_at
            )
            if closed is not None:
                await episode_store.insert_episode(writer, episode)
        if closed is not None:
            return ClosedWorkItem(work_item=closed, episode=episode)
    raise Conflict(f"Work item {item_id!r} kept changing while it was being closed; try again")


async def finalise_session(
    store: ProfileStore,
    session_id: str,
    *,
    settings: ContextSettings,
    chat: ChatModel | None = None,
    builder: str = "rules",
    now: datetime,
) -> Episode | None:
    """The episode of a session's turns since its last episode; None when there are none."""
    since = await episode_store.session_covered_until(store.reader, session_id)
    rows = await store.reads.session_messages(session_id)
    turns = [m for _, m in rows if since is None or m.created_at > since]
    if not turns:
        return None
    memories = await _session_memories(store, session_id, {t.id for t in turns}, since)
    first_user = next((t.content for t in turns if t.role == "user"), turns[0].content)
    title = split_sentences(first_user)[:1] or [first_user]
    material = Material(
        trigger="session",
        title=_shorten(" ".join(title[0].split()), TITLE_CHARS),
        session_id=session_id,
        turns=turns,
        memories=memories,
        started_at=turns[0].created_at,
        ended_at=turns[-1].created_at,
    )
    draft, wrote = await build(material, settings, chat, builder)
    episode = make_episode(material, draft, wrote, now=now)
    async with store.write() as writer:
        if await episode_store.session_covered_until(writer.conn, session_id) != since:
            return None  # a concurrent end of the same session wrote this episode first
        await episode_store.insert_episode(writer, episode)
    return episode


# ------------------------------------------------------------------ search


async def rankings(
    store: ProfileStore, fts: str | None, vector: np.ndarray | None, *, limit: int
) -> dict[str, list[int]]:
    """Seqs of the episodes best matching a query, by full text and by vector, best first.

    Args:
        store: the profile's store.
        fts: the query as an FTS5 query (recall's), or None.
        vector: the query's vector, or None.
        limit: how many at most, per ranking.
    """
    found: dict[str, list[int]] = {}
    if fts is not None:
        found["episode_fts"] = episode_store.episodes_text(store.quick, fts, limit=limit)
    if vector is not None:
        near = await store.search.vectors("episode_vectors", vector, limit=limit)
        found["episode_vector"] = [seq for seq, _ in near]
    return found


async def search(
    store: ProfileStore, fts: str | None, vector: np.ndarray | None, *, limit: int, k: float
) -> list[Episode]:
    """The episodes best matching a query, best first: both rankings fused by rank (``k``)."""
    scores: dict[int, float] = {}
    for ranked in (await rankings(store, fts, vector, limit=limit)).values():
        for rank, seq in enumerate(ranked):
            scores[seq] = scores.get(seq, 0.0) + 1.0 / (k + rank + 1)
    seqs = sorted(scores, key=lambda seq: (-scores[seq], -seq))[:limit]
    found = episode_store.episodes_by_seq(store.quick, seqs)
    return [found[seq] for seq in seqs if seq in found]
