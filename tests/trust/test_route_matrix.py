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

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from launcher.test_launch import start
from trust.attacker import NOBODY, owned_dir, request_as, system_python

from roost.core.authz import (
    LOCAL_ONLY,
    CallerFacts,
    Listener,
    Who,
    decide,
)
from roost.http.authz import TABLES, policy_for, route_keys
from tests.support.capsules import capsules
from tests.support.daemon import RunningDaemon
from tests.support.launcher import DOUBLE, job_final, wait_for
from tests.support.registry import RegistryBuilder
from tests.trust.admincells import ADMIN_ENDS, admin_expect, admin_sample
from tests.trust.daemoncells import DAEMON_CLASSES, ENDS, World, daemon_expect, daemon_sample, token_headers
from tests.trust.edgecells import dashboard_keys, door_expect, door_keys, door_sample, hostsock_keys
from tests.trust.matrix import BROWSER_POST, EVIL_HOST, EVIL_ORIGIN, Ledger, Sample, send

RUNTIME_ANYONE = (system_python(), str(DOUBLE))
__all__ = ["capsules"]  # the fixture, re-exported for this module
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="forking a client as uid 65534 needs root")


def _apps(d: RunningDaemon, tmp_path: Path) -> dict[Listener, list[tuple[str, str]]]:
    roost = d.roost
    assert roost.app is not None
    records = tmp_path / "records"
    records.mkdir(exist_ok=True)
    return {
        Listener.DAEMON: route_keys(roost.app),
        Listener.ADMIN: route_keys(roost._admin_app()),
        Listener.DOOR: door_keys(),
        Listener.HOST_SOCKET: hostsock_keys(records),
        Listener.DASHBOARD: dashboard_keys(tmp_path / "none.sock"),
    }


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


async def test_daemon_route_by_caller_class(daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path) -> None:
    """Every route of the daemon's TCP app, as every local caller class: each answer is the
    table's refusal, or what the route's own check answers that caller."""
    d = await start(daemon_factory, registry)
    world = await _world(d, tmp_path)
    keys = route_keys(d.roost.app)
    ledger = Ledger(Listener.DAEMON, keys)
    order = sorted((k for k in keys if k not in ENDS), key=str) + [k for k in ENDS if k in keys]
    for key in order:
        for caller in DAEMON_CLASSES:
            got = await _drive(d, daemon_sample(key, world), caller, world)
            ledger.check(key, caller, got, daemon_expect(key, caller))
    ledger.finish(DAEMON_CLASSES)
    # Root (not inside a job) saw and cancelled its job's child; the parent's own credential too.
    assert (await job_final(d, world.job))["state"] == "terminated"


async def _world(d: RunningDaemon, tmp_path: Path) -> World:
    own_wd, other_wd = tmp_path / "own", tmp_path / "other"
    own_wd.mkdir()
    other_wd.mkdir()
    own_sid, own = await d.register_top("boss", workdir=str(own_wd))
    other_sid, other = await d.register_top("boss", workdir=str(other_wd))
    status, child, _, _ = await d.call(
        "POST",
        "/jobs",
        json={"name": "kid", "version": "0.1.0", "task": "sleep 60"},
        headers={"x-murmur-spawn-credential": own},
    )
    assert status == 201, child
    return World(own_sid, own, other_sid, other, child["job_id"])


async def _drive(d: RunningDaemon, sample: Sample, caller: str, world: World) -> tuple[int, Any]:
    """One cell: ``sample`` sent as ``caller`` would send it."""
    if caller == "other_uid":
        return await request_as(NOBODY, d.url, sample.method, sample.path, sample.body)
    if caller == "rebound":
        return await send(d.url, sample, {"Host": EVIL_HOST})
    if caller == "cross_site":
        browser = {"Origin": EVIL_ORIGIN}
        if sample.method == "POST":  # a page's simple POST: its body as text, no preflight
            return await send(d.url, sample, {**browser, "Content-Type": BROWSER_POST}, data=json.dumps(sample.body))
        return await send(d.url, sample, browser)
    return await send(d.url, sample, token_headers(caller, world))


async def test_admin_route_by_caller_class(scratch: Path, daemon_factory: Any, registry: RegistryBuilder) -> None:
    """Every admin route as uid 65534 (the socket loosened by hand: its uid check still refuses)
    and as the operator. ``scratch`` comes first so the daemon stops before its state goes."""
    await _admin_matrix(await start(daemon_factory, registry, state_dir=scratch / "state"))


async def _admin_matrix(d: RunningDaemon) -> None:
    path = d.roost.admin.path
    assert path is not None
    os.chmod(path.parent, 0o755)  # as if loosened by hand: SO_PEERCRED must still refuse 65534
    os.chmod(path, 0o666)
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "solo", "version": "0.1.0", "task": "sleep 60"})
    assert status == 201, job
    sid, _ = await d.register_top("boss")
    keys = route_keys(d.roost._admin_app())
    ledger = Ledger(Listener.ADMIN, keys)
    order = sorted((k for k in keys if k not in ADMIN_ENDS), key=str) + [k for k in ADMIN_ENDS if k in keys]
    for key in order:
        sample = admin_sample(key, sid, job["job_id"])
        got = await request_as(NOBODY, f"unix:{path}", sample.method, sample.path, sample.body)
        ledger.check(key, "other_uid", got, None)
        ledger.check(key, "root", await send(f"unix:{path}", sample), admin_expect(key))
    ledger.finish(("other_uid", "root"))
    assert d.roost.referee.draining  # the last cell: the operator drained the daemon


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


DOOR_CLASSES = ("rebound", "cross_site", "other_uid", "root")


async def test_door_routes_by_caller_class(registry: RegistryBuilder, capsules: Any, tmp_path: Path) -> None:
    """Every route of a running capsule door, as every caller class that reaches it (it listens on
    loopback only): a local caller is served (another uid too: its tasks are its own); a rebound
    Host and a cross-site page that acts are refused; a corrupt compressed body is a 400 sentence."""
    from tests.support.capsules import add_examples, base_env

    add_examples(registry, "echo")
    cp = await capsules.start("echo@0.1.0", tmp_path / "door", registry=registry.root, env=base_env())
    keys = door_keys()
    ledger = Ledger(Listener.DOOR, keys)
    for key in keys:
        sample = door_sample(key)
        expect = door_expect(key, registered=False)
        for caller in DOOR_CLASSES:
            if caller == "other_uid":
                got = await request_as(NOBODY, cp.url, sample.method, sample.path, sample.body)
            elif caller == "rebound":
                got = await send(cp.url, sample, {"Host": "evil.example"})
            elif caller == "cross_site":
                browser = {"Origin": EVIL_ORIGIN, "Content-Type": BROWSER_POST}
                got = await send(cp.url, sample, browser, data=json.dumps(sample.body))
            else:
                got = await send(cp.url, sample)
            ledger.check(key, caller, got, expect)
    ledger.finish(DOOR_CLASSES)
    async with aiohttp.ClientSession() as http:
        gz = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
        async with http.post(cp.url + "/", data=b"\x1f\x8b\x08\x00" + os.urandom(32), headers=gz) as resp:
            assert resp.status == 400 and "Content-Encoding" in (await resp.json())["error"]
    assert await cp.terminate() == 143
