"""Connection limits: per-uid cap, first-head deadline, and /health served through a flood.

The flood comes from a child process running as uid 65534 (the attacker); /health is asked by
the test itself (root), another user.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
from typing import Any

import aiohttp
import pytest
from trust.attacker import NOBODY, system_python

from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="acting as another uid needs root")

FLOOD = r"""
import json, selectors, socket, sys, time
host, port, idle, slow, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
socks = []
for i in range(idle + slow):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex((host, port))
    socks.append(s)
    if i % 200 == 199:
        time.sleep(0.05)
sel = selectors.DefaultSelector()
for s in socks:
    sel.register(s, selectors.EVENT_WRITE)
pending = set(socks)
deadline = time.monotonic() + 60
while pending and time.monotonic() < deadline:
    for key, _ in sel.select(1):
        sel.unregister(key.fileobj)
        pending.discard(key.fileobj)
for s in socks[idle:]:
    try:
        s.send(b"GET /health HTTP/1.1\r\nHost: roost\r\n")  # never the blank line
    except OSError:
        pass
print(json.dumps({"connected": len(socks) - len(pending)}), flush=True)

def closed(s):
    try:
        return s.recv(1, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True

end = time.monotonic() + hold
while time.monotonic() < end:
    time.sleep(0.2)
print(json.dumps({"idle_closed": sum(map(closed, socks[:idle])), "slow_closed": sum(map(closed, socks[idle:]))}),
      flush=True)
sys.stdin.read()
"""


def _raise_nofile(want: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(want, soft), max(want, hard)))


async def _flood(d: RunningDaemon, idle: int, slow: int, hold: float) -> asyncio.subprocess.Process:
    host, port = d.url.removeprefix("http://").rsplit(":", 1)
    return await asyncio.create_subprocess_exec(
        system_python(),
        "-I",
        "-c",
        FLOOD,
        host,
        port,
        str(idle),
        str(slow),
        str(hold),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        cwd="/",
    )


async def _line(proc: asyncio.subprocess.Process, within: float) -> Any:
    assert proc.stdout is not None
    raw = await asyncio.wait_for(proc.stdout.readline(), within)
    assert raw, "the flood process ended early"
    return json.loads(raw)


async def _health(d: RunningDaemon) -> None:
    async with aiohttp.ClientSession() as http, http.get(d.url + "/health", timeout=aiohttp.ClientTimeout(5)) as r:
        assert r.status == 200


async def _finish(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        await asyncio.wait_for(proc.wait(), 10)
    except TimeoutError:
        proc.kill()
        await proc.wait()


async def test_per_uid_cap_closes_the_excess(daemon_factory: Any, registry: RegistryBuilder) -> None:
    d: RunningDaemon = await daemon_factory(registry.root, max_connections_per_uid=50, header_timeout_secs=30)
    proc = await _flood(d, idle=120, slow=0, hold=2.0)
    try:
        assert (await _line(proc, 60))["connected"] == 120
        await _health(d)  # another uid is served
        result = await _line(proc, 30)
        assert result["idle_closed"] >= 70, result
        assert d.roost.guard.open[NOBODY] <= 50
        assert d.roost.guard.refused >= 70
    finally:
        await _finish(proc)


@pytest.mark.slow
async def test_5000_idle_and_500_slow_heads(daemon_factory: Any, registry: RegistryBuilder) -> None:
    _raise_nofile(20_000)
    d: RunningDaemon = await daemon_factory(
        registry.root, max_connections_per_uid=10_000, header_timeout_secs=50, keepalive_timeout_secs=120
    )
    proc = await _flood(d, idle=5000, slow=500, hold=62.0)
    try:
        assert (await _line(proc, 120))["connected"] == 5500
        # Once the daemon holds all of them open, /health answers, again and again.
        most = 0
        for _ in range(800):
            most = max(most, sum(d.roost.guard.open.values()))
            if most >= 5400:
                break
            await asyncio.sleep(0.05)
        assert most >= 5000 and d.roost.guard.timed_out == 0, most
        for _ in range(5):
            await _health(d)
            await asyncio.sleep(0.2)
        result = await _line(proc, 150)
        # Every connection the daemon accepted is closed by the head deadline. (A client whose
        # handshake the kernel never queued for accept sees nothing: it is not the daemon's.)
        assert result["slow_closed"] == 500 and result["idle_closed"] >= 4500, result
        assert sum(d.roost.guard.open.values()) == 0
        assert d.roost.guard.timed_out >= most
        await _health(d)
    finally:
        await _finish(proc)
