"""Launcher fixtures: a registry of runtime-double capsules, a parent door, and the orphan guard.

``parent_door`` serves a real A2A endpoint that records every completion delivered to it, or
refuses them all. The helpers (runtime doubles, waiting for a job) are in
:mod:`tests.support.launcher`.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psutil
import pytest
from aiohttp import web

from tests.support.launcher import DOUBLE, RUNTIME, ParentDoor, add_doubles, job_final, stray_processes, wait_for

__all__ = ["DOUBLE", "RUNTIME", "ParentDoor", "add_doubles", "job_final", "no_orphans", "parent_door", "wait_for"]


@pytest.fixture(scope="session", autouse=True)
def no_orphans(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After the suite: no child launched by this suite's daemons and no keeper may be left."""
    base = str(tmp_path_factory.getbasetemp())
    yield
    deadline = time.monotonic() + 10
    left = stray_processes(base)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = stray_processes(base)
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGKILL)
    assert not left, f"processes left behind: {[(p.pid, p.info.get('cmdline')) for p in left]}"


@pytest.fixture
async def parent_door() -> AsyncIterator[Any]:
    runners: list[web.AppRunner] = []

    async def make(session_id: str, *, refuse: bool = False) -> ParentDoor:
        pd = ParentDoor(url="", session_id=session_id, refuse=refuse)

        async def handle(request: web.Request) -> web.Response:
            pd.posts += 1
            body = json.loads(await request.read())
            if pd.refuse:
                return web.json_response(
                    {"jsonrpc": "2.0", "id": body.get("id"), "error": {"code": -32001, "message": "no thanks"}}
                )
            pd.received.append({"headers": dict(request.headers), "body": body})
            ctx = body["params"]["message"].get("contextId")
            task = {"kind": "task", "id": f"tsk_{pd.posts}", "contextId": ctx, "status": {"state": "submitted"}}
            return web.json_response({"jsonrpc": "2.0", "id": body.get("id"), "result": task})

        app = web.Application()
        app.router.add_post("/", handle)
        r = web.AppRunner(app, access_log=None)
        await r.setup()
        site = web.TCPSite(r, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        pd.url = f"http://127.0.0.1:{port}"
        runners.append(r)
        return pd

    yield make
    for r in runners:
        await r.cleanup()
