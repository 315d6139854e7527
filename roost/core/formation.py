"""``MURMUR_FORMATION_ID``: the formation a session belongs to, handed from a parent to its children.

Upstream (era G) hands a parent's formation id to every child it delegates to, and seed 000
forwards it into hooks (``murmur.formation_id`` on the root span): it is how the sessions launched
together for one task are correlated. The daemon launches children, so it does the handing on:
a child's id is its parent's (from the parent's ``/register``, which ``roost-capsule`` fills from
its own environment, or from the parent's job record), and an operator may give a top-level
launch one (``formation_id`` in ``POST /jobs``, ``roostctl spawn --formation-id``). The id groups;
it grants nothing: no authorization decision reads it.

The shape is upstream's and strict: ``frm_`` followed by exactly 32 lowercase hex digits.
Anything else is refused with upstream's reasons (E-RUN-044 at a launch), which never quote the
value.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

__all__ = ["FORMATION_ID_ENV", "env_refusal", "field_refusal", "formation_problem"]

FORMATION_ID_ENV: Final = "MURMUR_FORMATION_ID"
_PREFIX: Final = "frm_"
_DIGITS: Final = 32
_HEX: Final = frozenset("0123456789abcdef")


def formation_problem(value: str) -> str | None:
    """Why ``value`` is not a formation id (upstream's reason, never quoting it), or None."""
    if not value.startswith(_PREFIX):
        return "it does not start with 'frm_'"
    digits = value[len(_PREFIX) :]
    if len(digits) != _DIGITS:
        return "'frm_' must be followed by exactly 32 hex digits"
    if not set(digits) <= _HEX:
        return "it contains a character outside lowercase hex (0-9, a-f)"
    return None


def env_refusal(reason: str) -> str:
    """The E-RUN-044 sentence for a launch whose environment carries a malformed id."""
    return (
        f"E-RUN-044: MURMUR_FORMATION_ID is not a formation id: {reason}; a session that cannot tell which "
        "formation it belongs to would be grouped with the wrong one, so the launch is refused (unset it, "
        "or set it to frm_ followed by 32 lowercase hex digits)"
    )


def field_refusal(field: str, reason: str) -> str:
    """The 400 sentence for a request field carrying a malformed id."""
    return f"{field} is not a formation id: {reason}"
