"""Admin routes for the daemon as a whole: status, config, drain, key rotation, reload, registry cache.

``GET /status``            → daemon summary (version, pid, uptime, listeners, counts, draining)
``GET /config``            → ``Config.public()`` (an OTLP exporter's headers show only as set)
``GET /history``           → the host gauges' last hour, one sample every 5 s (the dashboard's charts)
``POST /drain``            → ``{"timeout_secs"?: float}`` → counts; stops the daemon when work ends
``GET /drain``             → whether it drains, the jobs it waits for, seconds left until it stops anyway
``POST /keys/rotate``      → ``{"grace_secs"?: float}`` → new ``key_id`` and how many running sessions are affected
``POST /reload``           → same as SIGHUP: re-read the config file, forget registry caches
``POST /registry/forget``  → forget resolve caches (after ``roostctl registry add``)
``GET /metrics``, ``/livez``, ``/readyz`` → as on TCP (the admin listener is their natural home)
"""

from __future__ import annotations

import os
import time
from typing import cast

from aiohttp import web

from roost import __version__
from roost.admin.context import CONTROL, EVENTS, TABLE
from roost.core.admin_models import ConfigView, ForgetAnswer, ResourceLimitsView, StatusAnswer
from roost.core.limits import HostMechanisms
from roost.http import ops_routes
from roost.http.bodies.admin import parse_drain, parse_rotate
from roost.http.context import KEYS, LAUNCHER, LIFECYCLE, PROBES, REFEREE, SETTINGS
from roost.http.middleware import read_json

__all__ = ["routes"]

routes = web.RouteTableDef()


def _uid_key(item: tuple[int | None, int]) -> int:
    return -1 if item[0] is None else item[0]


@routes.get("/status")
async def status(request: web.Request) -> web.Response:
    app = request.app
    cfg, lifecycle, table = app[SETTINGS].config, app[LIFECYCLE], app[TABLE]
    counts = app[PROBES].job_counts()
    body: StatusAnswer = {
        "version": __version__,
        "pid": os.getpid(),
        "uptime_secs": round(time.time() - lifecycle.started_at, 3),
        "url": lifecycle.url,
        "network_url": lifecycle.network_url,
        "advertise_url": lifecycle.advertise_url,
        "admin_socket": str(cfg.admin_socket_path),
        "state_dir": str(cfg.state_dir),
        "ephemeral_keys": cfg.ephemeral_keys,
        "key_id": app[KEYS].ring.key_id,
        "run_id": app[EVENTS].run_id,
        "draining": app[REFEREE].draining,
        "sessions": {
            "running": table.running,
            # What the per-uid live-session quota counts, by uid ("unknown": callers whose uid
            # the daemon cannot tell, one bucket).
            "running_by_uid": {
                "unknown" if uid is None else str(uid): n for uid, n in sorted(table.live_by_uid.items(), key=_uid_key)
            },
            "total": len(table.sessions),
            "reserved_slots": len(table.reservations),
        },
        "max_live_capsules": cfg.max_live_capsules,
        "jobs": counts,
        "resource_limits": _limits(app[LAUNCHER].limit_mechanisms(), cfg.resource_limits),
    }
    return web.json_response(body)


def _limits(host: HostMechanisms | None, mode: str) -> ResourceLimitsView:
    """The limits policy in force: its mode and each field's mechanism here (docs/security.md)."""
    return {"mode": mode, "mechanisms": host.to_dict() if host is not None else None}


@routes.get("/history")
async def history(request: web.Request) -> web.Response:
    return web.json_response(request.app[PROBES].history.view())


@routes.get("/config")
async def config(request: web.Request) -> web.Response:
    body = cast(ConfigView, request.app[SETTINGS].config.public())
    return web.json_response(body)


@routes.post("/drain")
async def drain(request: web.Request) -> web.Response:
    timeout = parse_drain(await read_json(request) if request.can_read_body else {})
    return web.json_response(request.app[CONTROL].drain(timeout_secs=timeout))


@routes.get("/drain")
async def drain_status(request: web.Request) -> web.Response:
    return web.json_response(request.app[CONTROL].drain_status())


@routes.post("/keys/rotate")
async def rotate(request: web.Request) -> web.Response:
    grace = parse_rotate(await read_json(request) if request.can_read_body else {})
    return web.json_response(await request.app[CONTROL].rotate_keys(grace_secs=grace))


@routes.post("/reload")
async def reload(request: web.Request) -> web.Response:
    return web.json_response(await request.app[CONTROL].reload())


@routes.post("/registry/forget")
async def registry_forget(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    await settings.forget_registry_caches()
    answer: ForgetAnswer = {"forgotten": True, "registry_path": str(settings.config.registry_path)}
    return web.json_response(answer)


routes.get("/metrics")(ops_routes.metrics)
routes.get("/livez")(ops_routes.livez)
routes.get("/readyz")(ops_routes.readyz)
