"""Registration approvals for top-level jobs whose child runs on another node.

From another host, ``/register`` needs an approval (roost/http/authz.py): a top-level session
registers only on the daemon's own host. A top-level job the Ray backend placed on another node
is still the daemon's own launch, so its child gets what a delegated child gets: a single-use
approval bound to that job, on its stdin (never argv, environment or a log), sent back in
``x-murmur-spawn-approval``. Redeeming it registers the session top-level (no parent), as the
job's uid, linked to the job; it is spent at the first redeem and lapses when the job stops
starting. It lives in memory only: a daemon that restarts while the child starts has no record
of it, and the child's registration is refused like any unknown approval.
"""

from __future__ import annotations

import hmac
import secrets

from roost.core import ids

__all__ = ["TICKET_PREFIX", "RegistrationTickets", "is_ticket"]

TICKET_PREFIX = "mra1."


def is_ticket(value: str) -> bool:
    """Whether an approval header carries a registration approval of this module's kind."""
    return value.startswith(TICKET_PREFIX)


class RegistrationTickets:
    """The unspent registration approvals, by job id."""

    def __init__(self) -> None:
        self._secrets: dict[str, str] = {}

    def mint(self, job_id: str) -> str:
        secret = secrets.token_urlsafe(24)
        self._secrets[job_id] = secret
        return f"{TICKET_PREFIX}{job_id}.{secret}"

    def redeem(self, ticket: str) -> str | None:
        """The job the ticket was minted for, once; None for anything else (forged, spent)."""
        job_id, _, secret = ticket.removeprefix(TICKET_PREFIX).partition(".")
        if not ids.JOB_ID_RE.match(job_id):
            return None
        known = self._secrets.get(job_id)
        if known is None or not hmac.compare_digest(known.encode(), secret.encode()):
            return None
        del self._secrets[job_id]
        return job_id

    def drop(self, job_id: str) -> None:
        """The job is past starting: its ticket, if unspent, lapses."""
        self._secrets.pop(job_id, None)
