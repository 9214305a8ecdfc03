"""Intent summaries of sequences written by a chat model (the rules write them otherwise).

The model sees the sequence's actions, one line each (at most ``PROMPT_ACTIONS``),
and answers ``{"intent": "<a short imperative phrase>"}``; an answer without one
raises, and pass 1 then keeps the rules' summary for that sequence.
"""

import json
from collections.abc import Sequence
from typing import Protocol

from raymem.types_procedural import Action

PROMPT_ACTIONS = 50  # the first actions of a long sequence are shown, then a count
SUMMARY_TOKENS = 64
SYSTEM = (
    "You summarise what an AI agent was trying to do, from the actions it took. Answer with"
    ' a JSON object {"intent": "..."} holding one short imperative phrase of at most 12'
    ' words, such as "rename a person node" or "refund an invoice".'
)


class Chat(Protocol):
    """A chat-completion model (``raymem.models.chat.ChatModel`` is one)."""

    async def complete(self, messages: list[dict[str, str]], *, max_tokens: int) -> str: ...


def describe(action: Action) -> str:
    """One line of the prompt for an action."""
    targets = f" {', '.join(action.target_ids)}" if action.target_ids else ""
    result = action.outcome + (f" ({action.error_code})" if action.error_code else "")
    stated = f"; intent: {action.intent}" if action.intent else ""
    return f"{action.action_type} on {action.target_type}{targets}: {result}{stated}"


def summary_prompt(actions: Sequence[Action]) -> list[dict[str, str]]:
    lines = [f"{n}. {describe(a)}" for n, a in enumerate(actions[:PROMPT_ACTIONS], start=1)]
    if len(actions) > PROMPT_ACTIONS:
        lines.append(f"... and {len(actions) - PROMPT_ACTIONS} more actions")
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Actions, in order:\n" + "\n".join(lines)},
    ]


def parse_intent(answer: str) -> str:
    """The intent in a model's answer.

    Raises:
        ValueError: the answer holds no intent.
    """
    start, end = answer.find("{"), answer.rfind("}")
    if start < 0 or end < start:
        raise ValueError(f"no JSON object in the answer {answer[:200]!r}")
    fields = json.loads(answer[start : end + 1])
    intent = fields.get("intent") if isinstance(fields, dict) else None
    if not isinstance(intent, str) or not intent.strip():
        raise ValueError(f"no intent in the answer {answer[:200]!r}")
    return intent.strip()


class ChatSummariser:
    """An ``IntentSummariser`` over a chat model; ``name`` is recorded with each summary."""

    def __init__(self, chat: Chat, *, name: str) -> None:
        self.chat, self.name = chat, name

    async def summarise(self, actions: Sequence[Action]) -> str:
        answer = await self.chat.complete(summary_prompt(actions), max_tokens=SUMMARY_TOKENS)
        return parse_intent(answer)
