"""One SQLite file per profile: the store, its schema and connections. No Ray imports."""

from raymem.store.store import (
    COUNTS_SQL,
    NewMemory,
    NewMessage,
    ProfileStore,
    StoreWriter,
    content_hash,
    message_id,
    profile_info,
    to_db_time,
    utc_now,
)

__all__ = [
    "COUNTS_SQL",
    "NewMemory",
    "NewMessage",
    "ProfileStore",
    "StoreWriter",
    "content_hash",
    "message_id",
    "profile_info",
    "to_db_time",
    "utc_now",
]
