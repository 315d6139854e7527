"""``POST /jobs``, ``GET /jobs/{job_id}``, ``POST /jobs/{job_id}/cancel`` (see ``docs/api.md``).

Who may see and cancel a job (:func:`roost.core.authz.may_see_job`): its parent session's
credential (``x-murmur-spawn-credential``); without one, a caller on this host whose uid owns the
job, or root from a process that is not inside a job. Unknown and not-yours are the same 404.
A launch without a credential (a top-level job) is never made for a process inside a job: a
capsule delegates with its own session, inside its envelope.

``GET /debug/loop-lag`` (loopback only) gives the daemon's event-loop lag samples for the storm
benchmark; ``?reset=1`` clears them, for the daemon's own user or root only: another local user
may read the samples but not erase the record of a stall.
"""

from __future__ import annotations

import os
import statistics

from aiohttp import web

from roost.core.errors import BadGateway, Conflict, Refused
from roost.core.ids import require_id
from roost.core.loopback import is_loopback_peer
from roost.core.wire import CREDENTIAL_HEADER, TASK_TRUST_HEADER
from roost.http.bodies.jobs import parse_launch
from roost.http.caller import caller_of
from roost.http.context import LAUNCHER, PROBES, REFEREE
from roost.http.middleware import read_json
from roost.http.peerjob import peer_in_job
from roost.services.launcher.service import Viewer

__all__ = ["LAUNCH_IN_JOB", "routes"]

routes = web.RouteTableDef()

LAUNCH_IN_JOB = (
    "a top-level job without a credential is launched only for the operator or a user in launch_uids, "
    "never for a process inside a job: a capsule delegates with its own session (roost-capsule delegate)"
)


@routes.post("/jobs")
async def launch(request: web.Request) -> web.Response:
    req = parse_launch(await read_json(request), traceparent=request.headers.get("traceparent"))
    credential = request.headers.get(CREDENTIAL_HEADER)
    if credential is None and caller_of(request).loopback and await peer_in_job(request):
        # Root inside a job is not the operator: a capsule's top-level launch would escape its
        # own spawn envelope (docs/security.md, threat E4).
        raise Refused(LAUNCH_IN_JOB, "in_job")
    task_trust = request.headers.get(TASK_TRUST_HEADER)
    if credential is not None and task_trust is not None and task_trust.strip().lower() != "trusted":
        req = req._replace(untrusted=True)  # delegated from an untrusted task: the child is untrusted too
    try:
        job = await request.app[LAUNCHER].launch(
            req, credential, loopback=is_loopback_peer(request.remote), uid=caller_of(request).uid
        )
    except BadGateway:
        # The credential was good when the spawn was granted (else the launch was refused). If
        # it names no running session now, the parent ended while its child was starting (the
        # child's /register is then refused): a conflict with the state, not a bad gateway.
        if credential and not _still_running(request, credential):
            raise Conflict(
                "the parent session ended while its child was starting, so the child was stopped; "
                "no job runs for this request"
            ) from None
        raise
    return web.json_response(job.view(), status=201)


def _still_running(request: web.Request, credential: str) -> bool:
    try:
        request.app[REFEREE].authenticate(credential)
    except Refused:
        return False
    return True


def viewer_of(request: web.Request) -> Viewer:
    """The caller as a job's owner check sees it: the kernel's uid, on this host or not, and (asked
    only for root without a credential) whether its process belongs to a job."""
    caller = caller_of(request)
    return Viewer(caller.uid, caller.loopback and is_loopback_peer(request.remote), lambda: peer_in_job(request))


@routes.get("/jobs/{job_id}")
async def get_job(request: web.Request) -> web.Response:
    job = await request.app[LAUNCHER].find(
        require_id("job_id", request.match_info["job_id"]), request.headers.get(CREDENTIAL_HEADER), viewer_of(request)
    )
    return web.json_response(job.view())


@routes.post("/jobs/{job_id}/cancel")
async def cancel_job(request: web.Request) -> web.Response:
    job = await request.app[LAUNCHER].cancel(
        require_id("job_id", request.match_info["job_id"]), request.headers.get(CREDENTIAL_HEADER), viewer_of(request)
    )
    return web.json_response(job.view())


@routes.get("/debug/loop-lag")
async def loop_lag(request: web.Request) -> web.Response:
    if not is_loopback_peer(request.remote):
        raise Refused("the loop-lag probe answers only this host")
    reset = bool(request.query.get("reset"))
    if reset:
        uid, me = caller_of(request).uid, os.geteuid()
        if uid not in (me, 0):
            raise Refused(f"only the daemon's own user (uid {me}) or root may reset the loop-lag samples")
    probes = request.app[PROBES]
    samples = sorted(probes.lag_samples)
    if reset:
        probes.lag_samples.clear()
    if not samples:
        return web.json_response({"samples": 0})
    q = statistics.quantiles(samples, n=100, method="inclusive") if len(samples) > 1 else [samples[0]] * 99
    return web.json_response(
        {
            "samples": len(samples),
            "p50_ms": round(q[49] * 1000, 3),
            "p99_ms": round(q[98] * 1000, 3),
            "max_ms": round(samples[-1] * 1000, 3),
        }
    )
