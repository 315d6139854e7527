"""The authorization table at the HTTP edge: every route of every listener, declared once.

Five listeners answer HTTP: the daemon's TCP app, its admin socket, each capsule's A2A door, each
capsule's host socket and the dashboard. Each route of each is declared below with a
:class:`~roost.core.authz.Policy` (who may call it, what a caller on another host must bring,
whether it changes anything); :func:`roost.core.authz.decide` is the decision, and this module
gathers its facts from the connection (the kernel's uid, whether the peer is on this host,
whether it belongs to a job) and the headers (``Host``, ``Origin``, ``Sec-Fetch-Site``, which
token is presented). A route missing from its table is denied to everyone (default deny), and
``tests/trust/test_route_matrix.py`` enumerates the running applications' routes, so a new
route without an entry fails the build. docs/security.md, "Who may call what".
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from roost.core.authz import (
    CallerFacts,
    Denial,
    Listener,
    Need,
    Policy,
    Who,
    cross_site,
    decide,
    host_allowed,
    host_name,
    netloc_key,
)
from roost.core.wire import APPROVAL_HEADER, CREDENTIAL_HEADER
from roost.http.caller import caller_of
from roost.http.middleware import CORRUPT_BODY, BodyTimeout, json_error, read_body

__all__ = [
    "ADMIN_ROUTES",
    "DAEMON_ROUTES",
    "DASHBOARD_ROUTES",
    "DOOR_ROUTES",
    "HOST_SOCKET_ROUTES",
    "REMOTE_ROUTES",
    "TABLES",
    "EdgeNames",
    "authz_middleware",
    "guard_handler",
    "path_policy",
    "policy_for",
    "remote_need",
    "route_keys",
]

log = structlog.get_logger("roost.http")

Key = tuple[str, str]
"""(method, canonical route path); HEAD is looked up as GET, ``*`` matches any method."""

_PUBLIC: Final = Policy(Who.ANYONE, Need.NOTHING)
_LOCAL: Final = Policy(Who.LOCAL)

DAEMON_ROUTES: Final[dict[Key, Policy]] = {
    ("GET", "/health"): _PUBLIC,
    ("GET", "/status/{session_id}"): Policy(Who.ANYONE),  # upstream: unauthenticated, this host only
    ("POST", "/spawn"): Policy(Who.CREDENTIAL, Need.CREDENTIAL, acts=True),
    ("POST", "/register"): Policy(Who.REGISTER, Need.APPROVAL, acts=True),
    ("POST", "/deregister"): Policy(Who.CREDENTIAL, Need.CREDENTIAL, acts=True),
    ("POST", "/renew"): Policy(Who.CREDENTIAL, Need.CREDENTIAL, acts=True),
    ("POST", "/jobs"): Policy(Who.LAUNCH, Need.CREDENTIAL, acts=True),
    ("GET", "/jobs/{job_id}"): Policy(Who.JOB, Need.CREDENTIAL),
    ("POST", "/jobs/{job_id}/cancel"): Policy(Who.JOB, Need.CREDENTIAL, acts=True),
    ("POST", "/a2a/send"): Policy(Who.CREDENTIAL, Need.CREDENTIAL, acts=True),
    ("POST", "/a2a/tasks/get"): Policy(Who.CREDENTIAL, Need.CREDENTIAL, acts=True),
    ("POST", "/a2a/tasks/cancel"): Policy(Who.CREDENTIAL, Need.CREDENTIAL, acts=True),
    ("POST", "/handles"): Policy(Who.CREDENTIAL, Need.CREDENTIAL, acts=True),
    ("POST", "/peer-fetch"): Policy(Who.CREDENTIAL, Need.CREDENTIAL, acts=True),
    ("*", "/resources/peer"): Policy(Who.HANDLE, Need.HANDLE),
    ("*", "/resources/peer/{tail}"): Policy(Who.HANDLE, Need.HANDLE),
    ("GET", "/artifacts/{sha256}"): Policy(Who.KEEPER, Need.KEEPER),
    ("GET", "/metrics"): _LOCAL,
    ("GET", "/openapi.json"): _LOCAL,
    ("GET", "/livez"): _LOCAL,
    ("GET", "/readyz"): _LOCAL,
    ("GET", "/healthz"): _LOCAL,
    ("GET", "/debug/loop-lag"): Policy(Who.LOCAL, acts=True),  # ?reset=1: Who.DAEMON_UID, in the handler
}
"""The daemon's TCP listener (loopback ``bind`` and the ``listen`` network listener)."""

_OPERATOR: Final = Policy(Who.OPERATOR)
_OPERATOR_ACTS: Final = Policy(Who.OPERATOR, acts=True)

