"""The admin socket's own bodies: ``POST /drain`` and ``POST /sessions/{id}/end``.

Both bodies are optional (``roostctl`` may send none) and each has one field; the admin app reads
them here like every other body, so a mistake reads the same way wherever it is made.
"""

from __future__ import annotations

from roost.core.errors import BadRequest
from roost.core.fields import Body, is_number

__all__ = ["OPERATOR_REASON", "parse_drain", "parse_end_reason"]

OPERATOR_REASON = "ended by the operator"
MAX_REASON_CHARS = 500


def parse_drain(body: Body) -> float | None:
    """``POST /drain``: how long to wait for running work before stopping anyway (None: no bound)."""
    timeout = body.get("timeout_secs")
    if timeout is not None and (not is_number(timeout) or timeout < 0):
        raise BadRequest("timeout_secs must be a number of seconds, zero or more")
    return timeout


MAX_GRACE_SECS = 7 * 86400


def parse_rotate(body: Body) -> float:
    """``POST /keys/rotate``: how long the replaced key keeps verifying (0: revoke at once)."""
    grace = body.get("grace_secs", 0)
    if not is_number(grace) or not 0 <= grace <= MAX_GRACE_SECS:
        raise BadRequest(f"grace_secs must be a number of seconds from 0 to {MAX_GRACE_SECS}")
    return float(grace)


def parse_end_reason(body: Body) -> str:
    """``POST /sessions/{id}/end``: why the operator ends the session (recorded with it)."""
    reason = body.get("reason", OPERATOR_REASON)
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON_CHARS:
        raise BadRequest(f"reason must be a non-empty string of at most {MAX_REASON_CHARS} characters")
    return reason
