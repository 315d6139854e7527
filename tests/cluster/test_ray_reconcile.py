"""Reconcile's ``orphans`` and ``removed`` counts on Ray: after a ``kill -9``, the next daemon
stops a child a keeper still runs for a job no record accounts for (an orphan), and lets go of
what the cluster still holds for such jobs — the placement group of a launch that was waiting
for room when the daemon died, and a keeper's entry of an ended child whose job the store does
not know — while the children it does know are matched and left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from roost.backends.ray.cluster import PG_PREFIX, start_keeper
from roost.backends.ray.placement import keeper_name
from tests.support.cluster import RUNTIME, add_doubles, job_processes, no_process_left, wait_for
from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.registry import RegistryBuilder

# Above the test's worst-case waits, plus the session cluster's start for the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

ray = pytest.importorskip("ray")
from ray.util.placement_group import placement_group_table  # noqa: E402


def _pgs(state: str | None = None) -> dict[str, str]:
    """Job placement groups in the whole cluster (every namespace): name → state."""
    out = {}
    for info in placement_group_table().values():
        name = str(info.get("name", ""))
        if name.startswith(PG_PREFIX) and (state is None or info.get("state") == state):
            out[name] = str(info.get("state"))
    return out


async def test_a_restart_stops_an_orphan_and_removes_what_no_record_accounts_for(
    ray_ns: str, tmp_path: Path, registry: RegistryBuilder, ray_cluster: Any, daemon_processes: list[DaemonProcess]
) -> None:
    add_doubles(registry)
    cfg = tmp_path / "roost.toml"
    cfg.write_text(
        f'registry_path = "{registry.root}"\nstate_dir = "{tmp_path / "state"}"\nspawn_allow = ["big"]\n'
        f"runtime_command = {json.dumps(list(RUNTIME))}\nstop_grace_secs = 2.0\nray_busy_wait_secs = 300\n"
        f'launcher = "ray"\nray_address = "{ray_cluster.address}"\nray_namespace = "{ray_ns}"\n'
        f'ray_node_root = "{tmp_path / "nodes"}"\n[ray_placement.big]\nresources = {{ w1 = 400 }}\n'
    )
    loop = asyncio.get_running_loop()
    first = await loop.run_in_executor(None, partial(start_daemon_process, ["--config", str(cfg)], timeout=90))
    daemon_processes.append(first)
    body = {"name": "big", "version": "0.1.0", "task": "sleep 600"}
    async with aiohttp.ClientSession() as http:
        running = []
        for _ in range(2):  # 800 of w1's 1000 units: a third must wait for room
            async with http.post(first.url + "/jobs", json=body) as resp:
                job = await resp.json()
                assert resp.status == 201, job
                running.append(job)
        known = {PG_PREFIX + j["job_id"] for j in running}
        pending_before = set(_pgs("PENDING"))
        waiting = asyncio.ensure_future(http.post(first.url + "/jobs", json=body))
        try:
            waits = await wait_for(lambda: (set(_pgs("PENDING")) - pending_before - known) or None, timeout=30)
            first.proc.send_signal(signal.SIGKILL)
            first.proc.wait()
        finally:
            waiting.cancel()
            with contextlib.suppress(BaseException):
                await waiting
    assert len(waits) == 1, waits
    ids = {j["job_id"] for j in running}
    assert len(job_processes(ids)) >= 2  # both still run without a daemon
    # An ended child on w1's keeper whose job no store knows (its daemon died before forgetting it).
    keeper = ray.get_actor(keeper_name(ray_cluster.nodes["w1"]), namespace=ray_ns)
    unknown = "job_" + os.urandom(16).hex()
    await keeper.prepare.remote(unknown, None, None)
    await keeper.start.remote(
        unknown, [sys.executable, "-c", "pass"], {"MURMUR_JOB_ID": unknown}, None, {}, None, False
    )
    await keeper.wait_exit.remote(unknown)
    assert unknown in {c["job_id"] for c in await keeper.list.remote()}
    # A child still running on w2's keeper (one the dead daemon had started there) whose job no
    # store knows: an orphan.
    w2_keeper = await loop.run_in_executor(
        None, start_keeper, ray_cluster.nodes["w2"], ray_ns, str(tmp_path / "nodes"), "auto"
    )
    orphan = "job_" + os.urandom(16).hex()
    await w2_keeper.prepare.remote(orphan, None, None)
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    await w2_keeper.start.remote(orphan, sleeper, {"MURMUR_JOB_ID": orphan}, None, {}, None, False)
    assert job_processes({orphan})

    second = await loop.run_in_executor(None, partial(start_daemon_process, ["--config", str(cfg)], timeout=90))
    daemon_processes.append(second)
    reconciled = next(json.loads(ln) for ln in second.stderr_lines if '"reconciled"' in ln)
    assert reconciled["matched"] == 2 and reconciled["lost"] == 0 and reconciled["orphans"] == 1, reconciled
    assert reconciled["removed"] == 2, reconciled  # the orphan let go of its own entry
    await no_process_left({orphan})
    assert orphan not in {c["job_id"] for c in await w2_keeper.list.remote()}
    held = {name for name, state in _pgs().items() if state != "REMOVED"}
    assert not held & waits, _pgs()
    assert unknown not in {c["job_id"] for c in await keeper.list.remote()}
    # The matched children's reservations stay theirs until they end.
    assert known <= held
    async with aiohttp.ClientSession() as http:
        for job_id in ids:
            async with http.post(f"{second.url}/jobs/{job_id}/cancel") as resp:
                assert resp.status == 200, await resp.text()
    await no_process_left(ids)
    assert await loop.run_in_executor(None, second.stop) == 0
