# ruff: noqa: ASYNC240
"""The capsule host leaves no process behind, and binds its entrypoint's rlimits before exec.

The payloads are hostile in the ways that defeat a process-group kill: they double-fork, call
``setsid`` and ignore SIGTERM. Each records its pids in a file so the test can check every one
of them is gone, not merely that the host exited.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.hostile import alive as _alive
from tests.hostile import hostile_payload
from tests.hostile import recorded_pids as _pids
from tests.support.capsules import Capsules, base_env, trace_events, wait_for
from tests.support.registry import RegistryBuilder

HOSTILE = hostile_payload(read_stdin=True)

ALLOCATE_FIRST = """
x = bytearray(128 * 1024 * 1024)
print("allocated", len(x))
"""


async def _start_hostile(
    registry: RegistryBuilder, capsules: Capsules, work: Path, cls: str = "advisory", **env: str
) -> Any:
    registry.add(
        "hostile", script=HOSTILE, capabilities={"containment": cls}, extra={"lifecycle": {"after_task": "exit"}}
    )
    work.mkdir()
    (work / "task.md").write_text("go\n")
    cp = await capsules.start("hostile@0.1.0", work, registry=registry.root, env=base_env(**env))
    await wait_for(lambda: len(_pids(work / "pids.txt")) == 3, within=20)
    pids = _pids(work / "pids.txt")
    assert all(_alive(p) for p in pids.values()), pids
    escaped = psutil.Process(pids["escaped"])
    assert escaped.ppid() == cp.proc.pid, "the double-forked grandchild is re-parented to the host (subreaper)"
    assert os.getsid(pids["escaped"]) != os.getsid(pids["entrypoint"]), "the payload really left its session"
    return cp, pids


@pytest.mark.parametrize("cls", ["advisory", "scoped"])
async def test_stop_kills_double_forked_setsid_sigterm_ignoring_tree(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path, cls: str
) -> None:
    work = tmp_path / "w"
    cp, pids = await _start_hostile(registry, capsules, work, cls, MURMUR_KILL_GRACE_SECS="0.5")
    t0 = time.monotonic()
    assert await cp.terminate(within=15) == 143
    took = time.monotonic() - t0
    left = {k: p for k, p in pids.items() if _alive(p)}
    assert not left, f"survived the host's stop: {left}"
    assert took < 5.0, f"the host must finish within the launcher's grace, took {took:.1f}s"
    events = [e["event_type"] for e in trace_events(cp.trace)]
    assert events[-1] == "session_end" and "task_end" in events


async def test_default_grace_is_shorter_than_the_launchers(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    work = tmp_path / "w"
    cp, pids = await _start_hostile(registry, capsules, work)
    t0 = time.monotonic()
    assert await cp.terminate(within=15) == 143
    took = time.monotonic() - t0
    assert not [p for p in pids.values() if _alive(p)]
    assert 1.5 < took < 5.0, f"the default grace is 2 s, under the launcher's 5 s; stop took {took:.1f}s"


async def test_orphans_of_a_finished_task_are_killed_when_the_host_ends(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    # The entrypoint exits at once but leaves a setsid'ed, SIGTERM-ignoring daemon behind.
    script = """
import os, signal, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open("daemon.pid", "w") as f:
            f.write(str(os.getpid()))
        while True:
            time.sleep(1)
    os._exit(0)
os.wait()
while not os.path.exists("daemon.pid"):
    time.sleep(0.01)
