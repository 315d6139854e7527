"""A job re-adopted after ``kill -9`` of the daemon gets its true outcome from the child's own records."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp
from conftest import EXAMPLES, DaemonProcess, start_daemon_process


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
