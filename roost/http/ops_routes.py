"""Operator endpoints on the TCP listener: ``/metrics``, ``/openapi.json``, ``/livez``, ``/readyz``.

``/metrics`` is served here (it is part of the TCP API) and on the admin socket (the operator's own
listener, where a scraper on this host can reach it without TCP); the TCP listener is loopback-only
unless ``--allow-remote``, and the text holds counts, never ids or content. ``CONTENT_TYPE_LATEST``
carries a charset, which aiohttp's ``content_type=`` rejects, so it goes through ``headers=``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from roost.health import readiness, render
from roost.http.context import ROOST
from roost.openapi import openapi_document
from roost.probes import refresh_gauges

if TYPE_CHECKING:
    from roost.daemon import Roost

__all__ = ["metrics_response", "routes"]

routes = web.RouteTableDef()


def metrics_response(roost: Roost) -> web.Response:
    """Refresh the scrape-time gauges, then render the registry."""
    refresh_gauges(roost)
    return web.Response(body=roost.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    return metrics_response(request.app[ROOST])


@routes.get("/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=openapi_document(), content_type="application/json")


@routes.get("/livez")
async def livez(request: web.Request) -> web.Response:
    verbose = "verbose" in request.query
    return web.Response(text="[+]ping ok\nlivez check passed\n" if verbose else "ok\n")


async def readyz(request: web.Request) -> web.Response:
    roost = request.app[ROOST]
    checks = await roost.executor.run(readiness, roost)
    status, text = render(checks, "verbose" in request.query)
    return web.Response(status=status, text=text)


routes.get("/readyz")(readyz)
# Deprecated alias (Kubernetes keeps /healthz for old probes); upstream's /health stays as is.
routes.get("/healthz")(readyz)
