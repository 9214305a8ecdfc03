"""Turns as the agent's context reads them: by id, and whether what they said still holds.

A turn is stale when memories were drawn from it (it is their first source, the
turn recall folds them into) and none of them is current any more: what it said
was superseded or forgotten. A turn no memory was drawn from is not stale: it is
the only evidence there is. Both reads are indexed lookups on the blocking read
connection.
"""

from collections.abc import Sequence
from typing import Any

from raymem.store.rows import MESSAGE_COLUMNS, message_from_row, placeholders
from raymem.types import StoredMessage

_FIRST_SOURCE = "json_extract(source_message_ids, '$[0]')"  # as the index memories_by_first_source


def stale_turns(quick: Any, message_ids: Sequence[str]) -> set[str]:
    """Which of these turns are stale: every memory drawn from them is superseded or forgotten."""
    if not message_ids:
        return set()
    rows = quick.execute(
        f"SELECT {_FIRST_SOURCE}, max(superseded_by IS NULL AND forgotten_at IS NULL)"
        f" FROM memories WHERE {_FIRST_SOURCE} IN ({placeholders(len(message_ids))})"
        f" GROUP BY {_FIRST_SOURCE}",
        list(message_ids),
    ).fetchall()
    return {row[0] for row in rows if not row[1]}


def message_by_id(quick: Any, message_id: str) -> tuple[int, StoredMessage] | None:
    """A turn and its seq; None for an unknown id."""
    rows = quick.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
    ).fetchall()
    return (rows[0][0], message_from_row(rows[0])) if rows else None
