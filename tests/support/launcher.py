# ruff: noqa: ASYNC109
"""The launcher tests' helpers: runtime-double capsules, a recording parent door, waiting for a job.

Capsules without ``entrypoint`` run under ``runtime_double.py`` through ``Config.runtime_command``
(an external runtime as far as the daemon can tell).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from aiohttp import web

from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder

__all__ = [
    "DOUBLE",
    "RUNTIME",
    "ParentDoor",
    "add_doubles",
    "job_final",
    "no_orphans",
    "parent_door",
    "stray_processes",
    "wait_for",
]

DOUBLE = Path(__file__).resolve().parent.parent / "launcher" / "runtime_double.py"
RUNTIME = (sys.executable, str(DOUBLE))


def stray_processes(base: str) -> list[psutil.Process]:
    """This uid's keepers and launched children that belong to this test session (``base`` is its
    temp root, which every keeper command line and every child's MURMUR_REGISTRY_PATH contains) —
    never anyone else's processes."""
    me = os.getuid()
    out = []
    for proc in psutil.process_iter(["uids", "cmdline"]):
        try:
            if proc.info["uids"].real != me or proc.pid == os.getpid():
                continue
            cmd = " ".join(proc.info["cmdline"] or [])
            if "roost.backends.local.holder" in cmd and base in cmd:
                out.append(proc)
                continue
            env = proc.environ()
            if "MURMUR_JOB_ID" in env and base in env.get("MURMUR_REGISTRY_PATH", ""):
                out.append(proc)
        except (psutil.Error, OSError):
            continue
    return out


def add_doubles(registry: RegistryBuilder) -> None:
    registry.add(
        "boss",
        capabilities={
            "spawn": {"allow": ["kid", "mid", "greedy", "boss"]},
            "env": {"allow": ["LANG", "ROOST_T_SHARED", "ROOST_T_BOSSONLY"]},
            "network": {"allow": ["localhost"]},
        },
    )
    registry.add(
        "mid",
        capabilities={"spawn": {"allow": ["kid"]}, "env": {"allow": ["ROOST_T_SHARED"]}},
    )
    registry.add(
        "kid",
        capabilities={
            "env": {"allow": ["ROOST_T_SHARED"]},
            "resources": {"max_open_files": 256, "cpu_seconds": 600},
        },
        extra={"lifecycle": {"delegation_deadline_secs": 600}},
    )
    registry.add("greedy", capabilities={"network": {"allow": ["example.com"]}})
    registry.add("solo")


@dataclass
class ParentDoor:
    url: str
    session_id: str
    received: list[dict[str, Any]] = field(default_factory=list)
    refuse: bool = False
    posts: int = 0


async def wait_for(pred: Any, timeout: float = 15.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        await asyncio.sleep(interval)
    raise AssertionError("condition not met in time")


async def job_final(d: RunningDaemon, job_id: str, headers: dict[str, str] | None = None, timeout: float = 20) -> Any:
    async def check() -> Any:
        status, body, _, _ = await d.call("GET", f"/jobs/{job_id}", headers=headers)
        assert status == 200, body
        return body if body["state"] not in ("starting", "running") else None

    return await wait_for(check, timeout)


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
