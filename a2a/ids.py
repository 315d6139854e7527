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


def uuid7_hex() -> str:
    """Return a UUIDv7 as 32 lowercase hex chars, monotonic within this process."""
    global _last_ms, _seq
    entropy = os.urandom(10)  # one read: 8 random bytes, 2 for a fresh sequence start
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            _seq += 1
            if _seq > 0xFFF:
                ms += 1
                _seq = 0
        else:
            _seq = int.from_bytes(entropy[8:], "big") & 0x3FF
        _last_ms = ms
        seq = _seq
    rand = int.from_bytes(entropy[:8], "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= (seq & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand
    return f"{value:032x}"


def prefixed(prefix: str) -> str:
    """``<prefix>_<uuid7 hex>``: the id shape murmur uses for ses_, tsk_, ctx_, evt_, dlg_, req_, msg_."""
    return f"{prefix}_{uuid7_hex()}"
