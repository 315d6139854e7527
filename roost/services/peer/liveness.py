"""Re-checking, after an ``await``, that the session a mint or fetch acts for still runs.

A mint reads a peer's agent card and resolves a path; a fetch waits for a peer's answer. The
session's credential was checked before those awaits, and the session may end during them
(deregistered, its lease lapsed, its parent ended). What was decided before an ``await`` is not
acted on after it unchecked: a mint or fetch whose session ended meanwhile is refused with the
credential refusal the same request would get now, and nothing is minted or stored.
"""

from __future__ import annotations

import structlog

from roost.core.errors import IdentityRefused
from roost.observe.events import ObservedError, Span
from roost.state.sessions import SessionRecord, SessionTable

__all__ = ["ensure_running"]

log = structlog.get_logger("roost.peer")


def ensure_running(table: SessionTable, rec: SessionRecord, span: Span, step: str) -> None:
    """Raise :class:`IdentityRefused` (the span finished as failed) when ``rec`` is no longer the
    running session of its id."""
    if table.running_session(rec.session_id) is rec:
        return
    span.failed(ObservedError(name="SessionEnded", category="authentication", code="identity", status_code=403))
    log.info("peer_session_ended_meanwhile", session_id=rec.session_id, step=step)
    raise IdentityRefused()
