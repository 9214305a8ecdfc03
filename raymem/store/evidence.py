"""A turn by its id, as get-by-reference reads it: an indexed lookup on the blocking
read connection."""

from typing import Any

from raymem.store.rows import MESSAGE_COLUMNS, message_from_row
from raymem.types import StoredMessage


def message_by_id(quick: Any, message_id: str) -> tuple[int, StoredMessage] | None:
    """A turn and its seq; None for an unknown id."""
    rows = quick.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
    ).fetchall()
    return (rows[0][0], message_from_row(rows[0])) if rows else None
