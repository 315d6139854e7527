"""One grammar for every identifier a caller names: session ids, job ids, delegation ids,
capsule names and versions.

Identifiers end up in file names (a session's records directory, a child directory, a registry
path), in log lines and in traces, so each is checked here, at the edge, before anything uses
it. The rule is deliberately plain: at most :data:`MAX_IDENTIFIER_BYTES` bytes of UTF-8, not
blank, and none of NUL, ``/``, ``\\``, ``..``, a lone ``.``, control characters (C0, DEL, C1)
or line/paragraph separators. Anything that passes is safe as one path component.

Pure: no I/O. :func:`identifier_problem` says what is wrong (or ``None``); :func:`require_id`
turns that into a 400 sentence naming the field.
"""

from __future__ import annotations

from typing import Final

from roost.errors import BadRequest

__all__ = ["MAX_IDENTIFIER_BYTES", "identifier_problem", "is_identifier", "require_id"]

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


def is_identifier(value: object) -> bool:
    return isinstance(value, str) and identifier_problem(value) is None


def require_id(field: str, value: str) -> str:
    """``value`` if it is a valid identifier, else a 400 whose sentence names ``field``."""
    problem = identifier_problem(value)
    if problem is not None:
        raise BadRequest(f"{field} {problem}")
    return value
