"""API keys to tenants: the tenant comes from the key, never from the request."""

import hashlib
import hmac
import ipaddress

import msgspec

from raymem.config import Settings
from raymem.errors import Forbidden, ProfileNotFound, Unauthorized
from raymem.names import DEFAULT_TENANT


class Principal(msgspec.Struct, frozen=True):
    tenant: str
    profiles: tuple[str, ...] = ("*",)
    read_only: bool = False
    key_id: str = "anonymous"  # a short hash prefix, for per-key limits and logs

    def may_use(self, profile: str) -> bool:
        return "*" in self.profiles or profile in self.profiles

    def check(self, profile: str, *, write: bool) -> None:
        """Raise unless this key may use ``profile`` (and write to it when ``write``)."""
        if write and self.read_only:
            raise Forbidden("This API key is read-only")
        if not self.may_use(profile):
            # Indistinguishable from a missing profile: no existence leak.
            raise ProfileNotFound(profile)


class Authenticator:
    """Maps ``Authorization: Bearer <key>`` to a Principal, comparing hashes in constant time."""

    def __init__(self, settings: Settings) -> None:
        self._keys = [
            (
                bytes.fromhex(k.key_sha256),
                Principal(k.tenant, tuple(k.profiles), k.read_only, k.key_sha256[:12]),
            )
            for k in settings.auth.keys
        ]

    @property
    def open(self) -> bool:
        """No keys configured: one tenant, loopback only."""
        return not self._keys

    def authenticate(self, authorization: str | None) -> Principal:
        if self.open:
            return Principal(DEFAULT_TENANT)
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Missing API key: send 'Authorization: Bearer <key>'")
        digest = hashlib.sha256(token.strip().encode()).digest()
        found = None
        for key_hash, principal in self._keys:  # no early exit: same time for every key
            if hmac.compare_digest(digest, key_hash):
                found = principal
        if found is None:
            raise Unauthorized("Invalid API key")
        return found


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_listen_address(settings: Settings) -> None:
    """Refuse to serve beyond loopback without API keys.

    Raises:
        ValueError: the host is not a loopback address and no keys are configured.
    """
    if not settings.auth.keys and not is_loopback(settings.server.host):
        raise ValueError(
            f"Refusing to listen on {settings.server.host!r} without API keys: configure keys "
            "(RAYMEM_API_KEYS=tenant=key or [auth] in the config file) or listen on 127.0.0.1"
        )
