"""``POST /jobs``, ``GET /jobs/{job_id}``, ``POST /jobs/{job_id}/cancel`` (see ``docs/api.md``).

Who may see a job: a delegated job answers only its parent session's credential
(``x-murmur-spawn-credential``); a top-level job has no credential, so it answers callers on this
host (loopback) — the same callers that may launch one. Unknown and not-yours are the same 404.

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
from roost.core.wire import CREDENTIAL_HEADER
from roost.http.bodies.jobs import parse_launch
from roost.http.caller import caller_of
from roost.http.context import LAUNCHER, PROBES, REFEREE
from roost.http.middleware import read_json

__all__ = ["routes"]

routes = web.RouteTableDef()


@routes.post("/jobs")
async def launch(request: web.Request) -> web.Response:
    req = parse_launch(await read_json(request), traceparent=request.headers.get("traceparent"))
    credential = request.headers.get(CREDENTIAL_HEADER)
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


@routes.get("/jobs/{job_id}")
async def get_job(request: web.Request) -> web.Response:
    job = await request.app[LAUNCHER].find(
        require_id("job_id", request.match_info["job_id"]),
        request.headers.get(CREDENTIAL_HEADER),
        loopback=is_loopback_peer(request.remote),
    )
    return web.json_response(job.view())


@routes.post("/jobs/{job_id}/cancel")
async def cancel_job(request: web.Request) -> web.Response:
    job = await request.app[LAUNCHER].cancel(
        require_id("job_id", request.match_info["job_id"]),
        request.headers.get(CREDENTIAL_HEADER),
        loopback=is_loopback_peer(request.remote),
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
