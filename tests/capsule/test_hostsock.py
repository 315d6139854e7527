"""The host socket forwards verbs to the daemon with the credential added, and the CLI maps answers.

The far end of the forwards is a real aiohttp server that echoes what it received (the endpoints
behind ``share``/``fetch``/``delegate`` belong to other services); ``send`` is also exercised
end to end against a real daemon relay in tests/test_relay_capsules.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from roost.capsule.hostsock import HostSocket

CRED = "msc1.test-credential.sig"
state: dict[str, str] = {}
TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def any_caller(_pid: int | None) -> str:
    """A test double of the host's caller check: every peer runs a trusted task (these tests
    exercise the forwards; tests/trust/test_capsule_reach.py the check itself)."""
    return "trusted"


@pytest.fixture
async def far_end() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    state.clear()

    async def handle(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append({"method": request.method, "path": request.path, "headers": dict(request.headers), "body": body})
        if request.path == "/missing":
            return web.json_response({"error": "not found"}, status=404)
        if request.path.startswith("/jobs/job_done"):
            return web.json_response({"job_id": "job_done", "state": "complete", "workdir": state["wd"]})
        if request.path == "/jobs" and request.method == "POST":
            return web.json_response({"job_id": "job_done", "state": "running"}, status=201)
        if request.path == "/handles":
            return web.json_response({"error": "peer_unreachable", "message": "no card"}, status=502)
        return web.json_response({"echo": json.loads(body) if body else None}, status=200)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", seen
    await runner.cleanup()


async def cli(sock: Path | None, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
    if sock is not None:
        env["MURMUR_HOST_SOCKET"] = str(sock)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "roost.capsule",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_forwards_add_credential_and_pass_answers(
    far_end: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, seen = far_end
    records = tmp_path / "r"
    records.mkdir()
    hs = HostSocket(records, daemon_url=url, credential=lambda: CRED, traceparent=lambda: TP, callers=any_caller)
    await hs.start()
    try:
        assert stat.S_IMODE(hs.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(hs.dir.stat().st_mode) == 0o700
        rc, out, err = await cli(hs.path, "send", "--peer", "http://127.0.0.1:9", "--context-id", "ctx_1", "hi")
        assert rc == 0, err
        assert json.loads(out) == {
            "echo": {"peer_url": "http://127.0.0.1:9", "text": "hi", "context_id": "ctx_1", "traceparent": TP}
        }
        assert seen[-1]["path"] == "/a2a/send"
        assert seen[-1]["headers"]["x-murmur-spawn-credential"] == CRED
        rc, out, err = await cli(hs.path, "fetch", "--peer", "http://p:1", "--etag", "e1", "mh1.x.y")
        assert rc == 0 and json.loads(out)["echo"] == {"peer": "http://p:1", "handle": "mh1.x.y", "etag": "e1"}
        assert seen[-1]["path"] == "/peer-fetch"
        # The daemon's error comes back as its own sentence.
        rc, out, err = await cli(hs.path, "share", "notes.txt", "--peer", "http://p:1", "--ttl", "60")
        assert rc == 1 and "502: no card" in err
        assert json.loads(seen[-1]["body"]) == {"path": "notes.txt", "peer": "http://p:1", "ttl_secs": 60}
        # delegate --wait polls GET /jobs/{id} and prints the child's result file.
        child = tmp_path / "child"
        (child / "out").mkdir(parents=True)
        (child / "out" / "result.txt").write_text("child says hi\n")
        (child / "completion.json").write_text(json.dumps({"result_path": "out/result.txt"}))
        state["wd"] = str(child)
        rc, out, err = await cli(hs.path, "delegate", "worker@0.1.0", "--task", "do it", "--wait", "--untrusted")
        assert rc == 0, err
        assert out == "child says hi\n" and "job job_done is complete" in err
        posted = next(s for s in seen if s["path"] == "/jobs")
        assert json.loads(posted["body"]) == {"name": "worker", "version": "0.1.0", "task": "do it", "untrusted": True}
        assert seen[-1]["method"] == "GET" and seen[-1]["headers"]["x-murmur-spawn-credential"] == CRED
    finally:
        await hs.stop()
    assert not hs.path.exists()


async def test_cli_exit_codes(far_end: tuple[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    rc, _, err = await cli(None, "send", "--peer", "x", "hi")
    assert rc == 3 and "MURMUR_HOST_SOCKET is not set" in err
    rc, _, err = await cli(tmp_path / "nope.sock", "send", "--peer", "x", "hi")
    assert rc == 3 and "cannot reach the capsule host" in err
    rc, _, _ = await cli(tmp_path / "nope.sock", "delegate", "no-version", "--task", "x")
    assert rc == 2
    records = tmp_path / "r"
    records.mkdir()
    # No daemon behind the host, then an unreachable daemon.
    hs = HostSocket(records, daemon_url=None, credential=lambda: None, callers=any_caller)
    await hs.start()
    try:
        rc, _, err = await cli(hs.path, "send", "--peer", "x", "hi")
        assert rc == 3 and "MURMUR_ROOST_URL is not set" in err
    finally:
        await hs.stop()
    hs = HostSocket(records, daemon_url="http://127.0.0.1:1", credential=lambda: CRED, callers=any_caller)
    await hs.start()
    try:
        rc, _, err = await cli(hs.path, "delegate", "w@1", "--task", "x")
        assert rc == 3 and "could not reach mur-roost at http://127.0.0.1:1" in err
        assert CRED not in err
    finally:
        await hs.stop()


async def test_daemon_404_is_a_clear_error(far_end: tuple[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    url, _ = far_end
    records = tmp_path / "r"
    records.mkdir()
    hs = HostSocket(records, daemon_url=url + "/missing#", credential=lambda: CRED, callers=any_caller)
    await hs.start()
    try:
        rc, _, err = await cli(hs.path, "share", "f", "--peer", "p")
        assert rc == 1
        assert "mur-roost has no endpoint for 'share' (it answered 404 not found)" in err
    finally:
        await hs.stop()


def test_long_records_dir_uses_runtime_dir(tmp_path: Path) -> None:
    from roost.capsule.hostsock import socket_dir

    deep = tmp_path / ("x" * 120)
    deep.mkdir()
    d = socket_dir(deep)
    try:
        assert not d.is_relative_to(deep) and stat.S_IMODE(d.stat().st_mode) == 0o700
    finally:
        d.rmdir()
