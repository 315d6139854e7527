"""A job re-adopted after ``kill -9`` of the daemon gets its true outcome from the child's own records."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.registry import EXAMPLES, RegistryBuilder


async def _job(http: aiohttp.ClientSession, url: str, job_id: str) -> dict[str, Any]:
    async with http.get(f"{url}/jobs/{job_id}") as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()  # type: ignore[no-any-return]


async def test_a_readopted_job_that_finishes_cleanly_is_ok(
    tmp_path: Path, daemon_processes: list[DaemonProcess]
) -> None:
    cfg = tmp_path / "roost.toml"
    cfg.write_text(
        f'registry_path = "{EXAMPLES / "registry"}"\nstate_dir = "{tmp_path / "state"}"\n'
        'spawn_allow = ["sleeper"]\nstop_grace_secs = 1.0\n'
    )
    loop = asyncio.get_running_loop()
    first = await loop.run_in_executor(None, start_daemon_process, ["--config", str(cfg)])
    daemon_processes.append(first)
    async with aiohttp.ClientSession() as http:
        async with http.post(
            first.url + "/jobs", json={"name": "sleeper", "version": "0.1.0", "task": "sleep 3"}
        ) as resp:
            assert resp.status == 201, await resp.text()
            job = await resp.json()
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
        second = await loop.run_in_executor(None, start_daemon_process, ["--config", str(cfg)])
        daemon_processes.append(second)
        assert any('"job_readopted"' in ln for ln in second.stderr_lines), second.stderr_lines[-10:]
        deadline = time.monotonic() + 30
        view = await _job(http, second.url, job["job_id"])
        while view["state"] in ("starting", "running") and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            view = await _job(http, second.url, job["job_id"])
    assert view["state"] == "complete", view
    assert view["outcome"] == "ok", view
    assert view["completion"]["status"] == "ok", view
    await loop.run_in_executor(None, second.stop)


def _start_ticks(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat, read here independently of roost."""
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return int(raw[raw.rfind(b")") + 2 :].split()[19])


def _job_row(db: Path, job_id: str) -> tuple[int, float]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        pid, start = conn.execute("SELECT pid, pid_start FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    return int(pid), float(start)


def _set_start(db: Path, job_id: str, start: float) -> None:
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE jobs SET pid_start = ? WHERE job_id = ?", (start, job_id))


async def test_a_child_is_known_by_its_start_ticks_not_the_wall_clock(
    tmp_path: Path, daemon_processes: list[DaemonProcess]
) -> None:
    cfg = tmp_path / "roost.toml"
    state = tmp_path / "state"
    cfg.write_text(
        f'registry_path = "{EXAMPLES / "registry"}"\nstate_dir = "{state}"\n'
        'spawn_allow = ["sleeper"]\nstop_grace_secs = 1.0\n'
    )
    loop = asyncio.get_running_loop()
    first = await loop.run_in_executor(None, start_daemon_process, ["--config", str(cfg)])
    daemon_processes.append(first)
    async with aiohttp.ClientSession() as http:
        async with http.post(
            first.url + "/jobs", json={"name": "sleeper", "version": "0.1.0", "task": "sleep 60"}
        ) as resp:
            assert resp.status == 201, await resp.text()
            job_id = (await resp.json())["job_id"]
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
    db = state / "roost.db"
    pid, recorded = _job_row(db, job_id)
    # What is recorded is the kernel's start tick count, which no clock step can move.
    assert recorded == _start_ticks(pid)

    # A record from an older release holds psutil's create time (seconds since the epoch): the
    # child is still re-adopted.
    _set_start(db, job_id, psutil.Process(pid).create_time())
    second = await loop.run_in_executor(None, start_daemon_process, ["--config", str(cfg)])
    daemon_processes.append(second)
    assert any('"job_readopted"' in ln for ln in second.stderr_lines), second.stderr_lines[-10:]
    second.proc.send_signal(signal.SIGKILL)
    second.proc.wait()

    # The same pid with another start is another process: not adopted, its job is lost.
    _set_start(db, job_id, float(_start_ticks(pid) + 1))
    third = await loop.run_in_executor(None, start_daemon_process, ["--config", str(cfg)])
    daemon_processes.append(third)
    assert not any('"job_readopted"' in ln for ln in third.stderr_lines), third.stderr_lines[-10:]
    reconciled = next(json.loads(ln) for ln in third.stderr_lines if '"reconciled"' in ln)
    assert reconciled["lost"] == 1 and reconciled["matched"] == 0, reconciled
    async with aiohttp.ClientSession() as http:
        view = await _job(http, third.url, job_id)
    assert view["state"] not in ("starting", "running"), view
    # ... and what was left of it is ended with it.
    deadline = time.monotonic() + 15
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"the lost job's child {pid} is still running"
        await asyncio.sleep(0.1)
    await loop.run_in_executor(None, third.stop)


FAILS_ON_GO = """
import os, sys, time
while not os.path.exists("go"):
    time.sleep(0.05)
print("failing: told to fail", file=sys.stderr, flush=True)
sys.exit(3)
"""


async def test_a_readopted_job_that_fails_is_failed_from_its_own_records(
    tmp_path: Path, daemon_processes: list[DaemonProcess], registry: RegistryBuilder
) -> None:
    """kill -9 of the daemon while the child runs; the child then fails (its entrypoint exits 3,
    so its host's trace ends with ``session_end`` ``failed``). The next daemon cannot read that
    exit status, and the child's deregistration went to the old daemon's port, so only the
    child's own records say how it ended: ``failed``/``error``, not ``crashed``."""
    registry.add("failer", script=FAILS_ON_GO)
    cfg = tmp_path / "roost.toml"
    cfg.write_text(
        f'registry_path = "{registry.root}"\nstate_dir = "{tmp_path / "state"}"\n'
        'spawn_allow = ["failer"]\nstop_grace_secs = 1.0\n'
    )
    loop = asyncio.get_running_loop()
    first = await loop.run_in_executor(None, start_daemon_process, ["--config", str(cfg)])
    daemon_processes.append(first)
    async with aiohttp.ClientSession() as http:
        async with http.post(first.url + "/jobs", json={"name": "failer", "version": "0.1.0", "task": "x"}) as resp:
            assert resp.status == 201, await resp.text()
            job = await resp.json()
        deadline = time.monotonic() + 30
        view = await _job(http, first.url, job["job_id"])
        while view["state"] == "starting" and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            view = await _job(http, first.url, job["job_id"])
        assert view["state"] == "running", view
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
        second = await loop.run_in_executor(None, start_daemon_process, ["--config", str(cfg)])
        daemon_processes.append(second)
        assert any('"job_readopted"' in ln for ln in second.stderr_lines), second.stderr_lines[-10:]
        workdir = Path(view["workdir"])
        (workdir / "go").write_text("")
        deadline = time.monotonic() + 30
        view = await _job(http, second.url, job["job_id"])
        while view["state"] in ("starting", "running") and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            view = await _job(http, second.url, job["job_id"])
    trace = next((workdir / ".murmur").glob("ses_*/trace.jsonl"))
    ends = [json.loads(ln) for ln in trace.read_text().splitlines() if '"session_end"' in ln]
    assert [e.get("exit_status") for e in ends] == ["failed"], ends  # what the child itself recorded
    assert view["state"] == "failed", view
    assert view["outcome"] == "error", view
    assert view["completion"]["status"] == "error", view
    assert view["completion"]["reported_by"] == "launcher", view
    await loop.run_in_executor(None, second.stop)