print("done")
"""
    registry.add("leaver", script=script, extra={"lifecycle": {"after_task": "exit"}})
    work = tmp_path / "w"
    work.mkdir()
    (work / "task.md").write_text("go\n")
    cp = await capsules.start("leaver@0.1.0", work, registry=registry.root, env=base_env(MURMUR_KILL_GRACE_SECS="0.3"))
    assert await cp.wait(within=20) == 0
    pid = int((work / "daemon.pid").read_text())
    assert not _alive(pid), "the daemonised leftover outlived the host"


async def test_rlimits_bind_the_entrypoint_from_its_first_line_not_the_host(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    registry.add(
        "greedy",
        script=ALLOCATE_FIRST,
        capabilities={"resources": {"address_space_bytes": "64Mi"}},
        extra={"lifecycle": {"after_task": "exit"}},
    )
    work = tmp_path / "w"
    work.mkdir()
    (work / "task.md").write_text("go\n")
    cp = await capsules.start("greedy@0.1.0", work, registry=registry.root)
    host = psutil.Process(cp.proc.pid)
    assert host.rlimit(psutil.RLIMIT_AS)[0] == psutil.RLIM_INFINITY, "the host itself is not limited"
    assert await cp.wait(within=30) == 1
    result = (work / "out" / "result.txt").read_text()
    assert "MemoryError" in result and "allocated" not in result, result
    recs = trace_events(cp.trace)
    ends = [r for r in recs if r["event_type"] == "task_end"]
    assert [e["exit_status"] for e in ends] == ["failed"]
    assert recs[-1]["event_type"] == "session_end"


async def test_launcher_leaves_the_host_unlimited_and_the_entrypoint_limited(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    registry.add(
        "greedy",
        script=ALLOCATE_FIRST,
        capabilities={"resources": {"address_space_bytes": "64Mi"}},
        extra={"lifecycle": {"after_task": "exit"}},
    )
    d = await daemon_factory(registry.root, spawn_allow=("greedy",), launch_timeout_secs=30.0)
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "greedy", "version": "0.1.0", "task": "go"})
    assert status == 201, body
    result = Path(body["workdir"]) / "out" / "result.txt"
    await wait_for(lambda: result.exists(), within=30)
    assert "MemoryError" in result.read_text()
    done = Path(body["workdir"]) / "completion.json"
    for _ in range(200):
        status, view, _, _ = await d.call("GET", f"/jobs/{body['job_id']}")
        if view["state"] not in ("starting", "running"):
            break
        await asyncio.sleep(0.1)
    # The host ran to its end and exited with its entrypoint's status: 1, Python's for an uncaught MemoryError.
    assert view["state"] in ("failed", "crashed"), view
    assert view["exit_status"] == "exit status 1", view
    assert not done.exists() or json.loads(done.read_text())["status"] != "ok"


async def test_stop_leaves_nothing_of_a_sealed_tree(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    from roost.capsule.probe import probe_host

    if probe_host().offered != "sealed":
        pytest.skip("this host cannot enforce sealed")
    registry.add(
        "hostile", script=HOSTILE, capabilities={"containment": "sealed"}, extra={"lifecycle": {"after_task": "exit"}}
    )
    work = tmp_path / "w"
    work.mkdir()
    (work / "task.md").write_text("go\n")
    cp = await capsules.start("hostile@0.1.0", work, registry=registry.root, env=base_env(MURMUR_KILL_GRACE_SECS="0.5"))
    await wait_for(lambda: len(_pids(work / "pids.txt")) == 3, within=30)
    host = psutil.Process(cp.proc.pid)
    tree = host.children(recursive=True)
    assert len(tree) >= 4, tree  # bwrap, its init, the entrypoint, its children (pids seen from here)
    assert await cp.terminate(within=15) == 143
    left = [p for p in tree if _alive(p.pid)]
    assert not left, f"survived the host's stop: {left}"


async def test_launcher_cancel_leaves_no_process_of_a_hostile_payload(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    registry.add("hostile", script=HOSTILE, extra={"lifecycle": {"after_task": "exit"}})
    d = await daemon_factory(registry.root, spawn_allow=("hostile",), stop_grace_secs=2.0, launch_timeout_secs=30.0)
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "hostile", "version": "0.1.0", "task": "go"})
    assert status == 201, body
    work = Path(body["workdir"])
    await wait_for(lambda: len(_pids(work / "pids.txt")) == 3, within=30)
    pids = _pids(work / "pids.txt")
    assert all(_alive(p) for p in pids.values())
    t0 = time.monotonic()
    status, view, _, _ = await d.call("POST", f"/jobs/{body['job_id']}/cancel")
    assert status == 200 and view["state"] == "terminated", view
    assert time.monotonic() - t0 < 2.0 + 1.0, "the host finished its tree inside the launcher's grace"
    left = {k: p for k, p in pids.items() if _alive(p)}
    assert not left, f"survived the cancel: {left}"
