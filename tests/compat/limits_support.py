"""Shared by the compatibility tests: run one job through a real daemon and read its records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roost.observe.tracelines import read_trace, trace_path
from tests.support.capsules import wait_for
from tests.support.daemon import RunningDaemon

__all__ = ["FORKS", "completion", "finished_job", "run_job", "session_lines"]

FORKS = """
import os, sys, time
ok = 0
kids = []
for _ in range(60):
    try:
        pid = os.fork()
    except OSError:
        continue
    if pid == 0:
        time.sleep(2)
        os._exit(0)
    kids.append(pid)
    ok += 1
for pid in kids:
    os.waitpid(pid, 0)
print(f"forked {ok} as uid {os.getuid()}")
sys.exit(0 if ok == 60 else 3)
"""
"""An entrypoint that tries 60 forks at once: ``forked N as uid U``, exit 3 when any was refused."""


async def run_job(d: RunningDaemon, name: str, task: str = "go", **extra: Any) -> dict[str, Any]:
    """``POST /jobs`` for ``name@0.1.0``; the answer (asserts 201)."""
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": name, "version": "0.1.0", "task": task, **extra})
    assert status == 201, body
    return dict(body)


async def finished_job(d: RunningDaemon, job_id: str, within: float = 60) -> Any:
    """The job once it is final."""
    await wait_for(lambda: d.roost.launcher.jobs[job_id].state not in ("starting", "running"), within=within)
    return d.roost.launcher.jobs[job_id]


def session_lines(workdir: str | Path, session_id: str) -> list[dict[str, Any]]:
    """The session's trace lines."""
    return read_trace(trace_path(Path(workdir), session_id))


def completion(workdir: str | Path) -> dict[str, Any]:
    return dict(json.loads((Path(workdir) / "completion.json").read_text()))
