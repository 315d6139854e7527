"""Upstream-compatible referee endpoints: /health, /spawn, /register, /deregister, /status.

Each handler parses its body into a typed request (:mod:`roost.http.bodies.referee`), does the checks that
need I/O, and hands typed values to :class:`roost.services.referee.service.Referee`."""

from __future__ import annotations

import structlog
from aiohttp import web

from a2a.protocol import traceparent
from roost.core.errors import NotFound, Refused, RoostError
from roost.core.ids import require_id
from roost.core.wire import APPROVAL_HEADER, CREDENTIAL_HEADER
from roost.http.bodies.referee import parse_deregister, parse_register, parse_spawn
from roost.http.caller import caller_of
from roost.http.context import EXECUTOR, KEYS, LAUNCHER, METRICS, REFEREE, SETTINGS
from roost.http.middleware import json_ok, read_json
from roost.http.peerjob import UNKNOWN, peer_job_root
from roost.observe.jobspans import decided, spawn_decision
from roost.services.launcher.tickets import is_ticket
from roost.services.referee.registration import RegisterCaller
from roost.services.sessionwatch import pid_holds_connection
from roost.system.fsutil import dir_identity
from roost.system.procstart import process_identity, process_owner

__all__ = ["REGISTER_IN_JOB", "routes"]

routes = web.RouteTableDef()
log = structlog.get_logger("roost.referee")


def _outcome(exc: RoostError) -> str:
    if isinstance(exc, Refused):
        return exc.kind
    return "bad_request" if exc.status < 500 else "error"


@routes.get("/health")
async def health(request: web.Request) -> web.Response:
    return json_ok({})


@routes.post("/spawn")
async def spawn(request: web.Request) -> web.Response:
    referee, metrics = request.app[REFEREE], request.app[METRICS]
    span = None
    try:
        req = parse_spawn(await read_json(request))
        tp = request.headers.get("traceparent") if request.app[LAUNCHER].events.sink is not None else None
        caller = traceparent.parse(tp.strip().lower()) if tp else None
        span = spawn_decision(request.app[LAUNCHER].events, f"{req.name}@{req.version}", caller)
        grant = await referee.spawn(request.headers.get(CREDENTIAL_HEADER), req.name, req.version)
    except RoostError as exc:
        outcome = _outcome(exc)
        metrics.spawn_decision(outcome)
        decided(span, None, (outcome, exc.message))
        log.info("spawn_refused", outcome=outcome, status=exc.status)
        raise
    metrics.spawn_decision("granted")
    decided(span, grant.parent.session_id, None)
    return json_ok(grant.answer())


