"""Callers from another host reach only endpoints that authenticate them (the ``remote`` column of
roost/http/authz.py's table).

Why a network namespace: the rule keys on whether the caller's address is loopback, so the
test needs a caller with a real non-loopback source address talking to a real non-loopback
listener. A namespace gives that on any Linux machine the suite runs on as root, without
touching the host's interfaces (tests/net/support.py says how). The daemon is the real
``mur-roost`` process with TLS on its ``listen`` listener; the remote client verifies it
against the test CA and connects from 10.77.0.2, the local one uses the loopback listener.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from roost.backends.ray.node.artifactfetch import fetch_artifact
from roost.core.authz import LOCAL_ONLY, Need
from roost.core.errors import IDENTITY_REFUSAL
from roost.http.authz import REMOTE_ROUTES, remote_need
from roost.system.tlsclient import client_ssl_context
from tests.net.support import CLIENT_IP, SERVER_IP, add_capsule, netns_or_skip, start_daemon, tls_daemon

CRED = "x-murmur-spawn-credential"
APPROVAL = "x-murmur-spawn-approval"


def test_the_table_names_only_authenticating_routes_and_health() -> None:
    assert remote_need("GET", "/health") is Need.NOTHING
    assert remote_need("HEAD", "/health") is Need.NOTHING
    for method, path in [
        ("GET", "/status/{session_id}"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("GET", "/livez"),
        ("GET", "/readyz"),
        ("GET", "/healthz"),
        ("GET", "/debug/loop-lag"),
        ("GET", "/jobs"),
    ]:
        assert remote_need(method, path) is None, path
    assert remote_need("POST", "/register") is Need.APPROVAL
    assert remote_need("POST", "/jobs") is Need.CREDENTIAL
    nothing = [k for k, v in REMOTE_ROUTES.items() if v is Need.NOTHING]
    assert nothing == [("GET", "/health")]


async def _call(http: aiohttp.ClientSession, method: str, url: str, **kw: Any) -> tuple[int, Any, bytes]:
    async with http.request(method, url, **kw) as resp:
        raw = await resp.read()
        try:
            body = await resp.json(content_type=None)
        except ValueError:
            body = None
        return resp.status, body, raw


def test_remote_callers_reach_only_authenticating_endpoints(tmp_path: Path) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    src = tmp_path / "src"
    add_capsule(registry, src, "orchestrator", spawn_allow=("worker",))
    sha = add_capsule(registry, src, "worker")
    artifact = (registry / "worker" / "0.1.0" / "worker-0.1.0.mur.zip").read_bytes()
    with tls_daemon(tmp_path, registry, "orchestrator") as remote_daemon:
        daemon, ca, token = remote_daemon.daemon, remote_daemon.pki.ca, remote_daemon.keeper_token
        url = daemon.network_url or ""
        out = remote_daemon.ns.run(lambda: _scenario(daemon.port, url, ca, token, sha, tmp_path))
    local, remote = out["local"], out["remote"]
    # On this host nothing changed.
    assert local["status"][0] == 200 and local["metrics"][0] == 200 and local["readyz"][0] == 200
    # From another host: health, with nothing in it; nothing unauthenticated.
    assert remote["health"][:2] == (200, {})
    for name in ("status", "metrics", "openapi", "livez", "readyz", "healthz", "loop_lag"):
        assert remote[name][:2] == (403, {"error": LOCAL_ONLY}), name
    assert remote["register_top"][0] == 403 and "spawn approval" in remote["register_top"][1]["error"]
    assert remote["launch_top"][0] == 403 and "session credential" in remote["launch_top"][1]["error"]
    assert remote["job_top"][0] == 403 and "session credential" in remote["job_top"][1]["error"]
    assert remote["unknown"][0] == 404
    # ...and every authenticating endpoint, each verifying its token as for anyone.
    assert remote["launch_forged"][:2] == (403, {"error": IDENTITY_REFUSAL})
    assert remote["spawn"][0] == 200
    assert remote["register_child"][0] == 200
    assert remote["renew"][0] == 200
    assert remote["deregister"][0] == 200
    assert remote["redeem"][0] == 400 and remote["redeem"][1]["error"] == "missing_audience"
    assert remote["artifact_no_token"][0] == 403 and "keeper" in remote["artifact_no_token"][1]["error"]
    assert remote["artifact_forged"][:2] == (403, {"error": IDENTITY_REFUSAL})
    assert remote["artifact"][0] == 200 and hashlib.sha256(remote["artifact"][2]).hexdigest() == sha
    assert out["fetched"] == artifact


async def _scenario(port: int, network_url: str, ca: Path, token: str, sha: str, tmp: Path) -> dict[str, Any]:
    here = f"http://127.0.0.1:{port}"
    there = network_url
    remote: dict[str, Any] = {}
    local: dict[str, Any] = {}
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(ca), local_addr=(CLIENT_IP, 0))
    async with aiohttp.ClientSession() as lo, aiohttp.ClientSession(connector=connector) as net:
        sid = f"ses_{os.urandom(8).hex()}"
        status, body, _ = await _call(
            lo, "POST", here + "/register", json={"session_id": sid, "name": "orchestrator", "version": "0.1.0"}
        )
        assert status == 200, body
        cred = body["credential"]
        local["status"] = await _call(lo, "GET", f"{here}/status/{sid}")
        local["metrics"] = await _call(lo, "GET", f"{here}/metrics")
        local["readyz"] = await _call(lo, "GET", f"{here}/readyz")

        remote["health"] = await _call(net, "GET", there + "/health")
        remote["status"] = await _call(net, "GET", f"{there}/status/{sid}")
        for name, path in [
            ("metrics", "/metrics"),
            ("openapi", "/openapi.json"),
            ("livez", "/livez"),
            ("readyz", "/readyz?verbose"),
            ("healthz", "/healthz"),
            ("loop_lag", "/debug/loop-lag"),
        ]:
            remote[name] = await _call(net, "GET", there + path)
        child = {"session_id": f"ses_{os.urandom(8).hex()}", "name": "worker", "version": "0.1.0"}
        top = {"session_id": f"ses_{os.urandom(8).hex()}", "name": "orchestrator", "version": "0.1.0"}
        remote["register_top"] = await _call(net, "POST", there + "/register", json=top)
        remote["launch_top"] = await _call(
            net, "POST", there + "/jobs", json={"name": "orchestrator", "version": "0.1.0"}
        )
        remote["job_top"] = await _call(net, "GET", there + "/jobs/job_" + "0" * 32)
        remote["unknown"] = await _call(net, "GET", there + "/no-such-endpoint")
        remote["launch_forged"] = await _call(
            net, "POST", there + "/jobs", json={"name": "worker", "version": "0.1.0"}, headers={CRED: "msc1.AAAA.BBBB"}
        )
        remote["spawn"] = await _call(
            net, "POST", there + "/spawn", json={"name": "worker", "version": "0.1.0"}, headers={CRED: cred}
        )
        approval = remote["spawn"][1]["approval"]
        remote["register_child"] = await _call(
            net, "POST", there + "/register", json=child, headers={APPROVAL: approval}
        )
        child_cred = remote["register_child"][1]["credential"]
        remote["renew"] = await _call(net, "POST", there + "/renew", headers={CRED: child_cred})
        remote["deregister"] = await _call(
            net, "POST", there + "/deregister", json={"outcome": "complete"}, headers={CRED: child_cred}
        )
        remote["redeem"] = await _call(net, "GET", there + "/resources/peer/mh1.AAAA.BBBB")
        remote["artifact_no_token"] = await _call(net, "GET", f"{there}/artifacts/{sha}")
        remote["artifact_forged"] = await _call(
            net, "GET", f"{there}/artifacts/{sha}", headers={"authorization": "Bearer mnk1.AAAA.BBBB"}
        )
        remote["artifact"] = await _call(
            net, "GET", f"{there}/artifacts/{sha}", headers={"authorization": f"Bearer {token}"}
        )
    # The keeper's own helper, from the other host's address (urllib binds no source: the
    # namespace's route to SERVER_IP leaves from it, and the daemon sees a non-loopback peer).
    path = await fetch_artifact(there, sha, tmp / "cache", token=token, ca=ca)
    return {"local": local, "remote": remote, "fetched": path.read_bytes()}


@pytest.mark.parametrize("flag", [[], ["--allow-plaintext-network"]])
def test_plaintext_network_listener_is_refused_unless_allowed(tmp_path: Path, flag: list[str]) -> None:
    from tests.net.support import run_refused

    with netns_or_skip() as ns:
        if not flag:
            proc = run_refused(
                ["--state-dir", str(tmp_path / "s"), "--registry-path", str(tmp_path), "--listen", f"{SERVER_IP}:0"]
            )
            assert proc.returncode == 7
            assert (
                proc.stderr.strip()
                .splitlines()[-1]
                .startswith(
                    f"mur-roost: refusing to serve plain HTTP on listen {SERVER_IP}:0, which is not a loopback address"
                )
            )
            assert not (tmp_path / "s").exists()  # refused before the state dir is touched
            return
        daemon = start_daemon(
            ["--state-dir", str(tmp_path / "s"), "--registry-path", str(tmp_path), "--listen", f"{SERVER_IP}:0", *flag],
            prefix=ns.prefix,
        )
        try:
            assert daemon.network_url is not None and daemon.network_url.startswith(f"http://{SERVER_IP}:")

            async def probe() -> tuple[int, Any, bytes]:
                conn = aiohttp.TCPConnector(local_addr=(CLIENT_IP, 0))
                async with aiohttp.ClientSession(connector=conn) as http:
                    return await _call(http, "GET", f"{daemon.network_url}/metrics")

            assert ns.run(probe)[:2] == (403, {"error": LOCAL_ONLY})
        finally:
            assert daemon.stop() == 0


async def test_every_declared_route_exists(tmp_path: Path) -> None:
    """A typo in the table would silently make an endpoint local-only: each entry names a real route."""
    from roost.daemon.compose import Roost
    from roost.http.app import build_app
    from roost.state.config import Config

    roost = Roost(Config.model_validate({"registry_path": tmp_path, "state_dir": tmp_path / "s"}))
    try:
        app = build_app(roost.services)
        served = {(r.method, r.resource.canonical) for r in app.router.routes() if r.resource is not None}
        assert set(REMOTE_ROUTES) <= served, set(REMOTE_ROUTES) - served
        local_only = {k for k in served if remote_need(*k) is None}
        assert ("GET", "/status/{session_id}") in local_only and ("GET", "/metrics") in local_only
    finally:
        await roost.a2a.close()
        roost.executor.shutdown()
