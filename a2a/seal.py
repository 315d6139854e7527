"""The relay's seal: a MAC that lets a door believe the origin and trust a relayed request carries.

Why: a door on loopback can be reached by any local process, so ``x-murmur-task-origin`` /
``x-murmur-task-trust`` alone prove nothing. The daemon's relay stamps them *and* a seal, an
HMAC-SHA256 over the stamped values under a key that only the daemon and the receiving session
hold (handed to the session when it registers). The door believes the headers only when the
seal verifies; anything else is untrusted (``docs/security.md``).

Header: ``x-murmur-task-seal: v1.<sender session id>.<64 hex>``. The MAC covers the version,
the sender, the receiving session, origin, trust, traceparent and the subject (the message id
of a send, the task id of a get or cancel), each separated by a newline.
"""

from __future__ import annotations

import hashlib
import hmac

SEAL_HEADER = "x-murmur-task-seal"
_VERSION = "v1"


def _mac(key: bytes, sender: str, receiver: str, origin: str, trust: str, tp: str, subject: str) -> str:
    text = "\n".join((_VERSION, sender, receiver, origin.lower(), trust.lower(), tp.lower(), subject))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def seal(key: bytes, *, sender: str, receiver: str, origin: str, trust: str, traceparent: str, subject: str) -> str:
    """The header value for a request from session ``sender`` to session ``receiver``."""
    return f"{_VERSION}.{sender}.{_mac(key, sender, receiver, origin, trust, traceparent, subject)}"


def verify(
    key: bytes | None,
    header: str | None,
    *,
    receiver: str,
    origin: str | None,
    trust: str | None,
    traceparent: str | None,
    subject: str,
) -> str | None:
    """The sender's session id when ``header`` is a valid seal for these values, else None."""
    if key is None or not header or origin is None or trust is None:
        return None
    version, _, rest = header.strip().partition(".")
    sender, _, digest = rest.rpartition(".")
    if version != _VERSION or not sender or len(digest) != 64:
        return None
    expected = _mac(key, sender, receiver, origin, trust, traceparent or "", subject)
    return sender if hmac.compare_digest(expected, digest.lower()) else None


def door_key(daemon_secret: bytes, session_id: str) -> bytes:
    """The seal key of one receiving session, derived so the daemon stores nothing per session."""
    return hmac.new(daemon_secret, b"murmur-door-seal\n" + session_id.encode(), hashlib.sha256).digest()
