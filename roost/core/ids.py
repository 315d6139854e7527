"""Identifiers: minting the daemon's own, and one grammar for every one a caller names.

Minted here: job, delegation, session and event ids, nonces and child suffixes, and a token's
16-hex id (the only form a token may be logged in).

Checked here: every identifier a caller names (session ids, job ids, delegation ids, capsule
names and versions) ends up in file names (a session's records directory, a child directory, a
registry path), in log lines and in traces, so each is checked at the edge before anything uses
it. The rule is deliberately plain: at most :data:`MAX_IDENTIFIER_BYTES` bytes of UTF-8, not
blank, and none of NUL, ``/``, ``\\``, ``..``, a lone ``.``, control characters (C0, DEL, C1)
or line/paragraph separators. Anything that passes is safe as one path component.
:func:`identifier_problem` says what is wrong (or ``None``); :func:`require_id` turns that into
a 400 sentence naming the field.

The one ``/`` allowed: an allow-list entry (``capabilities.spawn.allow``, the daemon's
``spawn_allow``) may name a capsule with the registry it comes from, ``<registry>/<name>``
(``local/worker``): exactly one ``/``, and each side an identifier by the rule above
(:func:`allow_entry_problem`). A capsule name itself never holds one, so it still makes one path
component; the entry is matched against names by :mod:`roost.core.allownames`.

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import threading
from typing import Final

from a2a.protocol.ids import prefixed, uuid7_hex
from roost.core.errors import BadRequest

__all__ = [
    "JOB_ID_RE",
    "MAX_IDENTIFIER_BYTES",
    "SESSION_ID_RE",
    "allow_entry_problem",
    "child_suffix",
    "delegation_id",
    "event_id",
    "identifier_problem",
    "is_identifier",
    "job_id",
    "nonce_hex",
    "require_id",
    "session_id",
    "token_id",
    "uuid7_hex",
]

JOB_ID_RE = re.compile(r"^job_[0-9a-f]{32}$")
SESSION_ID_RE = re.compile(r"^ses_[A-Za-z0-9_-]{1,120}$")


def event_id() -> str:
    return prefixed("evt")


def delegation_id() -> str:
    return prefixed("dlg")


def session_id() -> str:
    return prefixed("ses")


def job_id() -> str:
    """``job_<32 hex>`` (random, as the capsule I/O schema's examples show)."""
    return "job_" + secrets.token_hex(16)


_pool = bytearray()
_pool_lock = threading.Lock()


def nonce_hex() -> str:
    """16 CSPRNG bytes as 32 lowercase hex chars (token nonces, jti).

    Drawn from a small pool refilled 4 KiB at a time: ``os.urandom`` releases the GIL, and on
    the referee's hot path every release hands the interpreter to a busy worker thread.
    """
    return _pooled_hex(16)


def _pooled_hex(n: int) -> str:
    with _pool_lock:
        if len(_pool) < n:
            _pool.extend(os.urandom(4096))
        chunk = bytes(_pool[:n])
        del _pool[:n]
    return chunk.hex()


def child_suffix() -> str:
    """8 random bytes as 16 hex chars for ``.murmur/children/<name>-<16 hex>``."""
    return secrets.token_hex(8)


def token_id(token: str | bytes) -> str:
    """First 16 lowercase hex chars of sha256(token): the only form a token may be logged in."""
    data = token.encode("utf-8", "surrogateescape") if isinstance(token, str) else token
    return hashlib.sha256(data).hexdigest()[:16]


MAX_IDENTIFIER_BYTES: Final = 128
_SEPARATORS: Final = frozenset("\u2028\u2029")


def _is_control(ch: str) -> bool:
    o = ord(ch)
    return o < 0x20 or 0x7F <= o < 0xA0 or ch in _SEPARATORS


def identifier_problem(value: str) -> str | None:
    """What makes ``value`` unusable as an identifier, as the end of a sentence; None if fine."""
    if not value.strip():
        return "must not be empty"
    if "\x00" in value:
        return "must not contain a NUL byte"
    if "/" in value or "\\" in value:
        return "must not contain '/' or '\\'"
    if value == "." or ".." in value:
        return "must not be '.' or contain '..'"
    if any(_is_control(ch) for ch in value):
        return "must not contain control characters"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "must be valid UTF-8 text"
    if size > MAX_IDENTIFIER_BYTES:
        return f"must be at most {MAX_IDENTIFIER_BYTES} bytes long"
    return None


def allow_entry_problem(value: str) -> str | None:
    """What makes ``value`` unusable as an allow-list entry (an identifier, or
    ``<registry>/<identifier>``), as the end of a sentence; None if fine."""
    registry, sep, name = value.partition("/")
    if not sep:
        return identifier_problem(value)
    for part, what in ((registry, "its registry"), (name, "its name")):
        problem = identifier_problem(part)
        if problem is not None:
            return f"is <registry>/<name>, and {what} {problem}"
    return None


def is_identifier(value: object) -> bool:
    return isinstance(value, str) and identifier_problem(value) is None


def require_id(field: str, value: str) -> str:
    """``value`` if it is a valid identifier, else a 400 whose sentence names ``field``."""
    problem = identifier_problem(value)
    if problem is not None:
        raise BadRequest(f"{field} {problem}")
    return value
