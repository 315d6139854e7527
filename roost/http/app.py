"""The peer-facing TCP application: routes from each concern, one error middleware, and the
authorization table's check (:mod:`roost.http.authz`) in front of every route."""

from __future__ import annotations

from aiohttp import web

from roost.core.authz import Listener
from roost.http import artifact_routes, job_routes, ops_routes, peer_routes, referee_routes, relay_routes
from roost.http.authz import EdgeNames, authz_middleware
from roost.http.context import Services
from roost.http.middleware import MAX_BODY_BYTES, error_middleware

__all__ = ["build_app"]


def build_app(services: Services) -> web.Application:
    lifecycle = services.lifecycle
    names = EdgeNames(lambda: (lifecycle.url, lifecycle.network_url, lifecycle.advertise_url), (lifecycle.bind,))
    authz = authz_middleware(Listener.DAEMON, names=lambda _request: names)
    app = web.Application(middlewares=[error_middleware, authz], client_max_size=MAX_BODY_BYTES)
    services.install(app)
    app.add_routes(referee_routes.routes)
    app.add_routes(relay_routes.routes)
    app.add_routes(peer_routes.routes)
    app.add_routes(job_routes.routes)
    app.add_routes(ops_routes.routes)
    artifact_routes.install(app)
    return app
