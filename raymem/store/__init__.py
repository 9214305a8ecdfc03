"""One SQLite file per profile: the store, its schema and connections. No Ray imports.

- ``store``: ``ProfileStore`` (open, close, transactions) and what it is made of:
- ``reads``: reads that may scan (memories, chains, sessions, counts, the ledger);
- ``search``: recall's quick lookups (full text, vectors, topic heads, rows by seq);
- ``writer``: the writes of one transaction, each logged in the ledger;
- ``replay``: applying another copy's ledger, restoring exported rows;
- ``erase``: erasing memories, sessions and old turns from every row and ledger entry;
- ``schema``: creation and migrations; ``rows``: ids, times, columns and conversions;
- ``vector_index``: the in-memory nearest-neighbour index of a vector table.
"""

from raymem.store.connection import checkpoint
from raymem.store.rows import (
    COUNTS_SQL,
    NewMemory,
    NewMessage,
    content_hash,
    message_id,
    profile_info,
    to_db_time,
    utc_now,
)
from raymem.store.store import ProfileStore
from raymem.store.writer import StoreWriter

__all__ = [
    "COUNTS_SQL",
    "NewMemory",
    "NewMessage",
    "ProfileStore",
    "StoreWriter",
    "checkpoint",
    "content_hash",
    "message_id",
    "profile_info",
    "to_db_time",
    "utc_now",
]
