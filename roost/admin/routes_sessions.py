"""Admin routes for sessions and the delegation tree.

``GET /sessions?state=running|complete|failed|all`` (default ``running``) → ``{"sessions": [...]}``
``GET /sessions/{session_id}``  → one session, with its live children's ids
``POST /sessions/{session_id}/end`` ``{"reason"?}`` → ends it (200 the record, 404, 409 ended)
``GET /tree?state=...``         → ``{"roots": [{session, children: [...]}]}`` (default: every session
                                  that is running or has a running ancestor or descendant)
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
from aiohttp import web

from roost.admin import views
from roost.admin.context import TABLE
from roost.core.admin_models import SessionDetail, SessionList, TreeAnswer
from roost.core.errors import BadRequest, Conflict, NotFound
from roost.core.ids import require_id
from roost.core.wire import SESSION_STATES
from roost.http.bodies.admin import parse_end_reason
from roost.http.context import LAUNCHER, REFEREE
from roost.http.middleware import read_json
from roost.state.sessions import SessionRecord

__all__ = ["routes"]

routes = web.RouteTableDef()
log = structlog.get_logger("roost.admin")
_STATES = (*SESSION_STATES, "all")


def _state(request: web.Request, default: str) -> str:
    state = request.query.get("state", default)
    if state not in _STATES:
        raise BadRequest(f"state must be one of {', '.join(_STATES)}")
    return state


@routes.get("/sessions")
async def sessions(request: web.Request) -> web.Response:
    state = _state(request, "running")
    table = request.app[TABLE]
    recs = [r for r in table.sessions.values() if state == "all" or r.status == state]
    recs.sort(key=lambda r: (r.created_ms, r.session_id))
    stopped = _stopped(request)
    answer: SessionList = {
        "sessions": [views.session_view(r, table.live_children(r.session_id), stopped(r)) for r in recs]
    }
    return web.json_response(answer)


def _stopped(request: web.Request) -> Callable[[SessionRecord], str | None]:
    """How the job of a session was stopped by someone (an operator, its parent, a deadline), so
    a session that ended because of it is not shown as if it had failed on its own."""
    jobs = request.app[LAUNCHER].jobs

    def why(rec: SessionRecord) -> str | None:
        job = jobs.get(rec.job_id) if rec.job_id is not None else None
        return job.reason if job is not None and job.final and job.stop_reason is not None else None

    return why


@routes.post("/sessions/{session_id}/end")
async def end_session(request: web.Request) -> web.Response:
    """End a running session with a recorded reason: its children's lifelines close, and an
    observation event (``roost.session.end``) says so. 404 unknown, 409 already ended."""
    referee, table = request.app[REFEREE], request.app[TABLE]
    reason = parse_end_reason(await read_json(request) if request.can_read_body else {})
    sid = require_id("session_id", request.match_info["session_id"])
    rec = table.running_session(sid)
    if rec is None:
        known = await referee.lookup(sid)
        rec = table.running_session(sid)  # it may have registered during the lookup
        if rec is None and known is None:
            raise NotFound("session not found")
        if rec is None:
            raise Conflict(f"session {sid} has already ended ({known.status if known else 'ended'})")
    # No await between the check above and the end: a concurrent end finds it ended.
    await referee.end_session(rec, "failed", reason)
    log.info("session_ended_by_operator", session_id=sid, reason=reason)
    return web.json_response(views.session_view(rec, table.live_children(sid)))


@routes.get("/sessions/{session_id}")
async def session(request: web.Request) -> web.Response:
    table = request.app[TABLE]
    rec = await request.app[REFEREE].lookup(require_id("session_id", request.match_info["session_id"]))
    if rec is None:
        raise NotFound("session not found")
    children = sorted(r.session_id for r in table.sessions.values() if r.parent_id == rec.session_id)
    view = views.session_view(rec, table.live_children(rec.session_id), _stopped(request)(rec))
    body: SessionDetail = {**view, "children": children}
    return web.json_response(body)


def _with_family(recs: dict[str, SessionRecord], keep: set[str]) -> set[str]:
    """``keep`` plus every ancestor of each kept session, so a running child is shown under its root."""
    out = set(keep)
    for sid in keep:
        parent = recs[sid].parent_id
        seen = 0
        while parent is not None and parent in recs and parent not in out and seen < 10_000:
            out.add(parent)
            parent = recs[parent].parent_id
            seen += 1
    return out


@routes.get("/tree")
async def tree(request: web.Request) -> web.Response:
    state = _state(request, "running")
    recs = request.app[TABLE].sessions
    if state == "all":
        chosen = set(recs)
    else:
        chosen = _with_family(recs, {sid for sid, r in recs.items() if r.status == state})
        # Children of a shown session are shown too (a finished worker under a running orchestrator).
        chosen |= {sid for sid, r in recs.items() if r.parent_id in chosen}
    jobs = request.app[LAUNCHER].jobs.values()
    job_states = {j.job_id: str(j.state) for j in jobs}
    job_ends = {j.job_id: (j.outcome, j.reason) for j in jobs if j.final}
    answer: TreeAnswer = {"roots": views.tree((recs[s] for s in chosen), job_states=job_states, job_ends=job_ends)}
    return web.json_response(answer)
