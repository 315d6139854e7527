"""A finished job leaves no cgroup behind, and a daemon's start sweeps up empty leftovers."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from roost.backends.process.cgroups import JobCgroups
from tests.support.daemon import RunningDaemon
from tests.support.launcher import job_final
from tests.support.registry import EXAMPLES

pytestmark = pytest.mark.skipif(JobCgroups.discover("auto") is None, reason="no writable cgroup v2 hierarchy here")

CRED = "x-murmur-spawn-credential"


async def _start(daemon_factory: Any) -> RunningDaemon:
    d: RunningDaemon = await daemon_factory(
        EXAMPLES / "registry", spawn_allow=("worker", "sleeper", "crasher"), stop_grace_secs=1.0
    )
    return d


def _root(d: RunningDaemon) -> Path:
    cgroups = d.roost.launcher.backend.cgroups  # type: ignore[attr-defined]
    assert cgroups is not None
    return Path(cgroups.root)


async def test_each_ended_job_removes_its_cgroup(daemon_factory: Any) -> None:
    d = await _start(daemon_factory)
    root = _root(d)
    jobs = []
    for name, task in (("worker", "a b c"), ("crasher", "boom"), ("sleeper", "60")):
        status, body, _, _ = await d.call("POST", "/jobs", json={"name": name, "version": "0.1.0", "task": task})
        assert status == 201, body
        jobs.append(body["job_id"])
        assert (root / body["job_id"]).is_dir()
    status, body, _, _ = await d.call("POST", f"/jobs/{jobs[-1]}/cancel")
    assert status == 200, body
    for job_id in jobs:
        final = await job_final(d, job_id, timeout=30)
        assert not (root / job_id).exists(), final


async def test_stop_removes_running_jobs_cgroups(daemon_factory: Any) -> None:
    d = await _start(daemon_factory)
    root = _root(d)
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "sleeper", "version": "0.1.0", "task": "60"})
    assert status == 201, body
    await d.roost.stop()
    assert not (root / body["job_id"]).exists()


async def test_start_up_sweeps_empty_leftovers_and_keeps_fresh_or_busy_ones(daemon_factory: Any) -> None:
    root = JobCgroups.discover("auto").root  # type: ignore[union-attr]
    old, fresh = root / f"job_{os.urandom(16).hex()}", root / f"job_{os.urandom(16).hex()}"
    busy = root / f"job_{os.urandom(16).hex()}"
    for made in (old, fresh, busy):
        made.mkdir()
    for aged in (old, busy):
        os.utime(aged, (time.time() - 3600, time.time() - 3600))
    sleeper = await asyncio.create_subprocess_exec("sleep", "60")
    try:
        (busy / "cgroup.procs").write_text(str(sleeper.pid))
        before = {p.name for p in root.iterdir() if p.name.startswith("job_")}
        assert {old.name, fresh.name, busy.name} <= before
        await _start(daemon_factory)
        after = {p.name for p in root.iterdir() if p.name.startswith("job_")}
        # The ended job's leftover is gone; a cgroup that may be a job starting now, and one
        # whose job still runs, are kept.
        assert old.name not in after
        assert fresh.name in after and busy.name in after
    finally:
        sleeper.kill()
        await sleeper.wait()
        for made in (fresh, busy):
            for _ in range(100):
                try:
                    made.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    await asyncio.sleep(0.05)
