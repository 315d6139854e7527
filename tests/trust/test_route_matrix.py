"""Every route of every listener has an entry in the authorization table, and route × caller class.

The routes are enumerated from the running applications (the daemon's TCP app, its admin socket,
a capsule door, a host socket, the dashboard), so a route added without a policy fails here.
The matrix drives every daemon route as: root, uid 65534 (a forked client), no credential, the
job's parent session's credential, another session's credential, a browser's cross-site request
and a page whose DNS name was rebound to this host; every admin route as root and as 65534; and
every daemon route as a caller on another host (the decision; tests/net/test_reach.py drives that
listener end to end). The process inside a contained capsule is tests/trust/test_capsule_reach.py.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from launcher.test_launch import start
from trust.attacker import NOBODY, owned_dir, request_as, system_python

from a2a.door import Door
from roost.capsule.hostsock import HostSocket
from roost.capsule.peerdoor import ROUTE_KEYS as PEER_DOOR_KEYS
from roost.core.authz import (
    ADMIN_REFUSED,
    CROSS_SITE,
    FOREIGN_HOST,
    LOCAL_ONLY,
    CallerFacts,
    Listener,
    Who,
    decide,
)
from roost.dashboard.admin import AdminSocket
from roost.dashboard.guard import Guard
from roost.dashboard.server import build_app as build_dashboard
from roost.http.authz import TABLES, path_policy, policy_for, route_keys
from tests.support.capsules import capsules
from tests.support.daemon import RunningDaemon
from tests.support.launcher import DOUBLE, job_final, wait_for
from tests.support.registry import RegistryBuilder

RUNTIME_ANYONE = (system_python(), str(DOUBLE))
__all__ = ["capsules"]  # the fixture, re-exported for this module
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="forking a client as uid 65534 needs root")


def _apps(d: RunningDaemon, tmp_path: Path) -> dict[Listener, list[tuple[str, str]]]:
    roost = d.roost
    assert roost.app is not None
    door = Door(name="x", version="0.1.0", session_id="ses_x", runner=_never)
    records = tmp_path / "records"
    records.mkdir(exist_ok=True)
    hs = HostSocket(records, daemon_url=None, credential=lambda: None, callers=lambda _pid: None)
    dash = build_dashboard(Guard(port=1), AdminSocket(tmp_path / "none.sock"))
    return {
        Listener.DAEMON: route_keys(roost.app),
        Listener.ADMIN: route_keys(roost._admin_app()),
        Listener.DOOR: route_keys(door.app) + list(PEER_DOOR_KEYS),  # the peer door in front of it
        Listener.HOST_SOCKET: route_keys(hs.build_app()),
        Listener.DASHBOARD: route_keys(dash),
    }


async def _never(_task: Any) -> Any:
    raise AssertionError("no task runs here")


async def test_every_running_route_has_exactly_one_policy(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    d = await start(daemon_factory, registry)
    for listener, keys in _apps(d, tmp_path).items():
        table = TABLES[listener]
        missing = [k for k in keys if policy_for(table, *k) is None]
        assert not missing, (listener, missing)
        # ...and no entry names a route that does not exist (a typo would deny a real route).
        stale = [k for k in table if k not in keys]
        assert not stale, (listener, stale)


def test_a_route_without_a_policy_is_denied() -> None:
    facts = CallerFacts(uid=0, local=True, daemon_uid=0)
    denial = decide(None, facts)
    assert denial is not None and denial.status == 403


@pytest.mark.parametrize("key", sorted(TABLES[Listener.DAEMON], key=str))
def test_a_caller_on_another_host_reaches_only_what_it_brings_a_token_for(key: tuple[str, str]) -> None:
    policy = TABLES[Listener.DAEMON][key]
    bare = CallerFacts(uid=None, local=False, daemon_uid=0)
    armed = CallerFacts(uid=None, local=False, daemon_uid=0, credential=True, approval=True, keeper=True)
    if policy.remote is None:
        assert decide(policy, armed) == decide(policy, bare)
        assert decide(policy, bare) is not None and decide(policy, bare).sentence == LOCAL_ONLY  # type: ignore[union-attr]
    else:
        assert decide(policy, armed) is None
        needs_token = policy.who not in (Who.ANYONE, Who.HANDLE)
        assert (decide(policy, bare) is not None) == needs_token, key


# -- the daemon, end to end ------------------------------------------------------------------------


def _sample(key: tuple[str, str], ids: dict[str, str]) -> tuple[str, str, Any]:
    """A concrete request for a route (its path parameters filled with live ids)."""
    method, path = key
    path = (
        path.replace("{session_id}", ids["session"])
        .replace("{job_id}", ids["job"])
        .replace("{tail}", "mh1.AAAA.BBBB")
        .replace("{sha256}", "0" * 64)
    )
    bodies: dict[str, Any] = {
        "/spawn": {"name": "solo", "version": "0.1.0"},
        "/register": {"session_id": "ses_" + os.urandom(8).hex(), "name": "boss", "version": "0.1.0"},
        "/deregister": {"status": "complete"},
        "/renew": {},
        "/jobs": {"name": "solo", "version": "0.1.0", "task": "sleep 30"},
        "/a2a/send": {"peer_url": "http://127.0.0.1:9", "text": "hi"},
        "/a2a/tasks/get": {"peer_url": "http://127.0.0.1:9", "task_id": "t"},
        "/a2a/tasks/cancel": {"peer_url": "http://127.0.0.1:9", "task_id": "t"},
        "/handles": {"path": "x", "peer": "p@127.0.0.1:9"},
        "/peer-fetch": {"peer": "http://127.0.0.1:9", "handle": "mh1.x.y"},
    }
    return ("GET" if method == "*" else method), path, bodies.get(path) if method == "POST" else None


# Routes whose allowed call would end what the rest of the matrix still uses: driven last.
_ENDS = {("POST", "/deregister"), ("POST", "/jobs/{job_id}/cancel")}


async def _call(d: RunningDaemon, method: str, path: str, body: Any, headers: dict[str, str]) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.request(method, d.url + path, json=body, headers=headers) as resp:
        try:
            return resp.status, await resp.json(content_type=None)
        except ValueError:
            return resp.status, None


async def test_daemon_route_by_caller_class(daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path) -> None:
    d = await start(daemon_factory, registry)
    # Root's top-level job, and a delegated job whose parent is the "own" session.
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "solo", "version": "0.1.0", "task": "sleep 60"})
    assert status == 201, job
    wd = tmp_path / "own"
    wd.mkdir()
    own_sid, own = await d.register_top("boss", workdir=str(wd))
    _, other = await d.register_top("boss")
    status, child, _, _ = await d.call(
        "POST",
        "/jobs",
        json={"name": "kid", "version": "0.1.0", "task": "sleep 60"},
        headers={"x-murmur-spawn-credential": own},
    )
    assert status == 201, child
    keys = sorted((k for k in route_keys(d.roost.app) if k not in _ENDS), key=str) + sorted(_ENDS, key=str)  # type: ignore[arg-type]
    table = TABLES[Listener.DAEMON]
    seen: dict[str, dict[tuple[str, str], int]] = {}
    for key in keys:
        policy = policy_for(table, *key)
        assert policy is not None
        ids = {"session": own_sid, "job": job["job_id"]}
        method, path, body = _sample(key, ids)
        # A page whose DNS name was rebound to 127.0.0.1: nothing answers it.
        status, answer = await _call(d, method, path, body, {"Host": "evil.example:7700"})
        assert (status, answer) == (403, {"error": FOREIGN_HOST}), key
        # A cross-site page: whatever acts is refused; reads are not (the same-origin policy
        # keeps their answers from the page).
        status, answer = await _call(d, method, path, body, {"Origin": "http://evil.example"})
        if policy.acts:
            assert (status, answer) == (403, {"error": CROSS_SITE}), key
        else:
            assert answer != {"error": CROSS_SITE}, key
        # Another local user, no credential.
        status, answer = await request_as(NOBODY, d.url, method, path, body)
        seen.setdefault("nobody", {})[key] = status
        if policy.who is Who.JOB:
            assert status == 404, (key, answer)  # root's job: unknown and not-yours look the same
        elif policy.who is Who.LAUNCH:
            assert status == 403 and "launch_uids" in answer["error"], answer
        else:
            assert answer not in ({"error": FOREIGN_HOST}, {"error": CROSS_SITE}, {"error": LOCAL_ONLY}), key
    # The job routes by credential: the parent's answers, another session's is told nothing.
    child_id = child["job_id"]
    own_h, other_h = {"x-murmur-spawn-credential": own}, {"x-murmur-spawn-credential": other}
    assert (await d.call("GET", f"/jobs/{child_id}", headers=own_h))[0] == 200
    assert (await d.call("GET", f"/jobs/{child_id}", headers=other_h))[0] == 404
    assert (await d.call("POST", f"/jobs/{child_id}/cancel", headers=other_h))[0] == 404
    assert (await d.call("GET", f"/jobs/{job['job_id']}", headers=own_h))[0] == 404  # not its child
    # Root (not inside a job) sees and controls both.
    assert (await d.call("GET", f"/jobs/{child_id}"))[0] == 200
    assert (await d.call("POST", f"/jobs/{child_id}/cancel", headers=own_h))[0] == 200
    assert (await d.call("POST", f"/jobs/{job['job_id']}/cancel"))[0] == 200
    assert (await job_final(d, job["job_id"]))["state"] == "terminated"


async def test_admin_route_by_caller_class(daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path) -> None:
    state = Path(tempfile.mkdtemp(prefix="roost-matrix-", dir="/tmp"))
    try:
        await _admin_matrix(await start(daemon_factory, registry, state_dir=state))
    finally:
        shutil.rmtree(state, ignore_errors=True)


async def _admin_matrix(d: RunningDaemon) -> None:
    path = d.roost.admin.path
    assert path is not None
    os.chmod(path.parent, 0o755)  # as if loosened by hand: SO_PEERCRED must still refuse 65534
    os.chmod(path, 0o666)
    for method, route in route_keys(d.roost._admin_app()):
        target = route.replace("{session_id}", "ses_x").replace("{job_id}", "job_x").replace("{ident}", "x")
        status, body = await _admin_as(NOBODY, path, method, target)
        assert (status, body) == (403, {"error": ADMIN_REFUSED}), (method, route)
        if method == "GET" and route not in ("/events",):
            status, body = await _admin_as(0, path, method, target)
            assert status != 403, (route, body)


async def _admin_as(uid: int, path: Path, method: str, target: str) -> tuple[int, Any]:
    """One request on the admin socket from a process of ``uid`` (a client that dropped to it)."""
    return await request_as(uid, f"unix:{path}", method, target)


async def test_job_routes_follow_the_owner_uid(daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path) -> None:
    """What was seen: uid 65534 read and cancelled root's job with no credential. Now a job answers
    its owner uid (and root), and another uid's own job answers it."""
    d = await start(daemon_factory, registry, launch_uids=(0, NOBODY), runtime_command=RUNTIME_ANYONE)
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "solo", "version": "0.1.0", "task": "sleep 60"})
    assert status == 201
    root_job = job["job_id"]
    scratch = Path(tempfile.mkdtemp(prefix="roost-owner-", dir="/tmp"))
    try:
        await _owner_checks(d, root_job, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


async def _owner_checks(d: RunningDaemon, root_job: str, scratch: Path) -> None:
    assert (await request_as(NOBODY, d.url, "GET", f"/jobs/{root_job}"))[0] == 404
    assert (await request_as(NOBODY, d.url, "POST", f"/jobs/{root_job}/cancel"))[0] == 404
    assert d.roost.launcher.jobs[root_job].state == "running"
    os.chmod(scratch, 0o755)
    wd = owned_dir(scratch, "wd", NOBODY)
    status, mine = await request_as(
        NOBODY, d.url, "POST", "/jobs", {"name": "solo", "version": "0.1.0", "workdir": str(wd), "task": "sleep 60"}
    )
    assert status == 201, mine
    assert (await request_as(NOBODY, d.url, "GET", f"/jobs/{mine['job_id']}"))[0] == 200
    assert (await d.call("GET", f"/jobs/{mine['job_id']}"))[0] == 200  # root, not inside a job
    assert (await request_as(NOBODY, d.url, "POST", f"/jobs/{mine['job_id']}/cancel"))[0] == 200
    await wait_for(lambda: d.roost.launcher.jobs[mine["job_id"]].final, 20)
    assert (await d.call("POST", f"/jobs/{root_job}/cancel"))[0] == 200


async def test_door_routes_by_caller_class(registry: RegistryBuilder, capsules: Any, tmp_path: Path) -> None:
    """Every route of a running capsule door: a local caller is served; a rebound Host and a
    cross-site page that acts are refused; a corrupt compressed body is a 400 sentence."""
    from tests.support.capsules import add_examples, base_env

    add_examples(registry, "echo")
    cp = await capsules.start("echo@0.1.0", tmp_path / "door", registry=registry.root, env=base_env())
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {"message": {"kind": "message", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}},
    }
    routes = [
        ("POST", "/", body),
        ("GET", "/.well-known/agent-card.json", None),
        ("GET", "/.well-known/agent.json", None),
        ("GET", "/resources/peer/mh1.AAAA.BBBB", None),  # passed on to the daemon, which checks it
    ]
    async with aiohttp.ClientSession() as http:
        for method, path, payload in routes:
            policy = path_policy(TABLES[Listener.DOOR], method, path)
            assert policy is not None
            async with http.request(method, cp.url + path, json=payload, headers={"Host": "evil.example"}) as resp:
                assert (resp.status, await resp.json()) == (403, {"error": FOREIGN_HOST}), path
            headers = {"Origin": "http://evil.example", "Content-Type": "text/plain"}
            async with http.request(method, cp.url + path, json=payload, headers=headers) as resp:
                assert (resp.status == 403) == policy.acts, (path, resp.status)
            async with http.request(method, cp.url + path, json=payload) as resp:
                if policy.who is Who.HANDLE:  # no daemon behind this capsule: the peer door says so
                    assert resp.status == 503 and "not registered" in await resp.text(), path
                else:
                    assert resp.status == 200, (path, await resp.text())
        gz = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
        async with http.post(cp.url + "/", data=b"\x1f\x8b\x08\x00" + os.urandom(32), headers=gz) as resp:
            assert resp.status == 400 and "Content-Encoding" in (await resp.json())["error"]
    assert await cp.terminate() == 143