@routes.post("/register")
async def register(request: web.Request) -> web.Response:
    referee, executor = request.app[REFEREE], request.app[EXECUTOR]
    req = parse_register(await read_json(request))
    pid = req.pid
    # The workdir is checked by the referee, on the disk of the host the session runs on.
    pid_start = None
    if pid is not None:
        # Believe a pid only if that process holds this very connection.
        peer = request.transport.get_extra_info("peername") if request.transport else None
        local = request.transport.get_extra_info("sockname") if request.transport else None
        owns = False
        if peer and local:
            owns = await executor.run(pid_holds_connection, pid, (peer[0], peer[1]), (local[0], local[1]))
        if owns:
            pid_start = await executor.run(process_identity, pid)
        else:
            # Not believed, so not watched (the session holds a lease instead); but a pid of
            # another user's process is a claim the caller had no business making.
            caller = caller_of(request).uid
            owner = await executor.run(process_owner, pid) if caller not in (None, 0) else None
            if owner is not None and owner != caller:
                raise Refused(
                    f"pid {pid} is a process of uid {owner}, not of the calling uid {caller}; "
                    "name the session's own process, or no pid",
                    "pid",
                )
            log.info("register_pid_unverified", pid=pid)
            req = req.model_copy(update={"pid": None})
    approval, uid, job_id = request.headers.get(APPROVAL_HEADER), caller_of(request).uid, None
    if approval is None and caller_of(request).loopback:
        job_id = await _own_job(request, req.name, req.version)
    try:
        if approval is not None and is_ticket(approval.strip()):
            # A top-level job's child on another node: registered top-level, as the job's uid.
            ticketed = request.app[LAUNCHER].redeem_ticket(approval.strip(), req.name, req.version)
            approval, uid, job_id = None, ticketed.uid, ticketed.job_id
        credential, _rec = await referee.register(approval, req, RegisterCaller(uid, pid_start, job_id))
    except RoostError as exc:
        log.info("register_refused", outcome=_outcome(exc), status=exc.status, capsule=f"{req.name}@{req.version}")
        raise
    if _rec.workdir is not None and _local_session(request, _rec.job_id):
        # What the workdir is now, reached with no link: every later walk beneath it must find
        # the same directory (docs/security.md, "Workdirs").
        # Durable before the credential leaves: nothing can mint as the session before then.
        try:
            identity = await executor.run(dir_identity, _rec.workdir)
        except OSError:
            log.warning("workdir_identity_unreadable", session_id=_rec.session_id)
        else:
            await referee.record_workdir_id(_rec, identity)
    # The session's door checks the daemon's seals with this key (docs/security.md).
    answer = {"credential": credential, "door_key": request.app[KEYS].door_key_for(_rec.session_id).hex()}
    job = request.app[LAUNCHER].jobs.get(_rec.job_id) if _rec.job_id is not None else None
    if job is not None and job.delegated and job.parent_id == _rec.parent_id:
        # The launcher delivers this child's completion, sealed, once it exits: the child only
        # writes its record (docs/security.md, "Sealed origin and trust"). A parent on another
        # node is reached through that node's keeper (roost/backends/ray/doors.py).
        answer["completion_delivery"] = "launcher"
    return json_ok(answer)


REGISTER_IN_JOB = (
    "a process inside a job registers no top-level session of its own: only the job's own capsule "
    "registers, once, as it starts; a capsule delegates through its host socket (roost-capsule delegate)"
)


async def _own_job(request: web.Request, name: str, version: str) -> str | None:
    """A top-level registration from a process inside a job: the id of that job when this is the
    job's own registration (a top-level job still starting, of these coordinates, with no session
    yet); refused otherwise, since its credential would act outside the capsule's own spawn
    envelope (docs/security.md, threat E4). None for a caller inside no job (or one the kernel
    cannot place: no sock_diag, no check)."""
    root = await peer_job_root(request)
    if root is None or root == UNKNOWN:
        return None
    launcher, table = request.app[LAUNCHER], request.app[REFEREE].table
    job = next((j for j in launcher.jobs.values() if j.pid == root and j.node is None and not j.final), None)
    own = (
        job is not None
        and job.parent_id is None
        and job.state == "starting"
        and job.session_id is None
        and (job.name, job.version) == (name, version)
        and not any(rec.job_id == job.job_id for rec in table.iter_running())
    )
    if job is None or not own:
        log.warning("register_refused_in_job", job_id=job.job_id if job is not None else None)
        raise Refused(REGISTER_IN_JOB, "in_job")
    return job.job_id


def _local_session(request: web.Request, job_id: str | None) -> bool:
    """Whether the session's workdir is on this host (not a job placed on another node)."""
    job = request.app[LAUNCHER].jobs.get(job_id) if job_id is not None else None
    return job is None or job.node is None


@routes.post("/deregister")
async def deregister(request: web.Request) -> web.Response:
    req = parse_deregister(await read_json(request))
    await request.app[REFEREE].deregister(request.headers.get(CREDENTIAL_HEADER), req)
    return json_ok({})


@routes.post("/renew")
async def renew(request: web.Request) -> web.Response:
    """Renew the calling session's lease (any authenticated call does; this one does nothing else)."""
    referee = request.app[REFEREE]
    rec = referee.authenticate(request.headers.get(CREDENTIAL_HEADER))
    until = referee.renew(rec)
    return json_ok({"lease_expires_at_ms": until, "lease_secs": request.app[SETTINGS].config.session_lease_secs})


@routes.get("/status/{session_id}")
async def status(request: web.Request) -> web.Response:
    answer = await request.app[REFEREE].status_of(require_id("session_id", request.match_info["session_id"]))
    if answer is None:
        raise NotFound("session not found")
    return json_ok(answer)
