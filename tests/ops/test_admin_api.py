"""The admin socket in-process: owner-only, never on TCP, peer-uid checked; key rotation, reload,
drain readiness, the events stream."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import socket
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from ops.support import admin_http

from roost.admin.server import peer_uid
from roost.core.errors import IDENTITY_REFUSAL
from roost.core.refusals import DRAINING_LAUNCH
from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder

CRED = "x-murmur-spawn-credential"
ADMIN_PATHS = ["/status", "/sessions", "/tree", "/jobs", "/config", "/events", "/reconcile"]


async def admin(d: RunningDaemon, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    async with (
        admin_http(d.config.admin_socket_path) as http,
        http.request(method, "http://admin" + path, json=body) as resp,
    ):
        raw = await resp.read()
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, raw.decode()


async def test_socket_is_owner_only(daemon: RunningDaemon) -> None:
    path = daemon.config.admin_socket_path
    st = path.lstat()
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
    assert stat.S_IMODE(path.parent.stat().st_mode) & 0o077 == 0
    status, body = await admin(daemon, "GET", "/status")
    assert status == 200 and body["admin_socket"] == str(path)


@pytest.mark.parametrize("path", ADMIN_PATHS)
async def test_admin_routes_are_not_on_tcp(daemon: RunningDaemon, path: str) -> None:
    status, body, _, _ = await daemon.call("GET", path)
    assert status in (404, 405) and set(body) == {"error"}  # GET /jobs: only POST /jobs exists on TCP
    for method, p in (("POST", "/drain"), ("POST", "/keys/rotate"), ("POST", "/reload")):
        status, _, _, _ = await daemon.call(method, p)
        assert status in (404, 405)
    assert daemon.roost.referee.draining is False


async def test_admin_server_binds_no_inet_socket(daemon: RunningDaemon) -> None:
    runner = daemon.roost.admin._runner
    assert runner is not None
    for site in runner.sites:
        server = getattr(site, "_server", None)
        for sock in getattr(server, "sockets", []) or []:
            assert sock.family == socket.AF_UNIX


def _connect_as(uid: int, path: str) -> int:
    """Fork; the child drops to ``uid`` and asks /status; returns the HTTP status it saw (or 0)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(path)
            s.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = s.recv(65536)
            code = int(data.split(b" ", 2)[1])
        except PermissionError:
            code = 1
        except BaseException:
            code = 2
        finally:
            os.write(w, str(code).encode())
            os._exit(0)
    os.close(w)
    out = b""
    while chunk := os.read(r, 100):
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return int(out or b"0")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another uid")
async def test_admin_socket_refuses_another_uid(daemon_factory: Any, registry: RegistryBuilder) -> None:
    import shutil
    import tempfile

    registry.add("orchestrator")
    # A directory another user can traverse (but not write), so the socket's own mode and the
    # peer-credential check are what is tested.
    sockdir = Path(tempfile.mkdtemp(prefix="roost-uid-", dir="/tmp"))
    try:
        os.chmod(sockdir, 0o711)
        path = sockdir / "admin.sock"
        d: RunningDaemon = await daemon_factory(registry.root, admin_socket=path)
        nobody = pwd.getpwnam("nobody").pw_uid
        # 0600 and root-owned: nobody cannot even connect.
        assert await asyncio.to_thread(_connect_as, nobody, str(path)) == 1
        # Loosened by hand (an operator mistake): SO_PEERCRED still refuses with 403.
        os.chmod(path, 0o666)
        assert await asyncio.to_thread(_connect_as, nobody, str(path)) == 403
        assert await asyncio.to_thread(_connect_as, 0, str(path)) == 200
        await d.roost.stop()
    finally:
        shutil.rmtree(sockdir, ignore_errors=True)


def test_peer_uid_of_a_socketpair() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert peer_uid(a) == os.geteuid()
    with socket.socket(socket.AF_INET) as s:
        assert peer_uid(s) is None
    assert peer_uid(None) is None


