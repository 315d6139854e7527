"""The dashboard's web server: loopback only, one operator, every answer from the admin socket.

Request checks run in one middleware, in this order: the TCP peer's uid must be the uid that
started the dashboard (looked up in the kernel, see ``roost/system/peercred.py``); ``Host`` must be our
loopback address and port; then the cookie (or, on ``GET /``, the token from the printed URL,
exchanged for the cookie). ``POST`` also needs our ``Origin`` and the page's CSRF value. Any
failure is a bare 403 that tells nothing about the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from importlib import resources

from aiohttp import web
from aiohttp.typedefs import Handler

from roost.core.admin_models import (
    ConfigView,
    DrainAnswer,
    EventList,
    HistoryAnswer,
    JobList,
    JobView,
    SessionDetail,
    StatusAnswer,
    TreeAnswer,
    TreeNode,
)
from roost.core.authz import CallerFacts, decide
from roost.dashboard import charts, pages, render
from roost.dashboard.admin import AdminError, AdminSocket
from roost.dashboard.gauges import gauges
from roost.dashboard.guard import COOKIE, CSRF_HEADER, Guard
from roost.dashboard.records import Records, read_records
from roost.dashboard.streams import event_stream, log_stream
from roost.dashboard.timeline import layout, parse_trace
from roost.http.authz import DASHBOARD_ROUTES, policy_for
from roost.system.peercred import tcp_peer_uid

__all__ = ["build_app"]

GUARD: web.AppKey[Guard] = web.AppKey("guard", Guard)
ADMIN: web.AppKey[AdminSocket] = web.AppKey("admin", AdminSocket)
STATIC = {"style.css": "text/css", "app.js": "text/javascript", "favicon.svg": "image/svg+xml"}
_ENDED_SHOWN = 10
_PAGES = frozenset({"/", "/jobs", "/eventlog"})
_ACTIVE = frozenset({"running", "starting"})
_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


def _forbidden() -> web.Response:
    return web.Response(status=403, text="forbidden\n", headers=_SECURITY_HEADERS)


def _needs_token(csrf: str) -> web.Response:
    """This user, at our address, without this run's token or cookie: say how to get a valid URL."""
    body = render.page("Open the dashboard's URL", pages.token_page(), csrf=csrf, live=False)
    return web.Response(status=403, text=body, content_type="text/html", charset="utf-8", headers=_SECURITY_HEADERS)


_warned: list[bool] = []


def _peer_uid(request: web.Request) -> int | None:
    """The uid behind this connection; None (so refused) when the kernel cannot tell."""
    transport = request.transport
    sock = transport.get_extra_info("socket") if transport is not None else None
    uid = None
    if sock is not None:
        with contextlib.suppress(OSError):
            uid = tcp_peer_uid(sock)
    if uid is None and not _warned:
        _warned.append(True)
        print(
            "roostctl dashboard: cannot tell which user is connecting (no sock_diag answer); refusing every request",
            file=sys.stderr,
            flush=True,
        )
    return uid


@web.middleware
async def guard_mw(request: web.Request, handler: Handler) -> web.StreamResponse:
    guard = request.app[GUARD]
    match = request.match_info
    route = match.route if match.http_exception is None else None
    policy = (
        policy_for(DASHBOARD_ROUTES, request.method, route.resource.canonical) if route and route.resource else None
    )
    facts = CallerFacts(
        uid=_peer_uid(request),
        local=True,
        daemon_uid=os.getuid(),
        host_ok=guard.host_ok(request.headers.get("Host")),
        cross_site=guard.cross_site(request.headers.get("Origin"), request.headers.get("Sec-Fetch-Site")),
    )
    if match.http_exception is None and decide(policy, facts) is not None:
        return _forbidden()
    if facts.uid != os.getuid() or not facts.host_ok:
        return _forbidden()
    if request.method == "GET" and request.path == "/" and "token" in request.query:
        if not guard.token_ok(request.query.get("token")):
            return _needs_token(guard.csrf)
        # The token leaves the address bar: a plain 303 that sets the session cookie.
        return web.Response(
            status=303, headers={"Location": "/", "Set-Cookie": guard.cookie_header(), **_SECURITY_HEADERS}
        )
    if not guard.cookie_ok(request.cookies.get(COOKIE)):
        return _needs_token(guard.csrf) if request.method == "GET" and request.path in _PAGES else _forbidden()
    same_site = guard.origin_ok(request.headers.get("Origin")) and guard.csrf_ok(request.headers.get(CSRF_HEADER))
    if request.method not in ("GET", "HEAD") and not same_site:
        return _forbidden()
    resp: web.StreamResponse = await handler(request)
    for k, v in _SECURITY_HEADERS.items():
        resp.headers.setdefault(k, v)
    return resp


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, content_type="text/html", charset="utf-8", status=status)


def _is_active(node: TreeNode) -> bool:
    if (node.get("job_state") or node["status"]) in _ACTIVE:
        return True
    return any(_is_active(c) for c in node["children"])


