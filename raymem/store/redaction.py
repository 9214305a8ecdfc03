"""What one erasure removes, as ledger redactors and table erasers read it.

A ``Redaction`` starts from what the person asked to erase (memories, turns,
sessions, or retention's turns received before a time). Each subsystem's table
eraser (``raymem.store.erase_tables``) adds the ids of the rows it removed
(``derived``), so that the redactors of the ledger entries and archive rows that
wrote those rows find them: an episode's entry names no erased session or memory
once its text is gone, but its id is known.
"""

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Redaction:
    """What a redactor removes from a ledger payload."""

    at: str  # when the erasure happened: a tombstone's ``erased_at``
    memories: frozenset[str] = frozenset()
    messages: frozenset[str] = frozenset()
    sessions: frozenset[str] = frozenset()
    messages_before: str | None = None  # retention: every turn received before this time
    #: Rows the table erasers removed, or values they removed from rows: name -> ids.
    derived: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def is_retention(self) -> bool:
        """Retention expires raw turns only: what was drawn from them stays."""
        return self.messages_before is not None

    def ids(self, name: str) -> frozenset[str]:
        """What a table eraser recorded under ``name`` (empty when nothing)."""
        return self.derived.get(name, frozenset())

    def adding(self, found: Mapping[str, Iterable[str]]) -> "Redaction":
        """This redaction with more derived ids."""
        derived = dict(self.derived)
        for name, ids in found.items():
            derived[name] = derived.get(name, frozenset()) | frozenset(ids)
        return dataclasses.replace(self, derived=derived)

    def drops_turn(self, turn: dict[str, Any], ingested_at: str) -> bool:
        before = self.messages_before
        return (
            turn["id"] in self.messages
            or turn["session_id"] in self.sessions
            or (before is not None and ingested_at < before)
        )

    def memory(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A ``memory`` ledger payload, emptied when the memory is erased.

        Its ``forgotten_at`` and ``erased_at`` come from the ``forget`` and ``erase``
        entries that follow it, on replay as on the original.
        """
        if payload["id"] not in self.memories:
            return payload
        return {
            **payload,
            "content": "",
            "topic_key": None,
            "event_time": None,
            "source_message_ids": [],
            "source_spans": [],
            "search_queries": [],
        }

    def memory_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """A whole memory row (of an ``import`` entry), as a tombstone when it is erased."""
        if row["id"] not in self.memories:
            return row
        return {
            **self.memory(row),
            "forgotten_at": row["forgotten_at"] or self.at,
            "erased_at": row.get("erased_at") or self.at,
        }


#: Rewrites one ledger payload (decoded JSON) without what a redaction removes:
#: (payload, redaction, the entry's time) -> the payload to keep, equal to the
#: input when nothing in it is erased. Replay must accept what it returns.
Redactor = Callable[[Any, Redaction, str], Any]
#: The same for the rows of one table inside an ``import`` entry.
RowRedactor = Callable[[list[dict[str, Any]], Redaction], list[dict[str, Any]]]
