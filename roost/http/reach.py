"""Which endpoints a caller that is not on this host may reach: one table, one middleware.

A caller is "on this host" when its connection comes from a loopback address (or a unix socket):
:func:`roost.http.caller.caller_of`'s ``loopback``, the same judgement that lets a caller launch a
top-level job. Every other caller — a child or keeper on another node, through the ``listen``
listener or a non-loopback ``bind`` — reaches only routes declared below, and only with the token
the route authenticates it by; the route's handler then verifies that token as it does for anyone.
A route missing from the table answers such callers 403: a new endpoint is local until it is
declared here. Nothing changes for loopback callers. docs/operations.md, "Network".

Why presence at the edge, not verification: the handlers already verify their token (and must,
for loopback callers too); what the edge adds is that a caller from the network never takes a
handler's *unauthenticated* path — top-level ``/register`` without an approval, ``POST /jobs``
without a credential, ``/status``, ``/metrics``, probes, the OpenAPI document, debug endpoints.
"""

from __future__ import annotations

from enum import Enum
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Handler

from roost.core.errors import Refused
from roost.core.wire import APPROVAL_HEADER, CREDENTIAL_HEADER
from roost.http.caller import caller_of

__all__ = ["REMOTE_ROUTES", "Need", "reach_middleware", "remote_need"]


class Need(Enum):
    """What a caller from another host must bring to a route."""

    NOTHING = "nothing"
    """``GET /health`` only: its answer is ``{}`` (a load balancer's probe), no detail."""
    CREDENTIAL = "credential"
    """A session credential (``x-murmur-spawn-credential``)."""
    APPROVAL = "approval"
    """A spawn approval (``x-murmur-spawn-approval``): a child registering, never a top-level session."""
    KEEPER = "keeper"
    """A node keeper's token (``authorization: Bearer mnk1…``)."""
    HANDLE = "handle"
    """A peer handle with its audience, checked by the peer plane in its documented order."""


REMOTE_ROUTES: Final[dict[tuple[str, str], Need]] = {
    ("GET", "/health"): Need.NOTHING,
    ("POST", "/spawn"): Need.CREDENTIAL,
    ("POST", "/register"): Need.APPROVAL,
    ("POST", "/deregister"): Need.CREDENTIAL,
    ("POST", "/renew"): Need.CREDENTIAL,
    ("POST", "/jobs"): Need.CREDENTIAL,
    ("GET", "/jobs/{job_id}"): Need.CREDENTIAL,
    ("POST", "/jobs/{job_id}/cancel"): Need.CREDENTIAL,
    ("POST", "/a2a/send"): Need.CREDENTIAL,
    ("POST", "/a2a/tasks/get"): Need.CREDENTIAL,
    ("POST", "/a2a/tasks/cancel"): Need.CREDENTIAL,
    ("POST", "/handles"): Need.CREDENTIAL,
    ("POST", "/peer-fetch"): Need.CREDENTIAL,
    ("*", "/resources/peer"): Need.HANDLE,
    ("*", "/resources/peer/{tail}"): Need.HANDLE,
    ("GET", "/artifacts/{sha256}"): Need.KEEPER,
}
"""(method, canonical route path) → what a caller from another host must present. HEAD is GET."""

LOCAL_ONLY: Final = (
    "this endpoint answers only callers on the daemon's own host; from another host only endpoints "
    "that authenticate the caller can be reached (docs/operations.md, Network)"
)
_MISSING: Final[dict[Need, str]] = {
    Need.CREDENTIAL: "from another host this endpoint needs a session credential (x-murmur-spawn-credential)",
    Need.APPROVAL: (
        "from another host /register needs a spawn approval (x-murmur-spawn-approval): "
        "a top-level session registers only on the daemon's own host"
    ),
    Need.KEEPER: "from another host this endpoint needs a node keeper's token (authorization: Bearer)",
}


def remote_need(method: str, canonical: str) -> Need | None:
    """What the route needs from a caller on another host; None: it is not reachable from there."""
    if method == "HEAD":
        method = "GET"
    return REMOTE_ROUTES.get((method, canonical))


def _has(request: web.Request, header: str) -> bool:
    value = request.headers.get(header)
    return value is not None and value.strip() != ""


def _brings(request: web.Request, need: Need) -> bool:
    if need is Need.CREDENTIAL:
        return _has(request, CREDENTIAL_HEADER)
    if need is Need.APPROVAL:
        return _has(request, APPROVAL_HEADER)
    if need is Need.KEEPER:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and token.strip() != ""
    return True


@web.middleware
async def reach_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if caller_of(request).loopback:
        return await handler(request)
    match = request.match_info
    if match.http_exception is not None:
        return await handler(request)  # no route: the same 404/405 as for anyone
    route = match.route
    canonical = route.resource.canonical if route.resource is not None else ""
    need = remote_need(route.method, canonical)
    if need is None:
        raise Refused(LOCAL_ONLY, kind="not_local")
    if not _brings(request, need):
        raise Refused(_MISSING[need], kind="not_local")
    return await handler(request)