async def _home_fragment(admin: AdminSocket) -> str:
    tree: TreeAnswer
    status: StatusAnswer
    metrics: str
    history: HistoryAnswer
    tree, status, metrics, history = await asyncio.gather(
        admin.get("/tree?state=all"), admin.get("/status"), admin.text("/metrics"), admin.get("/history")
    )
    all_roots = tree["roots"]
    running = [r for r in all_roots if _is_active(r)]
    ended = sorted((r for r in all_roots if not _is_active(r)), key=lambda r: -(r["ended_ms"] or r["created_ms"]))
    return render.home_fragment(running, ended[:_ENDED_SHOWN], gauges(status, metrics), charts.charts(history))


async def home(request: web.Request) -> web.Response:
    guard, admin = request.app[GUARD], request.app[ADMIN]
    try:
        body = await _home_fragment(admin)
    except AdminError as exc:
        body = f'<p class="error">{render._e(exc.message)}</p>'
    return _html(
        render.page(
            "Delegation tree",
            f'<div id="live" data-fragment="/fragment/home" data-every="5000">{body}</div>',
            csrf=guard.csrf,
        )
    )


async def home_fragment(request: web.Request) -> web.Response:
    try:
        return _html(await _home_fragment(request.app[ADMIN]))
    except AdminError as exc:
        return _html(f'<p class="error">{render._e(exc.message)}</p>', status=502)


async def _tree_of(admin: AdminSocket, sid: str | None) -> tuple[str, list[tuple[str, str]]]:
    """The timeline of the delegation tree ``sid`` belongs to, and its children (id, capsule)."""
    if not sid:
        return "", []
    tree: TreeAnswer = await admin.get("/tree?state=all")
    found = charts.find(tree["roots"], sid)
    if found is None:
        return "", []
    root, node = found
    kids = [(c["session_id"], f"{c['name']}@{c['version']}") for c in node["children"]]
    timeline = charts.tree_timeline(root, int(time.time() * 1000), current=sid) if root["children"] else ""
    return timeline, kids


def _trace_url(config: ConfigView, job: JobView | None) -> str | None:
    template = config.get("dashboard_trace_url")
    if not template or job is None or not job["trace_id"]:
        return None
    return template.replace("{trace_id}", job["trace_id"])


async def _detail(admin: AdminSocket, *, job_id: str | None = None, session_id: str | None = None) -> str:
    job: JobView | None = await admin.get(f"/jobs/{job_id}") if job_id else None
    sid = session_id or (job["session_id"] if job else None)
    session: SessionDetail | None = None
    if sid:
        with contextlib.suppress(AdminError):
            session = await admin.get(f"/sessions/{sid}")
    if job is None and session is not None and session["job_id"]:
        with contextlib.suppress(AdminError):
            job = await admin.get(f"/jobs/{session['job_id']}")
    src = job or session
    if src is None:
        raise AdminError("no such job or session", 404)
    ident = str(job["job_id"]) if job is not None else str(sid)
    config: ConfigView
    tree: tuple[str, list[tuple[str, str]]]
    records: Records
    tree, records, config = await asyncio.gather(
        _tree_of(admin, sid), read_records(admin, ident, sid), admin.get("/config")
    )
    timeline, kids = tree
    items, t0, t1 = layout(parse_trace(records.trace))
    return render.detail_fragment(
        job,
        session,
        records.task,
        records.files,
        items,
        t0,
        t1,
        children=kids,
        tree_html=timeline,
        trace_url=_trace_url(config, job),
    )


async def detail(request: web.Request) -> web.Response:
    guard, admin = request.app[GUARD], request.app[ADMIN]
    kind = "job" if request.path.startswith("/job/") else "session"
    ident = request.match_info["ident"]
    try:
        body = await _detail(admin, **({"job_id": ident} if kind == "job" else {"session_id": ident}))
    except AdminError as exc:
        status = 404 if exc.status == 404 else 502
        return _html(
            render.page("Not found", f'<p class="error">{render._e(exc.message)}</p>', csrf=guard.csrf), status
        )
    live = (
        f'<div id="live" data-fragment="/fragment/{kind}/{render._e(ident)}">{body}</div>'
        f'<section aria-labelledby="h-log"><h2 id="h-log">Log</h2>'
        f'<pre id="log" class="log" data-log="/logs/{render._e(ident)}" tabindex="0" aria-live="off"></pre></section>'
    )
    return _html(render.page(f"{kind} {ident}", live, csrf=guard.csrf))


async def detail_fragment(request: web.Request) -> web.Response:
    kind, ident = request.match_info["kind"], request.match_info["ident"]
    try:
        return _html(
            await _detail(request.app[ADMIN], **({"job_id": ident} if kind == "job" else {"session_id": ident}))
        )
    except AdminError as exc:
        return _html(f'<p class="error">{render._e(exc.message)}</p>', status=exc.status)


