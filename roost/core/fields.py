"""Field readers for JSON request bodies: one sentence per mistake, the same for every route.

A route parses its body into a typed request at the edge (:mod:`roost.http.bodies`); each
reader here takes one field and either returns it typed or raises
:class:`~roost.core.errors.BadRequest` with the sentence a client sees (upstream's wording, byte
for byte: ``invalid JSON: missing field 'name'``, ``invalid JSON: field 'name' must be a
string``). Each sentence is written once, here; a parser that checks a field in its own loop
(the relay's, on the hot path) raises :func:`missing` or :func:`not_a_string` itself. Pure: no
I/O (``os.path`` only computes on the string).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TypeGuard

from roost.core.errors import BadRequest
from roost.core.formation import field_refusal, formation_problem
from roost.core.ids import require_id

__all__ = [
    "Body",
    "is_number",
    "missing",
    "nonblank_str",
    "not_a_string",
    "not_absolute",
    "optional_abspath",
    "optional_str",
    "require_ident",
    "require_str",
]

Body = Mapping[str, object]


def missing(key: str) -> BadRequest:
    """A required field is absent."""
    return BadRequest(f"invalid JSON: missing field '{key}'")


def not_a_string(key: str) -> BadRequest:
    """A field that must be a string is something else."""
    return BadRequest(f"invalid JSON: field '{key}' must be a string")


def not_absolute(key: str) -> str:
    """The sentence for a path field that is not an absolute path (a disk check says it too)."""
    return f"{key} must be an absolute path"


def require_str(body: Body, key: str, *, null_is_missing: bool = False) -> str:
    """A required string field. A JSON ``null`` is "must be a string" (upstream's serde), or
    "missing" with ``null_is_missing`` (``POST /jobs``, roost's own route, has always said so)."""
    if key not in body:
        raise missing(key)
    value = body[key]
    if not isinstance(value, str):
        raise missing(key) if value is None and null_is_missing else not_a_string(key)
    return value


def require_ident(body: Body, key: str) -> str:
    """A string field that must pass the identifier grammar (:mod:`roost.core.ids`)."""
    return require_id(key, require_str(body, key))


def optional_str(body: Body, key: str) -> str | None:
    """A string field that may be absent or ``null`` (both read as None)."""
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise not_a_string(key)
    return value


def optional_abspath(body: Body, key: str) -> str | None:
    """An absolute path without NUL bytes, normalised; None when absent or ``null``."""
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not os.path.isabs(value) or "\x00" in value:
        raise BadRequest(not_absolute(key))
    return os.path.normpath(value)


def optional_formation(body: Body, key: str) -> str | None:
    """A formation id (``frm_`` + 32 lowercase hex; roost/core/formation.py); None when absent or ``null``."""
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{key} must be a string")
    problem = formation_problem(value)
    if problem is not None:
        raise BadRequest(field_refusal(key, problem))
    return value


def nonblank_str(body: Body, key: str) -> str | None:
    """The field when it is a string with more than whitespace in it, else None (the caller
    says what a missing one means: the peer plane answers with its own coded refusal)."""
    value = body.get(key)
    return value if isinstance(value, str) and value.strip() else None


def is_number(value: object) -> TypeGuard[int | float]:
    """A JSON number: an int or a float, and not a boolean (``True`` is an ``int`` to Python)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
