"""Admin routes for jobs: list, show, launch top-level, cancel, and the reconcile report.

``GET /jobs?state=<job state>``  → ``{"jobs": [...]}``
``GET /jobs/{job_id}``           → the job
``POST /jobs``                   → ``{name, version, task, workdir?, deadline_secs?}``: a top-level launch
                                   on the operator's behalf (``--spawn-allow`` still applies); 201
``POST /jobs/{job_id}/cancel``   → the job after the cancel was applied
``GET /reconcile``               → the launcher's last start-up reconcile report
"""

from __future__ import annotations

from aiohttp import web

from roost.admin import bridge
from roost.admin.context import JOBS
from roost.core.admin_models import JobList
from roost.core.errors import BadRequest
from roost.core.ids import require_id
from roost.http.bodies.jobs import parse_launch
from roost.http.middleware import read_json

__all__ = ["routes"]

routes = web.RouteTableDef()


@routes.get("/jobs")
async def jobs(request: web.Request) -> web.Response:
    state = request.query.get("state")
    if state is not None and state not in bridge.JOB_STATES:
        raise BadRequest(f"state must be one of {', '.join(bridge.JOB_STATES)}")
    answer: JobList = {"jobs": await bridge.list_jobs(request.app[JOBS], state)}
    return web.json_response(answer)


@routes.get("/jobs/{job_id}")
async def job(request: web.Request) -> web.Response:
    return web.json_response(
        await bridge.get_job(request.app[JOBS], require_id("job_id", request.match_info["job_id"]))
    )


@routes.post("/jobs")
async def launch(request: web.Request) -> web.Response:
    req = parse_launch(await read_json(request), traceparent=request.headers.get("traceparent"))
    return web.json_response(await bridge.launch(request.app[JOBS], req), status=201)


@routes.post("/jobs/{job_id}/cancel")
async def cancel(request: web.Request) -> web.Response:
    return web.json_response(await bridge.cancel(request.app[JOBS], require_id("job_id", request.match_info["job_id"])))


@routes.get("/reconcile")
async def reconcile(request: web.Request) -> web.Response:
    return web.json_response(bridge.reconcile_report(request.app[JOBS]))
