"""Opening SQLite connections with FTS5 and sqlite-vec loaded.

The stdlib ``sqlite3`` of many Python builds cannot load extensions, so
connections go through ``pysqlite3`` (wheel ``pysqlite3-binary``) when it is
installed, and through the stdlib module otherwise.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiosqlite
import sqlite_vec

try:  # pragma: no cover - which branch runs depends on the platform
    import pysqlite3.dbapi2 as sqlite3
except ImportError:  # pragma: no cover
    import sqlite3

Error = sqlite3.Error
IntegrityError = sqlite3.IntegrityError

# Copy every page of the write-ahead log into the main file and empty the log, so
# the ``.db`` file alone is a whole copy of the profile (a backup, a hibernated profile).
CHECKPOINT = "PRAGMA wal_checkpoint(TRUNCATE)"


def _connector(path: Path, *, read_only: bool) -> Callable[[], Any]:
    def connect() -> Any:
        if read_only:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        else:
            conn = sqlite3.connect(str(path), check_same_thread=False)
        conn.isolation_level = None  # transactions are explicit: BEGIN IMMEDIATE … COMMIT
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        conn.execute("PRAGMA busy_timeout = 5000")
        if not read_only:
            conn.execute("PRAGMA journal_mode = WAL")
            # Every acknowledged write reaches the disk before the call returns.
            conn.execute("PRAGMA synchronous = FULL")
            # Deleted content is overwritten with zeros, so an erased text leaves no
            # bytes behind in freed cells or pages (see store/erase.py).
            conn.execute("PRAGMA secure_delete = ON")
        return conn

    return connect


async def open_connection(path: Path, *, read_only: bool = False) -> aiosqlite.Connection:
    """Open an async connection to the SQLite file at ``path`` with sqlite-vec loaded."""
    conn = aiosqlite.Connection(_connector(path, read_only=read_only), iter_chunk_size=256)
    return await conn


def open_sync(path: Path, *, read_only: bool = True) -> Any:
    """A blocking connection, for tools that read a profile without its actor."""
    return _connector(path, read_only=read_only)()


def checkpoint(path: Path) -> bool:
    """Fold the write-ahead log of the file at ``path`` into it; False if a reader blocked it.

    For files whose connections are gone (after a stop): SQLite recovers the log on open.
    """
    conn = _connector(path, read_only=False)()
    try:
        busy, _, _ = conn.execute(CHECKPOINT).fetchone()
        return not busy
    finally:
        conn.close()
