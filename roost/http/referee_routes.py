"""Upstream-compatible referee endpoints: /health, /spawn, /register, /deregister, /status."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

import structlog
from aiohttp import web

from roost.errors import BadRequest, NotFound, Refused, RoostError
from roost.http.caller import caller_of
from roost.http.context import ROOST
from roost.http.middleware import json_ok, read_json
from roost.identifiers import require_id
from roost.manifest import CONTAINMENT_ORDER
from roost.referee import require_ident
from roost.sessionwatch import pid_holds_connection
from roost.wire import CREDENTIAL_HEADER

__all__ = ["routes"]

APPROVAL_HEADER = "x-murmur-spawn-approval"

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
    roost = request.app[ROOST]
    try:
        body = await read_json(request)
        name = require_ident(body, "name")
        version = require_ident(body, "version")
        grant = await roost.referee.spawn(request.headers.get(CREDENTIAL_HEADER), name, version)
    except RoostError as exc:
        outcome = _outcome(exc)
        roost.metrics.spawn_decision(outcome)
        log.info("spawn_refused", outcome=outcome, status=exc.status)
        raise
    roost.metrics.spawn_decision("granted")
    return json_ok(grant.answer())


def _optional_workdir(body: dict[str, Any]) -> str | None:
    workdir = body.get("workdir")
    if workdir is None:
        return None
    if not isinstance(workdir, str) or not os.path.isabs(workdir) or "\x00" in workdir:
        raise BadRequest("workdir must be an absolute path")
    return os.path.normpath(workdir)


def _optional_pid(body: dict[str, Any]) -> int | None:
    pid = body.get("pid")
    if pid is None:
        return None
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        raise BadRequest("pid must be a process id (a whole number above 1)")
    return pid


def _optional_url(body: dict[str, Any]) -> str | None:
    url = body.get("capsule_url")
    if url is None:
        return None
    if not isinstance(url, str):
        raise BadRequest("capsule_url must be a string")
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise BadRequest("capsule_url must be http://<host>:<port> (the session's A2A door)")
    return f"http://{parts.hostname}:{parts.port}"


@routes.post("/register")
async def register(request: web.Request) -> web.Response:
    roost = request.app[ROOST]
    body = await read_json(request)
    session_id = require_ident(body, "session_id")
    name = require_ident(body, "name")
    version = require_ident(body, "version")
    workdir = _optional_workdir(body)
    if workdir is not None and not await roost.executor.run(os.path.isdir, workdir):
        raise BadRequest("workdir must be an existing directory")
    pid = _optional_pid(body)
    pid_start = None
    if pid is not None:
        # Believe a pid only if that process holds this very connection.
        peer = request.transport.get_extra_info("peername") if request.transport else None
        local = request.transport.get_extra_info("sockname") if request.transport else None
        owns = False
        if peer and local:
            owns = await roost.executor.run(pid_holds_connection, pid, (peer[0], peer[1]), (local[0], local[1]))
        if owns:
            pid_start = await roost.executor.run(roost.process_start_time, pid)
        else:
            log.info("register_pid_unverified", pid=pid)
            pid = None
    capsule_url = _optional_url(body)
    containment = body.get("containment")
    if containment is not None and containment not in CONTAINMENT_ORDER:
        raise BadRequest("containment must be one of advisory, scoped, sealed")
    try:
        credential, _rec = await roost.referee.register(
            request.headers.get(APPROVAL_HEADER),
            session_id=session_id,
            name=name,
            version=version,
            workdir=workdir,
            pid=pid,
            pid_start=pid_start,
            capsule_url=capsule_url,
            uid=caller_of(request).uid,
            containment=containment,
        )
    except RoostError as exc:
        log.info("register_refused", outcome=_outcome(exc), status=exc.status, capsule=f"{name}@{version}")
        raise
    # The session's door checks the relay's seals with this key (docs/security.md).
    return json_ok({"credential": credential, "door_key": roost.relay.door_key(_rec.session_id).hex()})


@routes.post("/deregister")
async def deregister(request: web.Request) -> web.Response:
    roost = request.app[ROOST]
    body = await read_json(request)
    outcome = body.get("outcome")
    if outcome not in ("complete", "failed"):
        shown = outcome if isinstance(outcome, str) else ("" if outcome is None else str(outcome))
        raise BadRequest(f"outcome '{shown}' is not 'complete' or 'failed'")
    await roost.referee.deregister(request.headers.get(CREDENTIAL_HEADER), outcome)
    return json_ok({})


@routes.post("/renew")
async def renew(request: web.Request) -> web.Response:
    """Renew the calling session's lease (any authenticated call does; this one does nothing else)."""
    roost = request.app[ROOST]
    rec = roost.referee.authenticate(request.headers.get(CREDENTIAL_HEADER))
    until = roost.referee.renew(rec)
    return json_ok({"lease_expires_at_ms": until, "lease_secs": roost.config.session_lease_secs})


@routes.get("/status/{session_id}")
async def status(request: web.Request) -> web.Response:
    roost = request.app[ROOST]
    answer = await roost.referee.status_of(require_id("session_id", request.match_info["session_id"]))
    if answer is None:
        raise NotFound("session not found")
    return json_ok(answer)
