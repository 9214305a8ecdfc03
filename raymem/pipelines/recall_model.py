"""What recall asks a configured model: a wider query, and the answer.

With a model (``models.generator`` openai or transformers) recall asks it, best
effort, for other words and a statement the answer would be phrased as (HyDE),
and to answer from the ranked current facts. A call that fails, answers
malformed JSON or takes longer than ``recall.model_timeout_s`` leaves the rules'
result in place; the recall result says which ran (``generated_by``).
"""

import asyncio
from collections.abc import Sequence

import msgspec

from raymem.models.chat import ChatModel, MalformedAnswer
from raymem.pipelines.generators import json_object

EXPAND_MAX_TOKENS = 200
ANSWER_MAX_TOKENS = 300
MAX_TERMS = 12

EXPAND_SYSTEM = """You help search a person's memory store. For the question, answer with one
JSON object and nothing else:
{"terms": [up to 8 single words or short phrases a stored statement answering it may use,
           synonyms and related words, not in the question],
 "statement": "one sentence phrased as a stored memory that would answer it"}"""

ANSWER_SYSTEM = """You answer a question from a person's memory store. The facts below are the
current ones, best first, with dates where known; an older fact that a newer one replaced is not
listed. Answer briefly from these facts only, keep dates as given, and say you do not know when
they do not answer the question."""


class QueryExpansion(msgspec.Struct, kw_only=True):
    terms: list[str] = []
    statement: str | None = None


async def expand_query(chat: ChatModel, query: str, *, timeout_s: float) -> QueryExpansion:
    """Other words for the question and a statement of its answer, from the model.

    Raises:
        MalformedAnswer: the answer is not the JSON asked for.
        TimeoutError: the model took longer than ``timeout_s``.
    """
    messages = [
        {"role": "system", "content": EXPAND_SYSTEM},
        {"role": "user", "content": query},
    ]
    text = await asyncio.wait_for(chat.complete(messages, max_tokens=EXPAND_MAX_TOKENS), timeout_s)
    try:
        expansion = msgspec.convert(json_object(text), QueryExpansion, strict=False)
    except msgspec.ValidationError as exc:
        raise MalformedAnswer(f"query expansion does not match the schema: {exc}") from exc
    terms = [term.strip() for term in expansion.terms if term.strip()][:MAX_TERMS]
    statement = (expansion.statement or "").strip() or None
    return QueryExpansion(terms=terms, statement=statement)


async def answer_question(
    chat: ChatModel, query: str, facts: Sequence[str], *, timeout_s: float
) -> str:
    """The model's answer to ``query`` from ``facts`` (best first).

    Raises:
        MalformedAnswer: the model answered nothing.
        TimeoutError: the model took longer than ``timeout_s``.
    """
    listed = "\n".join(f"- {fact}" for fact in facts) or "- (none)"
    messages = [
        {"role": "system", "content": ANSWER_SYSTEM},
        {"role": "user", "content": f"Facts:\n{listed}\n\nQuestion: {query}"},
    ]
    text = await asyncio.wait_for(chat.complete(messages, max_tokens=ANSWER_MAX_TOKENS), timeout_s)
    if not text.strip():
        raise MalformedAnswer("the model answered nothing")
    return text.strip()