ADMIN_ROUTES: Final[dict[Key, Policy]] = {
    ("GET", "/status"): _OPERATOR,
    ("GET", "/config"): _OPERATOR,
    ("POST", "/drain"): _OPERATOR_ACTS,
    ("GET", "/drain"): _OPERATOR,
    ("POST", "/keys/rotate"): _OPERATOR_ACTS,
    ("POST", "/reload"): _OPERATOR_ACTS,
    ("POST", "/registry/forget"): _OPERATOR_ACTS,
    ("GET", "/metrics"): _OPERATOR,
    ("GET", "/livez"): _OPERATOR,
    ("GET", "/readyz"): _OPERATOR,
    ("GET", "/sessions"): _OPERATOR,
    ("GET", "/sessions/{session_id}"): _OPERATOR,
    ("POST", "/sessions/{session_id}/end"): _OPERATOR_ACTS,
    ("GET", "/tree"): _OPERATOR,
    ("GET", "/jobs"): _OPERATOR,
    ("GET", "/jobs/{job_id}"): _OPERATOR,
    ("POST", "/jobs"): _OPERATOR_ACTS,
    ("POST", "/jobs/{job_id}/cancel"): _OPERATOR_ACTS,
    ("GET", "/reconcile"): _OPERATOR,
    ("GET", "/events"): _OPERATOR,
    ("GET", "/logs/{ident}"): _OPERATOR,
    ("GET", "/records/{ident}"): _OPERATOR,
    ("GET", "/cluster"): _OPERATOR,
    ("GET", "/history"): _OPERATOR,
}
"""The admin unix socket: the operator only, never a process inside a job."""

_DOOR: Final = Policy(Who.DOOR_CALLER)
DOOR_ROUTES: Final[dict[Key, Policy]] = {
    ("POST", "/"): Policy(Who.DOOR_CALLER, acts=True),
    ("GET", "/.well-known/agent-card.json"): _DOOR,
    ("GET", "/.well-known/agent.json"): _DOOR,
    # Redeeming this session's peer handles, passed on to the daemon (roost/capsule/peerdoor.py),
    # which checks the handle and its audience as at its own URL.
    ("*", "/resources/peer"): Policy(Who.HANDLE),
    ("*", "/resources/peer/{tail}"): Policy(Who.HANDLE),
    ("*", "/{tail}"): _DOOR,  # the door's own 404
}
"""A capsule's A2A door (loopback only): tasks belong to the caller's uid, trust only under a seal."""

_ENTRY: Final = Policy(Who.ENTRYPOINT, acts=True)
HOST_SOCKET_ROUTES: Final[dict[Key, Policy]] = {
    ("POST", "/send"): _ENTRY,
    ("POST", "/get"): _ENTRY,
    ("POST", "/share"): _ENTRY,
    ("POST", "/fetch"): _ENTRY,
    ("POST", "/delegate"): _ENTRY,
    ("GET", "/jobs/{job_id}"): Policy(Who.ENTRYPOINT),
}
"""A capsule's host socket: processes of its own session's running entrypoint only."""

_OWNER: Final = Policy(Who.DASHBOARD_OWNER)
DASHBOARD_ROUTES: Final[dict[Key, Policy]] = {
    ("GET", "/"): _OWNER,
    ("GET", "/fragment/home"): _OWNER,
    ("GET", "/job/{ident}"): _OWNER,
    ("GET", "/session/{ident}"): _OWNER,
    ("GET", "/fragment/{kind}/{ident}"): _OWNER,
    ("GET", "/jobs"): _OWNER,
    ("GET", "/fragment/jobs"): _OWNER,
    ("GET", "/eventlog"): _OWNER,
    ("GET", "/favicon.ico"): _OWNER,
    ("GET", "/events"): _OWNER,
    ("GET", "/logs/{ident}"): _OWNER,
    ("POST", "/action/{what}/{ident}"): Policy(Who.DASHBOARD_OWNER, acts=True),
    ("POST", "/action/{what}"): Policy(Who.DASHBOARD_OWNER, acts=True),
    ("GET", "/static/{name}"): _OWNER,
}
"""``roostctl dashboard``: the uid that started it (plus its token, cookie and CSRF checks)."""

TABLES: Final[dict[Listener, dict[Key, Policy]]] = {
    Listener.DAEMON: DAEMON_ROUTES,
    Listener.ADMIN: ADMIN_ROUTES,
    Listener.DOOR: DOOR_ROUTES,
    Listener.HOST_SOCKET: HOST_SOCKET_ROUTES,
    Listener.DASHBOARD: DASHBOARD_ROUTES,
}


