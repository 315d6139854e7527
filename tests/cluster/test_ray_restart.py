"""``kill -9`` of a Ray-backed daemon during a storm across three nodes: the node keepers keep
every child (and its lifeline) running, the next daemon re-adopts each one, and each ends once."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import time
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.cluster import RUNTIME, add_doubles, job_processes, no_process_left, wait_for
from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.registry import RegistryBuilder

# Above the test's worst-case waits, plus the session cluster's start for the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]


def _toml(tmp: Path, registry: Path, cluster: Any, namespace: str) -> Path:
    placement = "\n".join(
        f"[ray_placement.{name}]\nresources = {{ {res} = 1 }}"
        for name, res in (("boss", "head"), ("mid", "w1"), ("kid", "w2"))
    )
    cfg = tmp / "roost.toml"
    cfg.write_text(
        f'registry_path = "{registry}"\nstate_dir = "{tmp / "state"}"\n'
        'spawn_allow = ["boss", "mid", "kid"]\nstop_grace_secs = 2.0\n'
        "uid_max_live_jobs = 100\nuid_max_live_sessions = 100\nmax_live_capsules = 100\n"
        f"runtime_command = {json.dumps(list(RUNTIME))}\n"
        f'launcher = "ray"\nray_address = "{cluster.address}"\nray_namespace = "{namespace}"\n'
        f'ray_node_root = "{tmp / "nodes"}"\n' + placement + "\n"
    )
    return cfg


async def _job(http: aiohttp.ClientSession, url: str, job_id: str) -> dict[str, Any]:
    async with http.get(f"{url}/jobs/{job_id}") as resp:
        assert resp.status == 200, await resp.text()
        return dict(await resp.json())


async def test_kill_9_during_a_cross_node_storm_readopts_every_child(
    ray_ns: str, tmp_path: Path, registry: RegistryBuilder, ray_cluster: Any, daemon_processes: list[DaemonProcess]
) -> None:
    add_doubles(registry)
    cfg = _toml(tmp_path, registry.root, ray_cluster, ray_ns)
    # One port for both daemons: the children report their end to the URL they were started with.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    args = ["--config", str(cfg), "--port", port]
    loop = asyncio.get_running_loop()
    first = await loop.run_in_executor(None, partial(start_daemon_process, args, timeout=90))
    daemon_processes.append(first)
    async with aiohttp.ClientSession() as http:

        async def launch(name: str, task: str) -> dict[str, Any]:
            async with http.post(first.url + "/jobs", json={"name": name, "version": "0.1.0", "task": task}) as r:
                assert r.status == 201, await r.text()
                return dict(await r.json())

        jobs = await asyncio.gather(*(launch(n, "sleep 10") for n in ("boss", "mid", "kid") * 4))
        # One child per node ends while no daemon runs (its last call to the daemon fails): lost.
        gone = await asyncio.gather(*(launch(n, "sleep 0.5") for n in ("boss", "mid", "kid")))
        nodes = {j["node"]["node_id"] for j in jobs}
        assert nodes == set(ray_cluster.nodes[k] for k in ("head", "w1", "w2"))
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
        ids = {j["job_id"] for j in jobs}
        assert len(job_processes(ids)) >= len(jobs)  # all still running without a daemon
        gone_ids = {j["job_id"] for j in gone}
        await wait_for(lambda: not job_processes(gone_ids), timeout=20)
        second = await loop.run_in_executor(None, partial(start_daemon_process, args, timeout=90))
        daemon_processes.append(second)
        reconciled = next(json.loads(ln) for ln in second.stderr_lines if '"reconciled"' in ln)
        assert reconciled["matched"] == len(jobs), reconciled
        assert reconciled["lost"] == len(gone) and reconciled["orphans"] == 0, reconciled
        for job_id in gone_ids:
            lost = await _job(http, second.url, job_id)
            assert lost["state"] not in ("starting", "running"), lost
            assert lost["completion"] is not None and lost["completion"]["reported_by"] == "launcher", lost
        deadline = time.monotonic() + 60
        views = [await _job(http, second.url, j) for j in ids]
        while any(v["state"] in ("starting", "running") for v in views) and time.monotonic() < deadline:
            await asyncio.sleep(0.3)
            views = [await _job(http, second.url, j) for j in ids]
    for view in views:
        assert view["state"] == "complete", view["reason"]
        assert view["node"] is not None
        assert view["completion"]["status"] == "ok", view
    ended = [json.loads(ln)["job_id"] for ln in second.stderr_lines if '"job_ended"' in ln]
    assert sorted(ended) == sorted(ids | gone_ids)  # each job finalized exactly once
    await no_process_left(ids)
    await loop.run_in_executor(None, second.stop)
