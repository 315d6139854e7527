"""Every route of the daemon's TCP app as a caller on another host, end to end on ``--listen``.

The daemon is the real ``mur-roost`` process with TLS on its ``listen`` listener, inside a
network namespace that gives it and this test's client real non-loopback addresses
(tests/net/support.py says how). Every route, enumerated from the application, is driven from
10.77.0.2 twice: bare (``remote``), and presenting the token the route names (``remote_token``:
a session credential, a spawn approval, a node keeper's token); each answer is compared with
the authorization table's ``remote`` column and, where it lets the caller through, with the
route's own answer (tests/trust/matrix.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import aiohttp

from roost.core.authz import Listener, Who
from roost.daemon.compose import Roost
from roost.http.app import build_app
from roost.http.authz import DAEMON_ROUTES, policy_for, route_keys
from roost.state.config import Config
from roost.system.tlsclient import client_ssl_context
from tests.net.support import CLIENT_IP, add_capsule, tls_daemon
from tests.trust.daemoncells import ENDS, World, daemon_expect, daemon_sample
from tests.trust.matrix import Expect, Ledger, Sample

CLASSES = ("remote", "remote_token")
CRED = "x-murmur-spawn-credential"


async def _routes(tmp_path: Path) -> list[tuple[str, str]]:
    """The routes of the daemon's TCP application, as the process under test builds it."""
    roost = Roost(Config.model_validate({"registry_path": tmp_path, "state_dir": tmp_path / "enum"}))
    try:
        return route_keys(build_app(roost.services))
    finally:
        await roost.a2a.close()
        roost.executor.shutdown()


async def test_daemon_route_by_remote_caller(tmp_path: Path) -> None:
    keys = await _routes(tmp_path)
    registry, src = tmp_path / "registry", tmp_path / "src"
    registry.mkdir()
    add_capsule(registry, src, "boss", spawn_allow=("kid", "boss"))
    add_capsule(registry, src, "kid")
    with tls_daemon(tmp_path, registry, "boss") as remote:
        here, there = f"http://127.0.0.1:{remote.daemon.port}", remote.daemon.network_url or ""
        ca, token = remote.pki.ca, remote.keeper_token
        answers = remote.ns.run(lambda: _drive(keys, here, there, ca, token, tmp_path))
    ledger = Ledger(Listener.DAEMON, keys)
    for key, caller, got in answers:
        ledger.check(key, caller, got, _expect(key, caller))
    ledger.finish(CLASSES)


def _expect(key: tuple[str, str], caller: str) -> Expect | None:
    """What a route answers a remote caller the table lets through: one bringing no token reaches
    only ``/health`` and a redeem (which checks its handle itself); one bringing the route's token
    is answered as the session, approval or keeper it presents."""
    policy = policy_for(DAEMON_ROUTES, *key)
    assert policy is not None
    if policy.who is Who.KEEPER:
        return Expect(404)  # a keeper's token, an unknown digest
    if policy.who is Who.REGISTER:
        return Expect(200, contains="credential")  # a child, with its approval
    if policy.who is Who.ANYONE:
        return Expect(200, contains="{}") if key == ("GET", "/health") else None  # upstream's empty answer
    return daemon_expect(key, "own" if caller == "remote_token" else "root")


async def _drive(
    keys: list[tuple[str, str]], here: str, there: str, ca: Path, token: str, tmp: Path
) -> list[tuple[tuple[str, str], str, tuple[int, Any]]]:
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(ca), local_addr=(CLIENT_IP, 0))
    out: list[tuple[tuple[str, str], str, tuple[int, Any]]] = []
    async with aiohttp.ClientSession() as lo, aiohttp.ClientSession(connector=connector) as net:
        world = await _world(lo, here, tmp)
        order = sorted((k for k in keys if k not in ENDS), key=str) + [k for k in ENDS if k in keys]
        for key in order:
            sample = daemon_sample(key, world)
            out.append((key, "remote", await _call(net, there, sample, {})))
            headers = await _token_for(lo, here, key, world, token)
            out.append((key, "remote_token", await _call(net, there, sample, headers)))
    return out


async def _world(lo: aiohttp.ClientSession, here: str, tmp: Path) -> World:
    """Two top-level sessions registered on the daemon's own host, and a child of the first."""
    sessions = []
    for name in ("own", "other"):
        wd = tmp / f"wd-{name}"
        wd.mkdir()
        sid = f"ses_{os.urandom(8).hex()}"
        body = {"session_id": sid, "name": "boss", "version": "0.1.0", "workdir": str(wd)}
        status, answer = await _call(lo, here, Sample("POST", "/register", body), {})
        assert status == 200, answer
        sessions.append((sid, answer["credential"]))
    (own_sid, own), (other_sid, other) = sessions
    launch = Sample("POST", "/jobs", {"name": "kid", "version": "0.1.0", "task": "x"})
    status, job = await _call(lo, here, launch, {CRED: own})
    assert status == 201, job
    return World(own_sid, own, other_sid, other, job["job_id"])


async def _token_for(
    lo: aiohttp.ClientSession, here: str, key: tuple[str, str], world: World, keeper: str
) -> dict[str, str]:
    """The token the route names, as a caller that holds it would present it."""
    policy = policy_for(DAEMON_ROUTES, *key)
    assert policy is not None
    if policy.who is Who.KEEPER:
        return {"authorization": f"Bearer {keeper}"}
    if policy.who is Who.REGISTER:  # a spawn approval the own session obtained for this child
        status, grant = await _call(
            lo, here, Sample("POST", "/spawn", {"name": "boss", "version": "0.1.0"}), {CRED: world.own_cred}
        )
        assert status == 200, grant
        return {"x-murmur-spawn-approval": grant["approval"]}
    return {CRED: world.own_cred}


async def _call(http: aiohttp.ClientSession, base: str, sample: Sample, headers: dict[str, str]) -> tuple[int, Any]:
    async with http.request(sample.method, base + sample.path, json=sample.body, headers=headers) as resp:
        try:
            return resp.status, await resp.json(content_type=None)
        except ValueError:
            return resp.status, (await resp.read()).decode("utf-8", "replace")
