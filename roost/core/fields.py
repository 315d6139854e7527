"""Field readers for JSON request bodies: one sentence per mistake, the same for every route.

A route parses its body into a typed request at the edge; each reader here takes one field and
either returns it typed or raises :class:`~roost.core.errors.BadRequest` with the sentence a
client sees (upstream's wording, byte for byte: ``invalid JSON: missing field 'name'``,
``invalid JSON: field 'name' must be a string``). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from roost.core.errors import BadRequest
from roost.core.ids import require_id

__all__ = ["Body", "optional_str", "require_ident", "require_str"]

Body = Mapping[str, object]


def require_str(body: Body, key: str) -> str:
    if key not in body:
        raise BadRequest(f"invalid JSON: missing field '{key}'")
    value = body[key]
    if not isinstance(value, str):
        raise BadRequest(f"invalid JSON: field '{key}' must be a string")
    return value


def require_ident(body: Body, key: str) -> str:
    """A string field that must pass the identifier grammar (:mod:`roost.core.ids`)."""
    return require_id(key, require_str(body, key))


def optional_str(body: Body, key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"invalid JSON: field '{key}' must be a string")
    return value
