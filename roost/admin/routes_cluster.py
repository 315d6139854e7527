"""Admin route for the process backend's cluster view (``roostctl doctor`` checks it).

``GET /cluster`` → ``{"launcher": "local"}``, or for the Ray backend the cluster's address,
whether it answers, its nodes (totals), free resources and each node keeper's own report
(alive, children, ``roost-capsule`` present, cached artifacts).
"""

from __future__ import annotations

from typing import cast

from aiohttp import web

from roost.core.admin_models import ClusterReport
from roost.http.context import LAUNCHER, SETTINGS

__all__ = ["routes"]

routes = web.RouteTableDef()


@routes.get("/cluster")
async def cluster(request: web.Request) -> web.Response:
    report = getattr(request.app[LAUNCHER].backend, "report", None)
    if report is None:
        body: ClusterReport = {"launcher": request.app[SETTINGS].config.launcher}
    else:
        body = cast(ClusterReport, await report())
    return web.json_response(body)
