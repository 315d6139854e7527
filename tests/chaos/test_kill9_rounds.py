"""Rounds of ``kill -9`` of the daemon at random points of a launch storm with redeems in flight.

Every round starts the daemon on the same state dir, fires a storm of launches (``POST /jobs``,
each child redeeming its approval as it registers) and of direct spawn → register redeems, and
kills the daemon after a random delay. After the last round a final daemon settles everything:

* 0 lost jobs: every job answered 201 is in the database and ends in a final state;
* 0 duplicate completions: each delegation is posted to the parent and traced at most once;
* 0 orphan processes: no child of any round is left running;
* 0 revoked credentials: every credential an answer handed out still authenticates while its
  session runs (the parent's, and every redeemed child's);
* ``PRAGMA integrity_check`` is ``ok``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest

from roost.observe.tracelines import read_trace, trace_path
from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.launcher import DOUBLE, add_doubles, wait_for
from tests.support.registry import RegistryBuilder

CRED = "x-murmur-spawn-credential"
APPROVAL = "x-murmur-spawn-approval"
ROUNDS = int(os.environ.get("ROOST_CHAOS_ROUNDS", "3"))
pytestmark = pytest.mark.slow


def _config(tmp_path: Path, registry: RegistryBuilder) -> Path:
    cfg = tmp_path / "roost.toml"
    cfg.write_text(
        "[roost]\n"
        f'registry_path = "{registry.root}"\n'
        f'state_dir = "{tmp_path / "state"}"\n'
        'spawn_allow = ["boss"]\n'
        f'runtime_command = ["{sys.executable}", "{DOUBLE}"]\n'
        "max_concurrent = 500\nmax_live_capsules = 2000\n"
        "stop_grace_secs = 1.0\nlifeline_grace_secs = 2.0\n"
    )
    return cfg


async def test_kill9_rounds_lose_nothing(
    tmp_path: Path, registry: RegistryBuilder, parent_door: Any, daemon_processes: list[DaemonProcess]
) -> None:
    add_doubles(registry)
    cfg = _config(tmp_path, registry)
    seed = int(os.environ.get("ROOST_CHAOS_SEED", str(time.time_ns())))
    print(f"chaos seed: {seed} (ROOST_CHAOS_SEED={seed} replays this run's kill points)")
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    door = await parent_door("x")
    wd = tmp_path / "boss-wd"
    wd.mkdir()
    launched: list[dict[str, Any]] = []
    creds: dict[str, str] = {}  # session id → credential an answer handed out
    async with aiohttp.ClientSession() as http:
        daemon = await loop.run_in_executor(None, start_daemon_process, ["--config", str(cfg)])
        daemon_processes.append(daemon)
        body = {"session_id": "ses_chaosboss", "name": "boss", "version": "0.1.0", "workdir": str(wd)}
        async with http.post(daemon.url + "/register", json={**body, "capsule_url": door.url}) as resp:
            assert resp.status == 200, await resp.text()
            creds["ses_chaosboss"] = (await resp.json())["credential"]
        boss = {CRED: creds["ses_chaosboss"]}

        for round_no in range(ROUNDS):
            url = daemon.url

            async def launch(i: int, url: str = url) -> None:
                task = "sleep 0.3" if i % 2 else "sleep 3"
                try:
                    async with http.post(
                        url + "/jobs", json={"name": "kid", "version": "0.1.0", "task": task}, headers=boss
                    ) as resp:
                        if resp.status == 201:
                            launched.append(await resp.json())
                except aiohttp.ClientError:
                    pass

            async def redeem(i: int, url: str = url, round_no: int = round_no) -> None:
                try:
                    async with http.post(url + "/spawn", json={"name": "kid", "version": "0.1.0"}, headers=boss) as r:
                        if r.status != 200:
                            return
                        approval = (await r.json())["approval"]
                    sid = f"ses_chaos{round_no:02d}k{i:04d}"
                    async with http.post(
                        url + "/register",
                        json={"session_id": sid, "name": "kid", "version": "0.1.0"},
                        headers={APPROVAL: approval},
                    ) as r:
                        if r.status == 200:
                            creds[sid] = (await r.json())["credential"]
                except aiohttp.ClientError:
                    pass

            storm = [asyncio.create_task(launch(i)) for i in range(12)]
            storm += [asyncio.create_task(redeem(i)) for i in range(20)]
            await asyncio.sleep(rng.uniform(0.2, 1.5))
            daemon.proc.send_signal(signal.SIGKILL)
            daemon.proc.wait()
            await asyncio.gather(*storm)
            daemon = await loop.run_in_executor(None, start_daemon_process, ["--config", str(cfg)])
            daemon_processes.append(daemon)

        # Settle: every job reaches a final state under the last daemon.
        db = tmp_path / "state" / "roost.db"

        def all_final() -> bool:
            with sqlite3.connect(db) as conn:
                states = [r[0] for r in conn.execute("SELECT state FROM jobs")]
            return all(s not in ("starting", "running") for s in states)

        await wait_for(all_final, timeout=60)
        # 0 revoked credentials: every handed-out credential of a running session still works.
        for sid, cred in creds.items():
            async with http.post(daemon.url + "/renew", headers={CRED: cred}) as resp:
                assert resp.status == 200, (sid, resp.status, await resp.text())
        with sqlite3.connect(db) as conn:
            conn.row_factory = sqlite3.Row
            rows = list(conn.execute("SELECT * FROM jobs"))
            live = {r[0] for r in conn.execute("SELECT session_id FROM sessions WHERE status = 'running'")}
        assert {sid for sid in creds} <= live  # nothing ended them: their credentials must still verify
        # 0 lost jobs.
        assert {j["job_id"] for j in launched} <= {r["job_id"] for r in rows}
        for job in launched:
            async with http.get(daemon.url + f"/jobs/{job['job_id']}", headers=boss) as resp:
                view = await resp.json()
            assert view["state"] in ("complete", "crashed", "failed", "terminated"), view
        # 0 duplicate completions.
        delivered = [r["headers"]["x-murmur-delegation-id"] for r in door.received]
        assert len(delivered) == len(set(delivered))
        lines = read_trace(trace_path(wd, "ses_chaosboss"))
        ends = [ln["delegation_id"] for ln in lines if ln["event_type"] == "delegation"]
        assert len(ends) == len(set(ends))
        for r in rows:
            comp_path = Path(r["workdir"]) / "completion.json"
            if comp_path.exists():
                assert json.loads(comp_path.read_text())["delegation_id"] == r["delegation_id"]
        # 0 orphans: every child of every round is gone.
        for r in rows:
            if r["pid"]:
                gone = not psutil.pid_exists(r["pid"]) or psutil.Process(r["pid"]).status() == psutil.STATUS_ZOMBIE
                assert gone, r["job_id"]
    assert daemon.stop() == 0
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