REMOTE_ROUTES: Final[dict[Key, Need]] = {k: p.remote for k, p in DAEMON_ROUTES.items() if p.remote is not None}
"""(method, canonical route path) → what a caller from another host must present (the rest: local only)."""


def remote_need(method: str, canonical: str) -> Need | None:
    """What the daemon's route needs from a caller on another host; None: not reachable from there."""
    policy = policy_for(DAEMON_ROUTES, method, canonical)
    return policy.remote if policy is not None else None


def _canonical(path: str) -> str:
    """A route's canonical path without regex parts: ``/fragment/{kind:job|session}`` → ``{kind}``."""
    out, depth, skipping = [], 0, False
    for ch in path:
        if ch == "{":
            depth += 1
            if depth == 1:
                skipping = False
        elif ch == "}":
            depth -= 1
            if depth == 0:
                skipping = False
        elif ch == ":" and depth == 1:
            skipping = True
            continue
        if not skipping:
            out.append(ch)
    return "".join(out)


def policy_for(table: Mapping[Key, Policy], method: str, canonical: str) -> Policy | None:
    """The route's entry (HEAD is GET; ``*`` entries match any method), or None: denied."""
    canonical = _canonical(canonical)
    if method == "HEAD":
        method = "GET"
    return table.get((method, canonical)) or table.get(("*", canonical))


def tail_prefixes(table: Mapping[Key, Policy]) -> tuple[str, ...]:
    """The prefixes of a table's ``…/{tail}`` entries, the longest first."""
    return tuple(sorted({p[: -len("{tail}")] for _, p in table if p.endswith("/{tail}")}, key=len, reverse=True))


def path_policy(
    table: Mapping[Key, Policy], method: str, path: str, tails: tuple[str, ...] | None = None
) -> Policy | None:
    """The entry for a raw request path, as a plain handler sees it (no router): the path itself,
    else the longest ``…/{tail}`` entry that covers it."""
    policy = policy_for(table, method, path)
    if policy is not None:
        return policy
    found = tail_prefixes(table) if tails is None else tails
    prefix = next((t for t in found if path.startswith(t)), "/")
    return policy_for(table, method, prefix + "{tail}")


def route_keys(app: web.Application) -> list[Key]:
    """Every (method, canonical path) the running application routes (HEAD folded into GET)."""
    keys: list[Key] = []
    for route in app.router.routes():
        resource = route.resource
        if resource is None or route.method == "HEAD":
            continue
        key = (route.method, _canonical(resource.canonical))
        if key not in keys:
            keys.append(key)
    return keys


class EdgeNames:
    """The names and origins a listener answers to (``Host`` and ``Origin`` are checked against them).

    ``hosts``: host names (lower-case) a ``Host`` header may carry besides any IP literal;
    ``origins``: ``name:port`` of every listener, the only origins that may act."""

    def __init__(self, urls: Callable[[], tuple[str | None, ...]], extra: tuple[str, ...] = ()) -> None:
        self._urls = urls
        self._extra = extra
        self._seen: tuple[str | None, ...] | None = None
        self._checked = -1.0
        self.hosts: frozenset[str] = frozenset()
        self.origins: frozenset[str] = frozenset()
        self._host_ok: dict[str | None, bool] = {}

    def refresh(self) -> EdgeNames:
        """Re-read the listeners' URLs at most once a second (they change only as listeners bind)."""
        now = time.monotonic()
        if now - self._checked < 1.0:
            return self
        self._checked = now
        urls = self._urls()
        if urls == self._seen:
            return self
        hosts = {"localhost", "127.0.0.1", "::1", *(h.lower() for h in self._extra)}
        ports: set[str] = set()
        for url in urls:
            if not url:
                continue
            netloc = url.split("://", 1)[-1].split("/", 1)[0]
            name = host_name(netloc)
            key = netloc_key(netloc)
            if name:
                hosts.add(name)
            if key:
                ports.add(key.rsplit(":", 1)[1])
        self.hosts = frozenset(hosts)
        self.origins = frozenset(f"{h}:{p}" for h in hosts for p in ports)
        self._seen = urls
        self._host_ok = {}
        return self

    def host_ok(self, host: str | None) -> bool:
        """:func:`roost.core.authz.host_allowed` for our names, remembered per distinct header."""
        known = self._host_ok.get(host)
        if known is None:
            known = host_allowed(host, self.hosts, any_address=True)
            if len(self._host_ok) >= 1024:
                self._host_ok.clear()
            self._host_ok[host] = known
        return known


