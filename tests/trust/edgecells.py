"""The routes of a capsule door, a capsule host socket and the dashboard as matrix cells: the
running applications' routes, a sample request per route, and what a route answers a caller the
table lets through (tests/trust/matrix.py)."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import web

from a2a.door import Door
from roost.capsule.hostsock import HostSocket
from roost.capsule.peerdoor import ROUTE_KEYS as PEER_DOOR_KEYS
from roost.dashboard.admin import AdminSocket
from roost.dashboard.guard import Guard
from roost.dashboard.server import build_app as build_dashboard
from roost.http.authz import route_keys
from tests.trust.matrix import Expect, Sample

__all__ = [
    "DASHBOARD_ENDS",
    "dashboard_expect",
    "dashboard_keys",
    "dashboard_sample",
    "door_expect",
    "door_keys",
    "door_sample",
    "hostsock_keys",
    "hostsock_sample",
    "message",
    "serve_dashboard",
]

Key = tuple[str, str]


async def _never(_task: Any) -> Any:
    raise AssertionError("no task runs here")


def door_keys() -> list[Key]:
    """Every route a capsule door serves: the door's own and the peer door in front of it."""
    door = Door(name="x", version="0.1.0", session_id="ses_x", runner=_never)
    return route_keys(door.app) + list(PEER_DOOR_KEYS)


def hostsock_keys(records: Path) -> list[Key]:
    """Every route of a capsule host socket (``records``: a scratch directory for its socket dir)."""
    hs = HostSocket(records, daemon_url=None, credential=lambda: None, callers=lambda _pid: None)
    return route_keys(hs.build_app())


@contextlib.asynccontextmanager
async def serve_dashboard(admin: Path) -> AsyncIterator[tuple[str, Guard, web.Application]]:
    """The dashboard's application on a loopback port, as ``roostctl dashboard`` serves it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    guard = Guard(port=sock.getsockname()[1])
    app = build_dashboard(guard, AdminSocket(admin))
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    try:
        yield f"http://127.0.0.1:{guard.port}", guard, app
    finally:
        await runner.cleanup()


def dashboard_keys(admin: Path) -> list[Key]:
    """Every route of ``roostctl dashboard`` (``admin``: the admin socket it would ask)."""
    return route_keys(build_dashboard(Guard(port=1), AdminSocket(admin)))


def message() -> dict[str, Any]:
    """An A2A ``message/send`` with a fresh message id."""
    text = {"kind": "text", "text": "hi"}
    msg = {"kind": "message", "role": "user", "messageId": os.urandom(8).hex(), "parts": [text]}
    return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": msg}}


def door_sample(key: Key) -> Sample:
    """A concrete request for each route a capsule door serves (a new route fails here)."""
    samples = {
        ("POST", "/"): Sample("POST", "/", message()),
        ("GET", "/.well-known/agent-card.json"): Sample("GET", "/.well-known/agent-card.json"),
        ("GET", "/.well-known/agent.json"): Sample("GET", "/.well-known/agent.json"),
        ("*", "/resources/peer"): Sample("GET", "/resources/peer"),
        ("*", "/resources/peer/{tail}"): Sample("GET", "/resources/peer/mh1.AAAA.BBBB"),
        ("*", "/{tail}"): Sample("GET", "/no-such-route"),
    }
    assert key in samples, f"the door route {key} has no sample in {__name__}"
    return samples[key]


def door_expect(key: Key, *, registered: bool) -> Expect:
    """What a door route answers a caller the table lets through (any local uid: its own tasks)."""
    if key[1].startswith("/resources/peer"):
        # Passed on to the daemon, which checks the handle; with no daemon the peer door says so.
        if not registered:
            return Expect(503, contains="not registered")
        return Expect(400, contains="missing_audience") if key[1].endswith("{tail}") else Expect(404)
    if key == ("*", "/{tail}"):
        return Expect(404)
    return Expect(200, contains="tsk_" if key[0] == "POST" else "name")


_HOSTSOCK_BODIES: dict[str, Any] = {
    "/send": {"peer_url": "http://127.0.0.1:9", "text": "hi"},
    "/get": {"peer_url": "http://127.0.0.1:9", "task_id": "t"},
    "/share": {"path": "x", "peer": "p@127.0.0.1:9"},
    "/fetch": {"peer": "http://127.0.0.1:9", "handle": "mh1.x.y"},
    "/delegate": {"name": "solo", "version": "0.1.0", "task": "x"},
}


def hostsock_sample(key: Key, job_id: str) -> Sample:
    """A concrete request for each host-socket verb (a new verb fails here)."""
    method, path = key
    if key == ("GET", "/jobs/{job_id}"):
        return Sample(method, f"/jobs/{job_id}")
    assert method == "POST" and path in _HOSTSOCK_BODIES, f"the host socket route {key} has no sample in {__name__}"
    return Sample(method, path, _HOSTSOCK_BODIES[path])


DASHBOARD_ENDS = (("POST", "/action/{what}/{ident}"), ("POST", "/action/{what}"))
"""The actions (cancel a job, then drain the daemon): driven last, in this order."""

_PAGES = frozenset({"/", "/jobs", "/eventlog"})


def dashboard_sample(key: Key, job_id: str, session_id: str) -> Sample:
    """A concrete request for each dashboard route, naming a live job and its session (a new
    route fails here)."""
    method, route = key
    concrete = {
        "/job/{ident}": f"/job/{job_id}",
        "/session/{ident}": f"/session/{session_id}",
        "/fragment/{kind}/{ident}": f"/fragment/job/{job_id}",
        "/logs/{ident}": f"/logs/{job_id}",
        "/static/{name}": "/static/style.css",
        "/action/{what}/{ident}": f"/action/cancel/{job_id}",
        "/action/{what}": "/action/drain",
    }
    path = concrete.get(route, route)
    assert "{" not in path, f"the dashboard route {key} has no sample in {__name__}"
    return Sample(method, path, {} if method == "POST" else None)


def dashboard_expect(key: Key, *, cookie: bool) -> Expect:
    """What a dashboard route answers its owner's uid: with the run's cookie (and, for an action,
    our Origin and the CSRF value) it is served; without, a page says to open the printed URL and
    anything else is a bare ``forbidden``."""
    if not cookie:
        if key[0] == "GET" and key[1] in _PAGES:
            return Expect(403, contains="needs its link")
        return Expect(403, "forbidden")
    if key[0] == "POST":
        return Expect(200, contains="'ok': True")
    return Expect(200)