async def test_long_socket_path(daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path) -> None:
    registry.add("orchestrator")
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    d: RunningDaemon = await daemon_factory(registry.root, state_dir=deep, spawn_allow=("orchestrator",))
    assert len(str(d.config.admin_socket_path)) > 107
    from roost.ctl.client import AdminClient

    body = await asyncio.to_thread(AdminClient(d.config.admin_socket_path).call, "GET", "/status")
    assert body["state_dir"] == str(deep)


async def test_second_daemon_on_the_same_socket_is_refused(
    daemon: RunningDaemon, daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    from roost.daemon.startup import StartupError

    with pytest.raises(StartupError, match="another daemon answers on the admin socket"):
        await daemon_factory(registry.root, state_dir=tmp_path / "other", admin_socket=daemon.config.admin_socket_path)


async def test_key_rotation_revokes_credentials_and_approvals(daemon: RunningDaemon) -> None:
    _sid, cred = await daemon.register_top("orchestrator")
    status, grant = await daemon.spawn(cred, "worker")
    assert status == 200
    status, body = await admin(daemon, "POST", "/keys/rotate")
    assert status == 200 and body["sessions_affected"] == 1 and body["approvals_revoked"] == 1
    assert await daemon.spawn(cred, "worker") == (403, {"error": IDENTITY_REFUSAL})
    status, body, _, _ = await daemon.call(
        "POST",
        "/register",
        json={"session_id": "ses_after", "name": "worker", "version": "0.1.0"},
        headers={"x-murmur-spawn-approval": grant["approval"]},
    )
    assert (status, body) == (403, {"error": IDENTITY_REFUSAL})
    status, _, _, _ = await daemon.call("POST", "/deregister", json={"outcome": "complete"}, headers={CRED: cred})
    assert status == 403
    # New sessions get credentials under the new key.
    _, cred2 = await daemon.register_top("orchestrator")
    assert (await daemon.spawn(cred2, "worker"))[0] == 200
    assert daemon.roost.referee.keys is daemon.keys


async def test_reload_keeps_sessions_and_forgets_caches(daemon: RunningDaemon) -> None:
    sid, cred = await daemon.register_top("orchestrator")
    await daemon.roost.referee.resolve("worker", "0.1.0")
    assert daemon.roost.referee.artifacts.resolved
    status, body = await admin(daemon, "POST", "/reload")
    assert status == 200 and body["reloaded"] is True
    assert not daemon.roost.referee.artifacts.resolved
    assert (await daemon.spawn(cred, "worker"))[0] == 200  # the session and its credential survive
    status, body = await admin(daemon, "GET", f"/sessions/{sid}")
    assert status == 200 and body["status"] == "running"


async def test_reload_applies_a_new_config(daemon: RunningDaemon) -> None:
    from roost.state.config import Config

    old = daemon.config
    values = old.model_dump()
    values.update(spawn_allow=("orchestrator", "worker"), max_depth=1, port=1234)
    daemon.config_loader = lambda: Config.model_validate(values)
    status, body = await admin(daemon, "POST", "/reload")
    assert status == 200 and set(body["changed"]) == {"spawn_allow", "max_depth"}
    assert body["needs_restart"] == ["port"]
    assert daemon.roost.referee.config.spawn_allow == ("orchestrator", "worker")
    assert daemon.config.port == old.port
    await daemon.register_top("worker")  # now allowed top-level


async def test_readyz_503_during_drain(daemon: RunningDaemon) -> None:
    async with daemon.http.get(daemon.url + "/readyz") as resp:
        assert resp.status == 200 and await resp.text() == "ok\n"
    _, cred = await daemon.register_top("orchestrator")
    stops: list[str] = []
    daemon.stop_callback = stops.append
    status, body = await admin(daemon, "POST", "/drain")
    assert status == 200 and body["running_sessions"] == 1
    async with daemon.http.get(daemon.url + "/readyz?verbose") as resp:
        text = await resp.text()
        assert resp.status == 503 and "[-]not-draining failed" in text
    async with daemon.http.get(daemon.url + "/livez") as resp:
        assert resp.status == 200  # liveness does not depend on drain
    status, body = await daemon.spawn(cred, "worker")
    assert status == 403 and "draining" in body["error"]
    assert stops == []  # a session still runs
    status, _, _, _ = await daemon.call("POST", "/deregister", json={"outcome": "complete"}, headers={CRED: cred})
    assert status == 200
    for _ in range(50):
        if stops:
            break
        await asyncio.sleep(0.05)
    assert stops == ["drain"]


async def test_admin_launch_on_a_draining_daemon_is_refused_by_the_one_admission(daemon: RunningDaemon) -> None:
    """``roostctl spawn`` while draining: the launcher's admission refuses, in its own sentence,
    and a body it cannot parse is a 400 (the route parses it before anything decides)."""
    await daemon.register_top("orchestrator")  # a running session keeps the drain open
    stops: list[str] = []
    daemon.stop_callback = stops.append
    assert (await admin(daemon, "POST", "/drain"))[0] == 200
    status, body = await admin(daemon, "POST", "/jobs", {"name": "worker", "version": "0.1.0", "task": "x"})
    assert (status, body["error"]) == (403, DRAINING_LAUNCH)
    assert body["error"] == "this daemon is draining: it finishes running jobs and starts no new ones"
    status, body = await admin(daemon, "POST", "/jobs", {"name": "worker"})
    assert (status, body["error"]) == (400, "invalid JSON: missing field 'version'")
    assert daemon.roost.launcher.jobs == {} and stops == []


async def test_events_stream_ndjson(daemon: RunningDaemon) -> None:
    span = daemon.roost.events.start("roost.process.reconcile", **{"roost.process.matched": 0})
    async with (
        admin_http(daemon.config.admin_socket_path) as http,
        http.get("http://admin/events?follow=1&replay=1") as resp,
    ):
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("application/x-ndjson")
        first = json.loads(await resp.content.readline())
        assert first["operation"] == "roost.process.reconcile" and first["type"] == "operation.started"
        span.completed()
        second = json.loads(await resp.content.readline())
        assert second["type"] == "operation.completed" and second["sequence"] == first["sequence"] + 1
    status, _body = await admin(daemon, "GET", "/events?replay=abc")
    assert status == 400


async def test_tree_nests_children(daemon: RunningDaemon) -> None:
    sid, cred = await daemon.register_top("orchestrator")
    _, grant = await daemon.spawn(cred, "worker")
    kid, _ = await daemon.register_child(grant["approval"], "worker")
    status, body = await admin(daemon, "GET", "/tree")
    assert status == 200
    (root,) = [r for r in body["roots"] if r["session_id"] == sid]
    assert [c["session_id"] for c in root["children"]] == [kid]
    assert root["status"] == "running" and root["children"][0]["status"] == "running"
    status, body = await admin(daemon, "GET", "/sessions?state=bogus")
    assert status == 400


async def test_admin_errors_are_json(daemon: RunningDaemon) -> None:
    assert await admin(daemon, "GET", "/sessions/ses_nope") == (404, {"error": "session not found"})
    status, body = await admin(daemon, "GET", "/nope")
    assert status == 404 and body == {"error": "not found"}
    status, body = await admin(daemon, "POST", "/drain", {"timeout_secs": "soon"})
    assert status == 400


def test_roostctl_startup_imports_no_aiohttp() -> None:
    import subprocess

    code = (
        "import sys, roost.ctl.main as m; m.build_parser(); "
        "print(sorted(k for k in sys.modules if k.split('.')[0] in ('aiohttp', 'pydantic', 'yaml', 'http')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "[]", out.stderr
