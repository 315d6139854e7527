"""W3C Trace Context level 1: parse, continue and mint ``traceparent``; validate ``tracestate``.

Why pure and strict: murmur stores the caller's header raw and parses it leniently, which lets a
malformed or all-zero id leak into trace records. Here the raw header is still recorded by the
door for parity, but the task's own trace context only ever comes from :func:`parse`, which
follows the W3C rules exactly (an invalid header means "start a new trace"). No clock; the random
bits of a new id come from :func:`a2a.protocol.ids.random_bytes`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from a2a.protocol.ids import random_bytes

_HEX = frozenset("0123456789abcdef")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16

# tracestate (W3C Trace Context): simple or multi-tenant keys, printable values. Always
# `fullmatch`, never `match` + `$`: `$` also matches before a trailing newline.
_KEY = re.compile(r"[a-z0-9][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13}")
_VALUE = re.compile(r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")
MAX_TRACESTATE_MEMBERS = 32


def _is_hex(value: str) -> bool:
    return all(c in _HEX for c in value)


class TraceParent(NamedTuple):
    """A valid ``traceparent``: version, trace id, parent (span) id, flags — all lowercase hex.

    A named tuple, not a frozen dataclass: one is built per request a door admits or the relay
    sends, and a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``
    (twice the instructions). Built here with :data:`_make`, which skips the generated ``__new__``.
    """

    version: str
    trace_id: str
    parent_id: str
    flags: str

    @property
    def sampled(self) -> bool:
        return bool(int(self.flags, 16) & 0x01)

    def format(self) -> str:
        """The header value. We only ever emit version ``00``, whatever version we parsed."""
        return f"00-{self.trace_id}-{self.parent_id}-{self.flags}"

    def child(self) -> TraceParent:
        """Continue this trace: same trace id and flags, a fresh span id of our own."""
        return _make(TraceParent, ("00", self.trace_id, new_span_id(), self.flags))

    def __str__(self) -> str:
        return self.format()


_make = tuple.__new__


def new_trace_id() -> str:
    while True:
        value = random_bytes(16).hex()
        if value != _ZERO_TRACE:
            return value


def new_span_id() -> str:
    while True:
        value = random_bytes(8).hex()
        if value != _ZERO_SPAN:
            return value


def new() -> TraceParent:
    """Start a new trace: random ids (never all zero), flags ``01`` (sampled)."""
    raw = random_bytes(24).hex()
    trace_id, span_id = raw[:32], raw[32:]
    if trace_id == _ZERO_TRACE:
        trace_id = new_trace_id()
    if span_id == _ZERO_SPAN:
        span_id = new_span_id()
    return _make(TraceParent, ("00", trace_id, span_id, "01"))


def parse(value: str | None) -> TraceParent | None:
    """Parse a ``traceparent`` header value; ``None`` when absent or invalid (restart the trace)."""
    if not value or len(value) < 55:
        return None
    version = value[0:2]
    if value[2] != "-" or not _is_hex(version) or version == "ff":
        return None
    if version == "00" and len(value) != 55:
        return None
    trace_id, parent_id, flags = value[3:35], value[36:52], value[53:55]
    if value[35] != "-" or value[52] != "-":
        return None
    if len(value) > 55 and value[55] != "-":  # future versions: fields end with "-" or the value
        return None
    if not (_is_hex(trace_id) and _is_hex(parent_id) and _is_hex(flags)):
        return None
    if trace_id == _ZERO_TRACE or parent_id == _ZERO_SPAN:
        return None
    return _make(TraceParent, (version, trace_id, parent_id, flags))


def parse_tracestate(value: str | None) -> list[tuple[str, str]] | None:
    """Parse ``tracestate`` into ordered (key, value) members; ``None`` when invalid.

    An empty or absent header is valid and yields ``[]``. Empty list members (``a=1,,b=2``) are
    allowed by the spec and skipped. Duplicate keys, more than 32 members, bad keys or values
    make the whole header invalid — which never affects ``traceparent``.
    """
    if value is None:
        return []
    members: list[tuple[str, str]] = []
    seen: set[str] = set()
    for raw in value.split(","):
        item = raw.strip(" \t")
        if not item:
            continue
        key, sep, val = item.partition("=")
        if not sep or not _KEY.fullmatch(key) or not _VALUE.fullmatch(val) or key in seen:
            return None
        seen.add(key)
        members.append((key, val))
    if len(members) > MAX_TRACESTATE_MEMBERS:
        return None
    return members


def valid_tracestate(value: str | None) -> bool:
    return parse_tracestate(value) is not None
