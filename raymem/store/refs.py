"""References: opaque, stable, URL-safe names of stored records, whatever their kind.

``mem_<memory id>``, ``msg_<message id>``, ``epi_<episode id>``, ``wrk_<work item id>``
and ``blk_<block>_<key>``, where a block entry's key is the first 12 hex digits of the
SHA-256 of its normalised text: entries are addressed by their whole text, so the
key follows the text (a rewritten entry is a new reference). Ids are
percent-encoded, so a reference is safe in a URL path whatever an imported id
holds; the ids raymem makes are hex and appear as they are.
"""

import hashlib
import re
from typing import NamedTuple
from urllib.parse import quote, unquote

from raymem.errors import InvalidRef
from raymem.types import NAME_PATTERN

#: Prefix -> the kind of record a reference names.
KINDS = {
    "mem": "memory",
    "msg": "message",
    "epi": "episode",
    "wrk": "work_item",
    "blk": "block_entry",
}
ENTRY_KEY_DIGITS = 12  # 48 bits: a block holds dozens of entries, never a collision in practice
_ENTRY_KEY = re.compile(rf"^[0-9a-f]{{{ENTRY_KEY_DIGITS}}}$")
_BLOCK_NAME = re.compile(NAME_PATTERN)
_SAFE = "-._~"  # RFC 3986 unreserved characters besides letters and digits


class Ref(NamedTuple):
    """A parsed reference: its kind and the id (for a block entry: the block and the key)."""

    kind: str
    id: str
    block: str | None = None


def normalise(text: str) -> str:
    """The text an entry is addressed by: whitespace collapsed, lower case, trimmed."""
    return " ".join(text.split()).lower()


def entry_key(content: str) -> str:
    """The key of a block entry (or a work item's todo) in references: hash of its normal form."""
    return hashlib.sha256(normalise(content).encode()).hexdigest()[:ENTRY_KEY_DIGITS]


def _make(prefix: str, record_id: str) -> str:
    return f"{prefix}_{quote(record_id, safe=_SAFE)}"


def memory_ref(memory_id: str) -> str:
    return _make("mem", memory_id)


def message_ref(message_id: str) -> str:
    return _make("msg", message_id)


def episode_ref(episode_id: str) -> str:
    return _make("epi", episode_id)


def work_item_ref(item_id: str) -> str:
    return _make("wrk", item_id)


def block_entry_ref(block: str, content: str) -> str:
    return f"blk_{block}_{entry_key(content)}"


def parse_ref(text: str) -> Ref:
    """The kind and id a reference names.

    Raises:
        InvalidRef: ``text`` is not a reference of a known kind.
    """
    prefix, sep, rest = text.partition("_")
    kind = KINDS.get(prefix)
    if not sep or kind is None or not rest:
        raise InvalidRef(text)
    if kind != "block_entry":
        return Ref(kind, unquote(rest))
    block, sep, key = rest.rpartition("_")
    if not sep or not _BLOCK_NAME.match(block) or not _ENTRY_KEY.match(key):
        raise InvalidRef(text)
    return Ref(kind, key, block)
