"""Operator endpoints on the TCP listener: ``/metrics``, ``/openapi.json``, ``/livez``, ``/readyz``.

``/metrics`` is served here (it is part of the TCP API) and on the admin socket (the operator's own
listener, where a scraper on this host can reach it without TCP); the TCP listener is loopback-only
unless ``--allow-remote``, and the text holds counts, never ids or content. ``CONTENT_TYPE_LATEST``
carries a charset, which aiohttp's ``content_type=`` rejects, so it goes through ``headers=``.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from roost.http.context import EXECUTOR, LIFECYCLE, PROBES, REFEREE, SETTINGS
from roost.http.health import readiness, render
from roost.http.openapi import openapi_document

__all__ = ["routes"]

routes = web.RouteTableDef()


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    """Refresh the scrape-time gauges, then render the registry."""
    return web.Response(body=request.app[PROBES].scrape(), headers={"Content-Type": CONTENT_TYPE_LATEST})


@routes.get("/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=openapi_document(), content_type="application/json")


@routes.get("/livez")
async def livez(request: web.Request) -> web.Response:
    verbose = "verbose" in request.query
    return web.Response(text="[+]ping ok\nlivez check passed\n" if verbose else "ok\n")


async def readyz(request: web.Request) -> web.Response:
    app = request.app
    draining, lifecycle = app[REFEREE].draining, app[LIFECYCLE]
    checks = await app[EXECUTOR].run(
        readiness,
        app[SETTINGS].config,
        draining=draining,
        stopping=lifecycle.stopping,
        state_damage=lifecycle.state_damage,
    )
    status, text = render(checks, "verbose" in request.query)
    return web.Response(status=status, text=text)


routes.get("/readyz")(readyz)
# Deprecated alias (Kubernetes keeps /healthz for old probes); upstream's /health stays as is.
routes.get("/healthz")(readyz)
