"""``kill -9`` of a real ``mur-roost`` process in the middle of a launch storm, then a restart:
reconcile re-adopts the live children, finalizes the gone ones, ends orphans, and no
delegation is reported twice."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from roost.observe.tracelines import read_trace, trace_path
from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.launcher import DOUBLE, add_doubles, wait_for
from tests.support.registry import RegistryBuilder

CRED = "x-murmur-spawn-credential"


def write_config(tmp_path: Path, registry: RegistryBuilder) -> Path:
    cfg = tmp_path / "roost.toml"
    cfg.write_text(
        "[roost]\n"
        f'registry_path = "{registry.root}"\n'
        f'state_dir = "{tmp_path / "state"}"\n'
        'spawn_allow = ["boss", "solo"]\n'
        f'runtime_command = ["{sys.executable}", "{DOUBLE}"]\n'
        "max_concurrent = 500\nmax_live_capsules = 2000\n"
        "stop_grace_secs = 1.0\nlifeline_grace_secs = 2.0\n"
    )
    return cfg


def reconcile_line(p: DaemonProcess) -> dict[str, Any]:
    for line in p.stderr_lines:
        if '"reconciled"' in line:
            return json.loads(line)  # type: ignore[no-any-return]
    raise AssertionError("no reconcile line:\n" + "\n".join(p.stderr_lines[-20:]))


async def test_kill9_mid_storm_restart_reconciles_exactly_once(
    tmp_path: Path, registry: RegistryBuilder, parent_door: Any, daemon_processes: list[DaemonProcess]
) -> None:
    add_doubles(registry)
    cfg = write_config(tmp_path, registry)
    loop = asyncio.get_running_loop()
    first = await loop.run_in_executor(None, start_daemon_process, ["--config", str(cfg)])
    daemon_processes.append(first)
    door = await parent_door("x")
    wd = tmp_path / "boss-wd"
    wd.mkdir()
    async with aiohttp.ClientSession() as http:
        async with http.post(
            first.url + "/register",
            json={
                "session_id": "ses_bossstorm",
                "name": "boss",
                "version": "0.1.0",
                "workdir": str(wd),
                "capsule_url": door.url,
            },
        ) as resp:
            cred = (await resp.json())["credential"]
        headers = {CRED: cred}
        ok: list[dict[str, Any]] = []

        async def one(i: int) -> None:
            task = "sleep 0.2" if i % 3 == 0 else "sleep 4"
            try:
                async with http.post(
                    first.url + "/jobs", json={"name": "kid", "version": "0.1.0", "task": task}, headers=headers
                ) as resp:
                    if resp.status == 201:
                        ok.append(await resp.json())
            except aiohttp.ClientError:
                pass

        storm = [asyncio.create_task(one(i)) for i in range(30)]
        await wait_for(lambda: len(ok) >= 8, timeout=30)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
        await asyncio.gather(*storm)
        # Children keep running while no daemon is there; the short ones end unobserved.
        await asyncio.sleep(0.5)
        second = await loop.run_in_executor(None, start_daemon_process, ["--config", str(cfg)])
        daemon_processes.append(second)
        counts = reconcile_line(second)
        assert counts["matched"] >= 1 and counts["lost"] >= 1, counts
        db = tmp_path / "state" / "roost.db"

        def all_final() -> bool:
            with sqlite3.connect(db) as conn:
                states = [r[0] for r in conn.execute("SELECT state FROM jobs")]
            return bool(states) and all(s not in ("starting", "running") for s in states)

        await wait_for(all_final, timeout=30)
        with sqlite3.connect(db) as conn:
            conn.row_factory = sqlite3.Row
            rows = list(conn.execute("SELECT * FROM jobs"))
        assert counts["matched"] + counts["lost"] <= len(rows)
        assert {j["job_id"] for j in ok} <= {r["job_id"] for r in rows}  # no 201'd job is lost
        delivered = [r["headers"]["x-murmur-delegation-id"] for r in door.received]
        assert len(delivered) == len(set(delivered))  # never twice
        lines = read_trace(trace_path(wd, "ses_bossstorm"))
        ends = [ln["delegation_id"] for ln in lines if ln["event_type"] == "delegation"]
        starts = [ln["delegation_id"] for ln in lines if ln["event_type"] == "delegation_start"]
        assert len(ends) == len(set(ends)) and len(starts) == len(set(starts))
        for r in rows:
            if r["state"] == "failed" and r["session_id"] is None:
                continue
            comp = json.loads((Path(r["workdir"]) / "completion.json").read_text())
            assert comp["delegation_id"] == r["delegation_id"]
            assert r["delegation_id"] in ends
            if comp["delivered"] and comp["reported_by"] == "launcher":  # the double only pretends to post
                assert delivered.count(r["delegation_id"]) == 1
        for job in ok:
            async with http.get(second.url + f"/jobs/{job['job_id']}", headers=headers) as resp:
                view = await resp.json()
            assert view["state"] in ("complete", "crashed", "failed"), view
        # Every child launched by either daemon is gone.
        for r in rows:
            if r["pid"]:
                assert not psutil.pid_exists(r["pid"]) or psutil.Process(r["pid"]).status() == psutil.STATUS_ZOMBIE
    assert second.stop() == 0
