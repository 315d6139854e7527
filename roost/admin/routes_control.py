"""Admin routes for the daemon as a whole: status, config, drain, key rotation, reload, registry cache.

``GET /status``            → daemon summary (version, pid, uptime, listeners, counts, draining)
``GET /config``            → ``Config.public()`` (no secret lives in the config; keys are files)
``POST /drain``            → ``{"timeout_secs"?: float}`` → counts; stops the daemon when work ends
``GET /drain``             → whether it drains, the jobs it waits for, seconds left until it stops anyway
``POST /keys/rotate``      → new ``key_id`` and how many running sessions lost their credential
``POST /reload``           → same as SIGHUP: re-read the config file, forget registry caches
``POST /registry/forget``  → forget resolve caches (after ``roostctl registry add``)
``GET /metrics``, ``/livez``, ``/readyz`` → as on TCP (the admin listener is their natural home)
"""

from __future__ import annotations

import os
import time
from typing import Any

from aiohttp import web

from roost import __version__
from roost.admin import bridge, control
from roost.errors import BadRequest
from roost.http import ops_routes
from roost.http.context import ROOST
from roost.http.middleware import read_json

__all__ = ["routes"]

routes = web.RouteTableDef()


@routes.get("/status")
async def status(request: web.Request) -> web.Response:
    roost = request.app[ROOST]
    counts = bridge.counts_by_state(roost)
    body: dict[str, Any] = {
        "version": __version__,
        "pid": os.getpid(),
        "uptime_secs": round(time.time() - roost.started_at, 3),
        "url": roost.url,
        "network_url": roost.network_url,
        "advertise_url": roost.advertise_url,
        "admin_socket": str(roost.config.admin_socket_path),
        "state_dir": str(roost.config.state_dir),
        "ephemeral_keys": roost.config.ephemeral_keys,
        "key_id": roost.keys.key_id,
        "run_id": roost.events.run_id,
        "draining": roost.referee.draining,
        "sessions": {
            "running": roost.table.running,
            "total": len(roost.table.sessions),
            "reserved_slots": len(roost.table.reservations),
        },
        "max_live_capsules": roost.config.max_live_capsules,
        "jobs": counts,
    }
    return web.json_response(body)


@routes.get("/config")
async def config(request: web.Request) -> web.Response:
    return web.json_response(request.app[ROOST].config.public())


@routes.post("/drain")
async def drain(request: web.Request) -> web.Response:
    body = await read_json(request) if request.can_read_body else {}
    timeout = body.get("timeout_secs")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0):
        raise BadRequest("timeout_secs must be a number of seconds, zero or more")
    return web.json_response(control.drain(request.app[ROOST], timeout_secs=timeout))


@routes.get("/drain")
async def drain_status(request: web.Request) -> web.Response:
    return web.json_response(control.drain_status(request.app[ROOST]))


@routes.post("/keys/rotate")
async def rotate(request: web.Request) -> web.Response:
    return web.json_response(await control.rotate_keys(request.app[ROOST]))


@routes.post("/reload")
async def reload(request: web.Request) -> web.Response:
    return web.json_response(await request.app[ROOST].reload())


@routes.post("/registry/forget")
async def registry_forget(request: web.Request) -> web.Response:
    roost = request.app[ROOST]
    roost.referee.forget_resolved()
    await roost.executor.run(roost.registry.clear_cache)
    return web.json_response({"forgotten": True, "registry_path": str(roost.config.registry_path)})


routes.get("/metrics")(ops_routes.metrics)
routes.get("/livez")(ops_routes.livez)
routes.get("/readyz")(ops_routes.readyz)