FactsHook = Callable[[web.Request, Policy, CallerFacts], Awaitable[CallerFacts]]
"""Adds what only a listener knows (a peer process inside a job)."""
HandlerFactsHook = Callable[[web.BaseRequest, Policy, CallerFacts], Awaitable[CallerFacts]]
"""The same for a listener served by a plain handler (an entrypoint's descendant)."""


def _has(request: web.BaseRequest, header: str) -> bool:
    value = request.headers.get(header)
    return value is not None and value.strip() != ""


def _keeper(request: web.BaseRequest) -> bool:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and token.strip() != ""


@functools.lru_cache(maxsize=1024)
def _local_facts(uid: int | None, owner_uid: int, foreign: bool, host_ok: bool) -> CallerFacts:
    """A caller on this host's facts, made once per distinct value (they are frozen: one object
    serves every request that has them, instead of a new one per request)."""
    return CallerFacts(uid, True, owner_uid, cross_site=foreign, host_ok=host_ok)


def facts_of(request: web.BaseRequest, names: EdgeNames | None, *, owner_uid: int) -> CallerFacts:
    """What the connection and the headers say about the caller (no I/O but the cached uid)."""
    caller = caller_of(request)
    host_ok, foreign = True, False
    if names is not None:
        headers = request.headers
        names.refresh()
        host_ok = names.host_ok(headers.get("Host"))
        origin, fetch_site = headers.get("Origin"), headers.get("Sec-Fetch-Site")
        if origin is not None or fetch_site is not None:
            foreign = cross_site(origin, fetch_site, names.origins)
    if caller.loopback:  # which token is presented matters only to a caller from another host
        return _local_facts(caller.uid, owner_uid, foreign, host_ok)
    return CallerFacts(
        uid=caller.uid,
        local=False,
        daemon_uid=owner_uid,
        credential=_has(request, CREDENTIAL_HEADER),
        approval=_has(request, APPROVAL_HEADER),
        keeper=_keeper(request),
        cross_site=foreign,
        host_ok=host_ok,
    )


def _refuse(denial: Denial, listener: Listener, request: web.BaseRequest) -> web.Response:
    if denial.kind not in ("not_local",):
        log.info("request_refused", listener=listener.value, kind=denial.kind, path=request.rel_url.path[:200])
    return json_error(denial.status, {"error": denial.sentence})


def authz_middleware(
    listener: Listener,
    *,
    names: Callable[[web.Request], EdgeNames | None] = lambda _r: None,
    facts_hook: FactsHook | None = None,
) -> Middleware:
    """The middleware every :class:`aiohttp.web.Application` listener installs first."""
    table = TABLES[listener]
    me = os.geteuid()
    by_route: dict[int, Policy | None] = {}  # the route objects of one application are fixed

    @web.middleware
    async def authz(request: web.Request, handler: Handler) -> web.StreamResponse:
        match = request.match_info
        if match.http_exception is not None:
            return await handler(request)  # no route: the same 404/405 for anyone
        route = match.route
        key = id(route)
        if key in by_route:
            policy = by_route[key]
        else:
            canonical = route.resource.canonical if route.resource is not None else ""
            policy = by_route[key] = policy_for(table, route.method, canonical)
        facts = facts_of(request, names(request), owner_uid=me)
        if policy is not None and facts_hook is not None and facts.local:
            facts = await facts_hook(request, policy, facts)
        denial = decide(policy, facts)
        if denial is not None:
            return _refuse(denial, listener, request)
        return await handler(request)

    return authz


def guard_handler(
    listener: Listener,
    handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
    *,
    names: EdgeNames | None = None,
    facts_hook: HandlerFactsHook | None = None,
) -> Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]:
    """The same check for a listener served by a plain handler (the door matches its own paths),
    plus what the daemon's error middleware does for its app: a body read within the deadline,
    a corrupt body answered 400 with a sentence."""
    table = TABLES[listener]
    tails = tail_prefixes(table)

    async def guarded(request: web.BaseRequest) -> web.StreamResponse:
        method = request.method
        policy = path_policy(table, method, request.path, tails)
        facts = facts_of(request, names, owner_uid=os.geteuid())
        if policy is not None and facts_hook is not None:
            facts = await facts_hook(request, policy, facts)
        denial = decide(policy, facts)
        if denial is not None:
            return _refuse(denial, listener, request)
        try:
            if method == "POST" and request.can_read_body:
                await read_body(request)  # held to the body deadline; the handler reads it again
            return await handler(request)
        except web.RequestPayloadError:
            answer = json_error(400, {"error": CORRUPT_BODY})
            answer.force_close()
            return answer
        except BodyTimeout as exc:
            answer = json_error(exc.status, exc.body())
            answer.force_close()
            return answer

    return guarded
