"""Decode a request body to the value the stdlib's ``json.loads`` gives, several times faster.

orjson does the common case. Where the two disagree the stdlib decides, so answers and error
sentences do not depend on which parser ran: orjson refuses lone surrogate escapes, NaN and
Infinity, out-of-range floats, a UTF-8 byte-order mark and the UTF-16/32 encodings the stdlib
sniffs (all of which fall back), and reads an integer wider than 64 bits as a float (so a body
with a run of 19 or more digits anywhere is handed to the stdlib at once).

The one difference left is depth: the stdlib gives up (``RecursionError``) somewhere near the
interpreter's recursion limit, which a body then gets as "nested too deeply"; orjson reads up
to 1024 levels.
"""

from __future__ import annotations

from a2a.protocol.jsonrpc import loads

__all__ = ["BodyError", "decode_body"]


class BodyError(ValueError):
    """The body is not JSON; ``str()`` is the stdlib's description of why."""


def decode_body(raw: bytes) -> object:
    """The JSON value of ``raw``, as ``json.loads(raw)`` would return it, or :class:`BodyError`.

    :func:`a2a.protocol.jsonrpc.loads` does the parsing (orjson, or the stdlib wherever the two differ);
    this gives its refusals the stdlib's sentence.
    """
    try:
        return loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BodyError(str(exc)) from None
    except RecursionError:
        raise BodyError("nested too deeply") from None
