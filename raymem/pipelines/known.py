"""What the agent already knows, and the extracted memories that only repeat it. No Ray imports.

A flush ingests a slice of conversation with the core blocks' entries as known
facts: a model is shown them in its extraction prompt (``generators.extract_prompt``)
and, whoever extracted it, a memory that repeats an entry is left out here:

- by text: the same text once normalised, or all of its content words (at least
  two) found in one entry ("I prefer dark mode." and "User prefers dark mode");
- by embedding, when an embed function is given: at least ``KNOWN_SIMILARITY``
  cosine-similar to an entry and naming no concrete value the entry does not
  (the duplicate test of reconciliation, ``generators.decide_by_rules``, at a
  gate lowered for restatements in other words).
"""

from collections.abc import Sequence

import numpy as np

from raymem.pipelines import rules
from raymem.pipelines.language import content_words
from raymem.pipelines.reconcile import EmbedFn, embedding_text
from raymem.pipelines.types import Candidate
from raymem.store.refs import normalise

MIN_SHARED_WORDS = 2  # a memory of one content word is never taken for a block's entry
# A restatement of an entry, by all-MiniLM-L6-v2 cosine: "I work at Acme as a backend
# engineer." and the entry "Works at Acme as a backend engineer." 0.92, "My sister
# lives in Lisbon." and "User's sister lives in Lisbon." 0.90, "I always use pnpm,
# never npm." and "Uses pnpm instead of npm" 0.89; what is new stays below it: "My
# sister lives in Porto." 0.73 to the Lisbon entry, "I moved to Berlin last year."
# 0.79 to "Lives in Berlin.", "I use Helix as my editor now." 0.47 to "Uses VS Code".
KNOWN_SIMILARITY = 0.85


def _words(text: str) -> frozenset[str]:
    """Content words with a plural or third-person ``s`` dropped: "prefers" meets "prefer"."""
    return frozenset(w[:-1] if len(w) > 3 and w.endswith("s") else w for w in content_words(text))


def _values(text: str) -> set[str]:
    return {value.lower() for value in rules.concrete_values(text)}


class KnownFacts:
    """Entries the agent already holds, and how many extracted memories repeated one."""

    def __init__(self, entries: Sequence[str]) -> None:
        self.entries = list(entries)
        self._texts = {normalise(entry).rstrip(".!") for entry in entries}
        self._words = [_words(entry) for entry in entries]
        self._values = [_values(entry) for entry in entries]
        self.repeated = 0  # memories left out so far

    def restates(self, text: str) -> bool:
        """Whether ``text`` says what an entry says, by its words alone."""
        words = _words(text)
        return normalise(text).rstrip(".!") in self._texts or (
            len(words) >= MIN_SHARED_WORDS and any(words <= entry for entry in self._words)
        )

    async def leave_out(
        self, candidates: Sequence[Candidate], embed: EmbedFn | None
    ) -> list[Candidate]:
        """The candidates that say something the entries do not (the rest are counted).

        Args:
            candidates: classified memories, before reconciliation.
            embed: texts -> unit vectors; None compares by text only. Ingest
                passes its caching one, so a candidate is not embedded twice.
        """
        kept = [c for c in candidates if not self.restates(c.content)]
        if kept and embed is not None and self.entries:
            texts = [embedding_text(c) for c in kept]
            vectors = np.asarray(await embed([*texts, *self.entries]))
            similarity = vectors[: len(kept)] @ vectors[len(kept) :].T
            kept = [
                candidate
                for candidate, row in zip(kept, similarity, strict=True)
                if not self._near(candidate.content, row)
            ]
        self.repeated += len(candidates) - len(kept)
        return kept

    def _near(self, content: str, similarity: np.ndarray) -> bool:
        values = _values(content)
        return any(
            float(score) >= KNOWN_SIMILARITY and values <= self._values[index]
            for index, score in enumerate(similarity)
        )
