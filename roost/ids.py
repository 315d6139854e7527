"""Identifier minting for the daemon's own records (job, delegation, session, event ids)."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import threading

from a2a.ids import prefixed, uuid7_hex

__all__ = [
    "JOB_ID_RE",
    "SESSION_ID_RE",
    "child_suffix",
    "delegation_id",
    "event_id",
    "job_id",
    "nonce_hex",
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
