"""Reuse of a causal LM's key/value states across prompts that start alike.

Every extraction prompt starts with the same system prompt, and the full and
detail passes over a chunk share its whole transcript (the task line comes
last), so most of a prompt's tokens were usually seen moments ago. The
``TransformersChat`` backend therefore computes the key/value states of the part
a batch of prompts shares once, reusing what this cache holds of it, and keeps
the result for the next batch. A profile's calls are routed to one Generator
replica (see ``GeneratorPool``), so its next chunk finds its prefix here.

Results are the same as without the cache: the shared states are exactly those
a full forward pass would compute, and the prompts' own tokens are padded in the
middle (after the shared part), where the attention mask hides the padding and
position ids skip it.
"""

import copy
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

#: A shared part shorter than this is not worth a separate forward pass.
MIN_SHARED_TOKENS = 32


def shared_prefix_length(rows: Sequence[Sequence[int]]) -> int:
    """How many leading tokens all rows share, leaving each row at least one token of its own."""
    if not rows:
        return 0
    limit = min(len(row) for row in rows) - 1
    first = rows[0]
    for position in range(max(0, limit)):
        token = first[position]
        if any(row[position] != token for row in rows[1:]):
            return position
    return max(0, limit)


class PromptCache:
    """The key/value states of recently computed prompt prefixes, least recently used out.

    Args:
        entries: how many prefixes to keep (each holds its states for every
            layer: roughly tokens x layers x 2 x hidden size numbers).
    """

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self._held: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self.prompt_tokens = 0  # tokens of every prompt seen
        self.computed_tokens = 0  # tokens whose states were computed rather than reused

    def __len__(self) -> int:
        return len(self._held)

    def lookup(self, prefix: Sequence[int]) -> tuple[int, Any | None]:
        """The longest held start of ``prefix``: (its length, a private copy of its states).

        The copy is cut to that length, so the caller may extend it. (0, None)
        when nothing held shares at least ``MIN_SHARED_TOKENS`` tokens with it.
        """
        best, best_key = 0, None
        for key in self._held:
            length = _common_length(key, prefix)
            if length > best:
                best, best_key = length, key
        if best_key is None or best < MIN_SHARED_TOKENS:
            return 0, None
        self._held.move_to_end(best_key)
        states = copy.deepcopy(self._held[best_key])
        held = states.get_seq_length()
        if held > best:
            states.crop(best - held)  # a negative count removes that many from the end
        return best, states

    def keep(self, prefix: Sequence[int], states: Any) -> None:
        """Hold a copy of the states of ``prefix`` (``states`` covers exactly its tokens)."""
        if self.entries <= 0 or len(prefix) < MIN_SHARED_TOKENS:
            return
        key = tuple(prefix)
        self._held[key] = copy.deepcopy(states)
        self._held.move_to_end(key)
        # An entry that is the start of the new one adds nothing the new one lacks.
        for other in [k for k in self._held if k != key and key[: len(k)] == k]:
            del self._held[other]
        while len(self._held) > self.entries:
            self._held.popitem(last=False)

    def count(self, prompt_tokens: int, computed_tokens: int) -> None:
        self.prompt_tokens += prompt_tokens
        self.computed_tokens += computed_tokens


def _common_length(a: Sequence[int], b: Sequence[int]) -> int:
    for position, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return position
    return min(len(a), len(b))
