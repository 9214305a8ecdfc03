"""A dream with a model: merged statements rewritten as one, and insights with their evidence.

Both are best effort. A rewrite that drops a concrete value its statements name,
or an answer that is not the JSON asked for, leaves the rules' result in place
(the best-supported statement is kept); insights must cite at least two of the
memories they were shown.
"""

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import msgspec

from raymem.models.chat import ChatModel, MalformedAnswer
from raymem.pipelines.dream.items import Item, concrete_values
from raymem.pipelines.generators import json_object
from raymem.store import NewMemory, to_db_time
from raymem.store.dreams import Change

log = logging.getLogger(__name__)

#: An insight is inferred, not said: it starts at this confidence (below the review
#: queue's default threshold) and importance.
INSIGHT_CONFIDENCE = 0.7
INSIGHT_IMPORTANCE = 0.6
MIN_EVIDENCE = 2
REWRITE_TOKENS = 256

REWRITE_SYSTEM = """You keep a memory store tidy. The stored statements below say the same thing.
Answer with one JSON object and nothing else:
{"statement": "one self-contained statement that says what they all say"}
Keep every name, number, date and other concrete value they mention."""

INSIGHT_SYSTEM = """You review what is remembered about a user and propose insights: lasting,
general statements (habits, preferences, patterns, relationships) that several memories support
together and none states alone. Each memory is a line "[id] statement".
Answer with one JSON object and nothing else:
{"insights": [{"statement": "...", "evidence": ["id", "id", ...]}]}
Cite at least two memories for each insight, by the ids shown. Propose none rather than guess."""


class _Rewrite(msgspec.Struct):
    statement: str


class _Insight(msgspec.Struct):
    statement: str
    evidence: list[str]


class _Insights(msgspec.Struct):
    insights: list[_Insight]


def _parse(text: str, kind: type[Any]) -> Any:
    try:
        return msgspec.convert(json_object(text), kind, strict=False)
    except msgspec.ValidationError as exc:
        raise MalformedAnswer(f"the answer does not match the schema: {exc}") from exc


async def rewrite_merge(
    model: ChatModel, change: Change, members: Sequence[Item], now: datetime
) -> Change:
    """A merge whose statement the model wrote: a new memory that supersedes every member.

    Raises:
        MalformedAnswer: not the JSON asked for, or a statement that lost a value.
    """
    assert change.memory is not None  # a rules merge carries the kept memory's merged row
    listed = "\n".join(f"- {member.record.content}" for member in members)
    answer = await model.complete(
        [
            {"role": "system", "content": REWRITE_SYSTEM},
            {"role": "user", "content": f"Statements:\n{listed}"},
        ],
        max_tokens=REWRITE_TOKENS,
    )
    statement = _parse(answer, _Rewrite).statement.strip()
    lost = members[0].values - concrete_values(statement)
    if not statement or lost:
        raise MalformedAnswer(f"the rewrite {statement!r} leaves out {sorted(lost)}")
    memory = msgspec.structs.replace(
        change.memory, id=uuid.uuid4().hex, content=statement, created_at=to_db_time(now)
    )
    return msgspec.structs.replace(
        change,
        kept=memory.id,
        content=statement,
        memory=memory,
        reason=f"{change.reason}; the model wrote one statement for them",
    )


def _recent(items: Sequence[Item], sessions: Sequence[str], budget_chars: int) -> list[Item]:
    """The memories of the given sessions (and those of none), newest first, within the budget."""
    wanted = set(sessions)
    shown, used = [], 0
    ordered = sorted(items, key=lambda item: item.said_at, reverse=True)
    for item in ordered:
        if item.record.session_id is not None and item.record.session_id not in wanted:
            continue
        cost = len(item.record.content) + len(item.id) + 4
        if used + cost > budget_chars:
            break
        shown.append(item)
        used += cost
    return shown


async def insights(
    model: ChatModel,
    items: Sequence[Item],
    *,
    sessions: Sequence[str],
    instructions: str,
    budget_chars: int,
    limit: int,
    max_tokens: int,
    now: datetime,
) -> list[Change]:
    """Insights the model draws from the memories of recent sessions, each a new memory.

    Raises:
        MalformedAnswer: the answer is not the JSON asked for.
    """
    shown = _recent(items, sessions, budget_chars)
    if len(shown) < MIN_EVIDENCE:
        return []
    lines = "\n".join(f"[{item.id}] {item.record.content}" for item in shown)
    focus = f"\nThe person asked: {instructions}" if instructions else ""
    answer = await model.complete(
        [
            {"role": "system", "content": INSIGHT_SYSTEM + focus},
            {"role": "user", "content": f"Memories:\n{lines}"},
        ],
        max_tokens=max_tokens,
    )
    by_id = {item.id: item for item in shown}
    known = {" ".join(item.record.content.lower().split()) for item in items}
    changes = []
    for proposed in _parse(answer, _Insights).insights[:limit]:
        evidence = [by_id[i] for i in dict.fromkeys(proposed.evidence) if i in by_id]
        statement = proposed.statement.strip()
        if len(evidence) < MIN_EVIDENCE or not statement:
            log.info(
                "insight %r dropped: it cites fewer than %d shown memories", statement, MIN_EVIDENCE
            )
            continue
        if " ".join(statement.lower().split()) in known:
            continue
        changes.append(_insight(statement, evidence, now))
    return changes


def _insight(statement: str, evidence: Sequence[Item], now: datetime) -> Change:
    sources = list(
        dict.fromkeys(source for item in evidence for source in item.record.source_message_ids)
    )
    memory = NewMemory(
        id=uuid.uuid4().hex,
        type="fact",
        content=statement,
        importance=INSIGHT_IMPORTANCE,
        confidence=INSIGHT_CONFIDENCE,
        source_message_ids=sources,
        created_at=to_db_time(now),
    )
    return Change(
        action="insight",
        memory_ids=[item.id for item in evidence],
        kept=memory.id,
        content=statement,
        reason=f"drawn from {len(evidence)} memories by the model",
        memory=memory,
        evidence=sources,
    )
