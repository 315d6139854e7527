"""Time-ordered identifiers (UUIDv7, RFC 9562) shared by every record writer.

Python 3.11 has no ``uuid.uuid7``; ids minted here sort by mint time and carry their own
millisecond timestamp, which is what trace readers and ``evt_``/``tsk_`` consumers rely on.
"""

from __future__ import annotations

import os
import threading
import time

_lock = threading.Lock()
_last_ms = 0
_seq = 0

# Identifiers are not secrets, but they are unguessable: their random bits come from the OS
# (``os.urandom``), read a page at a time instead of one system call per id. The buffer is
# emptied in a forked child, so parent and child never hand out the same bytes.
_POOL_BYTES = 4096
_pool = b""
_pos = 0


def _reset_pool() -> None:
    global _pool, _pos
    _pool, _pos = b"", 0


os.register_at_fork(after_in_child=_reset_pool)


def _take(n: int) -> bytes:
    """``n`` random bytes from the pool (call with ``_lock`` held)."""
    global _pool, _pos
    pos = _pos
    if pos + n > len(_pool):
        _pool, pos = os.urandom(_POOL_BYTES), 0
    _pos = pos + n
    return _pool[pos : pos + n]


def random_bytes(n: int) -> bytes:
    """``n`` (at most 4096) random bytes from the OS, for identifiers (trace and span ids too)."""
    with _lock:
        return _take(n)


def uuid7_hex() -> str:
    """Return a UUIDv7 as 32 lowercase hex chars, monotonic within this process."""
    global _last_ms, _seq
    with _lock:
        entropy = _take(10)  # 8 random bytes, 2 for a fresh sequence start
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            _seq += 1
            if _seq > 0xFFF:
                ms += 1
                _seq = 0
        else:
            _seq = (entropy[8] << 8 | entropy[9]) & 0x3FF
        _last_ms = ms
        seq = _seq
        stamp = _ms_hex(ms)
    # 48 bits of ms, version 7, 12 bits of sequence, variant 0b10, 62 random bits. The variant
    # byte (b & 0x3F) | 0x80 is "89ab"[b >> 4 & 3] followed by b's low hex digit (h[1]).
    h = entropy.hex()
    return f"{stamp}{_VERSION_SEQ[seq]}{_VARIANT[entropy[0] >> 4 & 3]}{h[1:16]}"


def _ms_hex(ms: int) -> str:
    """The 12 hex digits of the millisecond field (call with ``_lock`` held): formatted once per
    millisecond, as a busy door mints several ids in each."""
    global _stamp_ms, _stamp
    if ms != _stamp_ms:
        _stamp_ms, _stamp = ms, f"{ms & 0xFFFFFFFFFFFF:012x}"
    return _stamp


_stamp_ms = -1
_stamp = ""
_VERSION_SEQ = [f"7{seq:03x}" for seq in range(0x1000)]
"""The version digit and the 12-bit sequence as text, by sequence: a lookup, not a format."""


def prefixed_pair(first: str, second: str) -> tuple[str, str]:
    """``(prefixed(first), prefixed(second))``, minted together (a door mints a task and its
    context per request: one lock, one clock read)."""
    global _last_ms, _seq
    with _lock:
        entropy = _take(20)
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
        else:
            _seq = (entropy[18] << 8 | entropy[19]) & 0x3FF
        if _seq + 2 > 0xFFF:
            ms += 1
            _seq = 0
        _last_ms = ms
        seq = _seq + 1
        _seq = seq + 1
        stamp = _ms_hex(ms)
    # As uuid7_hex, both from one hex string of the entropy.
    h = entropy.hex()
    return (
        f"{first}_{stamp}{_VERSION_SEQ[seq]}{_VARIANT[entropy[0] >> 4 & 3]}{h[1:16]}",
        f"{second}_{stamp}{_VERSION_SEQ[seq + 1]}{_VARIANT[entropy[9] >> 4 & 3]}{h[19:34]}",
    )


_VARIANT = "89ab"


def prefixed(prefix: str) -> str:
    """``<prefix>_<uuid7 hex>``: the id shape murmur uses for ses_, tsk_, ctx_, evt_, dlg_, req_, msg_."""
    return f"{prefix}_{uuid7_hex()}"
