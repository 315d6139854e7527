"""The daemon's seal: a MAC that lets a door believe the origin and trust a request carries.

Why: a door on loopback can be reached by any local process, so ``x-murmur-task-origin`` /
``x-murmur-task-trust`` alone prove nothing. The daemon stamps them *and* a seal, an
HMAC-SHA256 over the stamped values under a key that only the daemon and the receiving session
hold (handed to the session when it registers). The door believes the headers only when the
seal verifies; anything else is untrusted (``docs/security.md``, "Sealed origin and trust").
The daemon seals what its relay forwards and every completion of a child it launched (a child
never holds a key; its completion is delivered by the daemon's launcher).

Header: ``x-murmur-task-seal: v2.<sender session id>.<64 hex>``. The MAC covers the version,
the sender, the receiving session, origin, trust, traceparent and the subject, each separated
by a newline. The subject of a send is :func:`send_subject` — the message id and a digest of
what the message says (context, task, delegation id, parts) — so a sealed message replayed
with another body, into another context or for another delegation no longer verifies; the
subject of a get or cancel is the task id.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import orjson

from a2a.protocol.models import Message

__all__ = ["SEAL_HEADER", "door_key", "seal", "send_subject", "verify"]

SEAL_HEADER = "x-murmur-task-seal"
_VERSION = "v2"


_KEYED: dict[bytes, hmac.HMAC] = {}
"""An HMAC-SHA256 already keyed, per key: copying one skips the key schedule and the digest's
lookup that a one-shot ``hmac.digest`` repeats on every seal (a door has one key, the daemon one
per receiving session)."""


def _mac(key: bytes, sender: str, receiver: str, origin: str, trust: str, tp: str, subject: str) -> str:
    text = "\n".join((_VERSION, sender, receiver, origin.lower(), trust.lower(), tp.lower(), subject))
    keyed = _KEYED.get(key)
    if keyed is None:
        if len(_KEYED) >= 1024:
            _KEYED.clear()
        keyed = _KEYED[key] = hmac.new(key, digestmod=hashlib.sha256)
    mac = keyed.copy()
    mac.update(text.encode("utf-8", "surrogatepass"))
    return mac.hexdigest()


def _part(part: Any) -> list[Any]:
    file = part.file
    return [
        part.kind,
        part.text,
        None if file is None else [file.uri, file.name, file.mime_type],
        part.data,
    ]


def send_subject(message: Message, delegation_id: str | None = None) -> str:
    """What a send's seal covers: the message id, then a sha256 over everything the message says.

    The digest is over a canonical JSON array (sorted keys, no spaces; orjson, or the standard
    library's ASCII form for what orjson cannot encode) of the context id, the task id, the
    delegation id (``x-murmur-delegation-id``, for a completion) and each part's kind, text,
    file reference and data — the fields both A2A dialects carry unchanged.
    """
    body = [message.context_id, message.task_id, delegation_id or None, [_part(p) for p in message.parts]]
    try:
        canon = orjson.dumps(body, default=str, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):  # a lone surrogate, an integer past 64 bits
        canon = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode()
    return f"{message.message_id}\n{hashlib.sha256(canon).hexdigest()}"


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
    if version != _VERSION or not sender or len(digest) != 64 or not digest.isascii():
        return None
    expected = _mac(key, sender, receiver, origin, trust, traceparent or "", subject)
    return sender if hmac.compare_digest(expected, digest.lower()) else None


def door_key(daemon_secret: bytes, session_id: str) -> bytes:
    """The seal key of one receiving session, derived so the daemon stores nothing per session."""
    return hmac.new(daemon_secret, b"murmur-door-seal\n" + session_id.encode(), hashlib.sha256).digest()
