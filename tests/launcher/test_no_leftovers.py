# ruff: noqa: ASYNC240
"""No process outlives its job, on the cgroup path and on the fallback path.

The payload double-forks, calls ``setsid`` and ignores SIGTERM, and writes every pid it starts
to ``pids.txt``; each test checks that all of them (and the capsule host) are gone after a
cancel, a deadline, a drain, a ``kill -9`` of ``roost-capsule``, and a ``kill -9`` of the daemon
followed by a restart and a cancel of the re-adopted job.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest
from hostile import alive as _alive
from hostile import hostile_payload
from hostile import recorded_pids as _pids

from roost.backends.process.cgroups import JobCgroups
from tests.support.daemon import RunningDaemon, start_daemon_process
from tests.support.launcher import job_final, wait_for
from tests.support.registry import RegistryBuilder

pytestmark = pytest.mark.slow

HOSTILE = hostile_payload(read_stdin=False)

PATHS = ["auto", "off"]


def _cgroups_here() -> bool:
    return JobCgroups.discover("auto") is not None


async def _none_left(pids: list[int], within: float = 15) -> None:
    await wait_for(lambda: not any(_alive(p) for p in pids), within)


def _setup(registry: RegistryBuilder, mode: str) -> None:
    if mode == "auto" and not _cgroups_here():
        pytest.skip("no writable cgroup v2 hierarchy with cgroup.kill here")
    registry.add("hostile", script=HOSTILE, extra={"lifecycle": {"after_task": "exit"}})


async def _launch(d: RunningDaemon, wd: Path, **extra: Any) -> tuple[str, list[int]]:
    wd.mkdir(mode=0o700)
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "hostile", "version": "0.1.0", "workdir": str(wd), "task": "go", **extra}
    )
    assert status == 201, body
    await wait_for(lambda: len(_pids(wd / "pids.txt")) == 3, 30)
    host = d.roost.launcher.jobs[body["job_id"]].pid
    assert host is not None
    pids = [*_pids(wd / "pids.txt").values(), host]
    assert all(_alive(p) for p in pids)
    return body["job_id"], pids


async def _daemon(daemon_factory: Any, registry: RegistryBuilder, mode: str, **cfg: Any) -> RunningDaemon:
    _setup(registry, mode)
    d: RunningDaemon = await daemon_factory(
        registry.root, spawn_allow=("hostile",), job_cgroups=mode, stop_grace_secs=1.0, **cfg
    )
    assert (d.roost.launcher.cgroups is not None) == (mode == "auto")
    return d


@pytest.mark.parametrize("mode", PATHS)
async def test_cancel(daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, mode: str) -> None:
    d = await _daemon(daemon_factory, registry, mode)
    job_id, pids = await _launch(d, tmp_path / "wd")
    if mode == "auto":
        # Every process of the job, the escaped one included, is in the job's own cgroup.
        for pid in pids:
            assert f"/{job_id}\n" in Path(f"/proc/{pid}/cgroup").read_text()
    status, body, _, _ = await d.call("POST", f"/jobs/{job_id}/cancel")
    assert status == 200, body
    final = await job_final(d, job_id)
    assert final["state"] == "terminated"
    await _none_left(pids)


@pytest.mark.parametrize("mode", PATHS)
async def test_deadline(daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, mode: str) -> None:
    d = await _daemon(daemon_factory, registry, mode)
    job_id, pids = await _launch(d, tmp_path / "wd", deadline_secs=3)
    final = await job_final(d, job_id, timeout=30)
    assert final["state"] == "terminated", final
    await _none_left(pids)


@pytest.mark.parametrize("mode", PATHS)
async def test_drain(daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, mode: str) -> None:
    d = await _daemon(daemon_factory, registry, mode)
    _job_id, pids = await _launch(d, tmp_path / "wd")
    stopped = asyncio.Event()
    d.stop_callback = lambda _reason: stopped.set()
    d.roost.control.drain(timeout_secs=0.5)
    await asyncio.wait_for(stopped.wait(), 20)
    await d.roost.stop()
    await _none_left(pids)


@pytest.mark.parametrize("mode", PATHS)
async def test_kill_9_of_the_capsule_host(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, mode: str
) -> None:
    d = await _daemon(daemon_factory, registry, mode)
    job_id, pids = await _launch(d, tmp_path / "wd")
    os.kill(pids[-1], signal.SIGKILL)
    final = await job_final(d, job_id)
    assert final["state"] == "crashed", final
    await _none_left(pids)


def _http(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


@pytest.mark.parametrize("host_dies", [False, True], ids=["cancel-readopted", "host-died-meanwhile"])
@pytest.mark.parametrize("mode", PATHS)
def test_kill_9_of_the_daemon_then_restart(
    registry: RegistryBuilder, tmp_path: Path, mode: str, host_dies: bool, daemon_processes: list[Any]
) -> None:
    _setup(registry, mode)
    cfg = tmp_path / "roost.toml"
    cfg.write_text(
        f'registry_path = "{registry.root}"\nstate_dir = "{tmp_path / "state"}"\n'
        f'spawn_allow = ["hostile"]\njob_cgroups = "{mode}"\nstop_grace_secs = 1.0\n'
    )
    first = start_daemon_process(["--config", str(cfg)])
    daemon_processes.append(first)
    wd = tmp_path / "wd"
    wd.mkdir(mode=0o700)
    status, body = _http(
        first.url + "/jobs", "POST", {"name": "hostile", "version": "0.1.0", "workdir": str(wd), "task": "go"}
    )
    assert status == 201, body
    job_id = body["job_id"]
    deadline = time.monotonic() + 30
    while len(_pids(wd / "pids.txt")) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    host = [p.pid for p in psutil.Process(first.proc.pid).children() if "roost.capsule" in " ".join(p.cmdline())]
    pids = [*_pids(wd / "pids.txt").values(), *host]
    assert len(pids) == 4
    first.stop(signal.SIGKILL)
    assert all(_alive(p) for p in pids)
    if host_dies:
        os.kill(host[0], signal.SIGKILL)
        psutil.wait_procs([psutil.Process(host[0])], timeout=5)
    second = start_daemon_process(["--config", str(cfg)])
    daemon_processes.append(second)
    status, body = _http(f"{second.url}/jobs/{job_id}")
    if host_dies:
        assert status == 200 and body["state"] == "crashed", body
    else:
        assert status == 200 and body["state"] == "running", body
        status, body = _http(f"{second.url}/jobs/{job_id}/cancel", "POST")
        assert status == 200, body
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids), [p for p in pids if _alive(p)]
    second.stop()
    assert sys.platform.startswith("linux")
