"""A registered pid is believed only when it holds the connection, then its exit ends the session."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from typing import Any

from tests.support.registry import RegistryBuilder

REGISTER = textwrap.dedent(
    """
    import json, os, sys, time, urllib.request
    url, sid, claimed = sys.argv[1], sys.argv[2], sys.argv[3]
    pid = os.getpid() if claimed == "self" else int(claimed)
    body = json.dumps({"session_id": sid, "name": "orchestrator", "version": "0.1.0", "pid": pid}).encode()
    req = urllib.request.Request(url + "/register", data=body, method="POST")
    print(urllib.request.urlopen(req, timeout=10).status, flush=True)
    time.sleep(float(sys.argv[4]))
    """
)


async def _register_from_child(url: str, sid: str, claimed: str, linger: float) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", REGISTER, url, sid, claimed, str(linger), stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    assert (await asyncio.wait_for(proc.stdout.readline(), 20)).strip() == b"200"
    return proc


async def _until(predicate: Any, within: float = 10) -> None:
    for _ in range(int(within / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached")


async def test_verified_pid_exit_ends_the_session(daemon_factory: Any, registry: RegistryBuilder) -> None:
    registry.add("orchestrator")
    d = await daemon_factory(registry.root, spawn_allow=("orchestrator",))
    proc = await _register_from_child(d.url, "ses_watched", "self", 30)
    rec = d.roost.table.get("ses_watched")
    assert rec is not None and rec.pid == proc.pid and rec.pid_start is not None
    proc.kill()
    await proc.wait()
    await _until(lambda: not rec.running)
    assert rec.status == "failed"


async def test_someone_elses_pid_is_not_believed(daemon_factory: Any, registry: RegistryBuilder) -> None:
    registry.add("orchestrator")
    d = await daemon_factory(registry.root, spawn_allow=("orchestrator",))
    proc = await _register_from_child(d.url, "ses_liar", str(os.getpid()), 0)
    await proc.wait()
    rec = d.roost.table.get("ses_liar")
    assert rec is not None and rec.pid is None and rec.running


async def test_restart_ends_sessions_whose_process_is_gone(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Any
) -> None:
    registry.add("orchestrator")
    state = tmp_path / "state-restart"
    d1 = await daemon_factory(registry.root, spawn_allow=("orchestrator",), state_dir=state)
    gone = await _register_from_child(d1.url, "ses_gone", "self", 30)
    alive = await _register_from_child(d1.url, "ses_alive", "self", 60)
    await d1.roost.stop()
    await d1.http.close()
    gone.kill()
    await gone.wait()
    d2 = await daemon_factory(registry.root, spawn_allow=("orchestrator",), state_dir=state)
    assert d2.roost.table.get("ses_gone").status == "failed"
    rec = d2.roost.table.get("ses_alive")
    assert rec.running
    alive.kill()
    await alive.wait()
    await _until(lambda: not rec.running)


async def test_a_session_claiming_init_is_refused(daemon_factory: Any, registry: RegistryBuilder) -> None:
    registry.add("orchestrator")
    d = await daemon_factory(registry.root, spawn_allow=("orchestrator",))
    for pid in (1, 0, -5):
        body = {"session_id": "ses_init", "name": "orchestrator", "version": "0.1.0", "pid": pid}
        status, answer, _, _ = await d.call("POST", "/register", json=body)
        assert (status, answer) == (400, {"error": "pid must be a process id (a whole number above 1)"})
    assert d.roost.table.get("ses_init") is None
    status, _, _, _ = await d.call("GET", "/status/ses_init")
    assert status == 404
