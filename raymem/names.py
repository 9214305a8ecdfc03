"""Names of tenants, profiles and sessions: the one rule for them, shared by every layer.

A name becomes a directory and part of an actor's name, so it is restricted to
a safe alphabet and may not start with a dot (which also keeps the service's own
files, such as the catalog's ``.catalog`` directory, apart from every tenant's).
"""

import re

from raymem.errors import InvalidRequest
from raymem.types import NAME_PATTERN

DEFAULT_TENANT = "default"  # the one tenant of a server without API keys

NAME = re.compile(NAME_PATTERN)
ID = re.compile(r"[0-9a-f]{32}")  # dream and proposal ids, as the server makes them (uuid4 hex)


def validate_name(value: str, what: str = "profile") -> str:
    """Return ``value`` if it is a valid name.

    Raises:
        InvalidRequest: not 1-128 letters, digits and ``._-``, or starting with a dot.
    """
    if not NAME.fullmatch(value):
        raise InvalidRequest(
            f"Invalid {what} name {value[:140]!r}: use 1-128 letters, digits, '.', '_' or '-',"
            " not starting with a dot"
        )
    return value


def validate_id(value: str, what: str) -> str:
    """Return ``value`` if it is an id the server made (a dream's also names its file).

    Raises:
        InvalidRequest: not 32 lowercase hex digits.
    """
    if not ID.fullmatch(value):
        raise InvalidRequest(f"Invalid {what} id {value[:40]!r}: ids are 32 hex digits")
    return value