async def _jobs_fragment(admin: AdminSocket, query: dict[str, str]) -> str:
    listed: JobList = await admin.get("/jobs")
    f = pages.JobFilter.of(query)
    page, total = pages.filter_jobs(listed["jobs"], f)
    return pages.jobs_page(page, total, f)


async def jobs(request: web.Request) -> web.Response:
    guard = request.app[GUARD]
    query = dict(request.query)
    try:
        body = await _jobs_fragment(request.app[ADMIN], query)
    except AdminError as exc:
        body = f'<p class="error">{render._e(exc.message)}</p>'
    src = "/fragment/jobs" + (f"?{request.query_string}" if request.query_string else "")
    form = pages.jobs_form(pages.JobFilter.of(query))
    live = f'{form}<div id="live" data-fragment="{render._e(src)}">{body}</div>'
    return _html(render.page("Jobs", live, csrf=guard.csrf))


async def jobs_fragment(request: web.Request) -> web.Response:
    try:
        return _html(await _jobs_fragment(request.app[ADMIN], dict(request.query)))
    except AdminError as exc:
        return _html(f'<p class="error">{render._e(exc.message)}</p>', status=502)


async def eventlog(request: web.Request) -> web.Response:
    guard = request.app[GUARD]
    q = request.query.get("q", "").strip()[:200]
    try:
        listed: EventList = await request.app[ADMIN].get("/events?replay=200")
        body = pages.events_page(listed["events"], q)
    except AdminError as exc:
        body = f'<p class="error">{render._e(exc.message)}</p>'
    return _html(render.page("Events", body, csrf=guard.csrf))


async def events(request: web.Request) -> web.StreamResponse:
    """The daemon's events and state as server-sent events (``gone`` with a sentence when it stops)."""
    return await event_stream(request, request.app[ADMIN], _SECURITY_HEADERS)


async def logs(request: web.Request) -> web.StreamResponse:
    """A job's or session's log lines as server-sent events, until it ends (``end`` then)."""
    return await log_stream(request, request.app[ADMIN], request.match_info["ident"], _SECURITY_HEADERS)


async def _end(admin: AdminSocket, sid: str) -> str:
    """End a session and stop its job (a session that ends is not enough: its process lives on)."""
    await admin.post(f"/sessions/{sid}/end", {"reason": "ended by an operator from the dashboard"})
    with contextlib.suppress(AdminError):
        session: SessionDetail = await admin.get(f"/sessions/{sid}")
        job_id = session["job_id"]
        if job_id:
            job: JobView = await admin.post(f"/jobs/{job_id}/cancel")
            return f"session {sid} ended, and its job {job_id} is {job['state']}"
    return f"session {sid} ended"


async def action(request: web.Request) -> web.Response:
    admin = request.app[ADMIN]
    what, ident = request.match_info["what"], request.match_info.get("ident", "")
    try:
        if what == "cancel":
            job: JobView = await admin.post(f"/jobs/{ident}/cancel")
            message = f"job {ident} ({job['name']}@{job['version']}) is {job['state']}"
        elif what == "end":
            message = await _end(admin, ident)
        elif what == "drain":
            answer: DrainAnswer = await admin.post("/drain")
            message = f"draining: {answer['active_jobs']} job(s) left to finish, then the daemon stops"
        else:
            raise web.HTTPNotFound()
    except AdminError as exc:
        return web.json_response({"ok": False, "message": exc.message}, status=exc.status)
    return web.json_response({"ok": True, "message": message})


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in STATIC:
        raise web.HTTPNotFound()
    data = resources.files("roost.dashboard").joinpath("static", name).read_bytes()
    return web.Response(body=data, content_type=STATIC[name], charset="utf-8")


async def favicon(request: web.Request) -> web.Response:
    data = resources.files("roost.dashboard").joinpath("static", "favicon.svg").read_bytes()
    return web.Response(body=data, content_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})


def build_app(guard: Guard, admin: AdminSocket) -> web.Application:
    app = web.Application(middlewares=[guard_mw])
    app[GUARD] = guard
    app[ADMIN] = admin
    app.router.add_get("/", home)
    app.router.add_get("/fragment/home", home_fragment)
    app.router.add_get("/job/{ident}", detail)
    app.router.add_get("/session/{ident}", detail)
    app.router.add_get("/fragment/{kind:job|session}/{ident}", detail_fragment)
    app.router.add_get("/jobs", jobs)
    app.router.add_get("/fragment/jobs", jobs_fragment)
    app.router.add_get("/eventlog", eventlog)
    app.router.add_get("/favicon.ico", favicon)
    app.router.add_get("/events", events)
    app.router.add_get("/logs/{ident}", logs)
    app.router.add_post("/action/{what:cancel|end}/{ident}", action)
    app.router.add_post("/action/{what:drain}", action)
    app.router.add_get("/static/{name}", static)

    async def _close(_: web.Application) -> None:
        await admin.close()

    app.on_cleanup.append(_close)
    return app
