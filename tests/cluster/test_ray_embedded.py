"""A Ray daemon with no cluster to join. With ``ray_address`` unset it starts a Ray of its own, runs a
child on it, and stops that Ray (and only that one) when it is told to stop.

The daemon is a real ``mur-roost`` process. ``RAY_ADDRESS`` in its environment names another
address on purpose: an embedded Ray must be the daemon's own even where the environment or the
machine's last ``ray start`` points elsewhere (the session's test cluster, other test sessions).
That test pays for a Ray head of its own (about ten seconds), so it is slow. With an address
nothing answers at, ``roostctl doctor`` fails the cluster check with the fix for that address.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest

from tests.support.cluster import RUNTIME, add_doubles, wait_for
from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.registry import RegistryBuilder

# Above the test's worst-case waits, plus the session cluster's start for the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

RAY_PROCESS_NAMES = {"gcs_server", "raylet"}


def _snapshot(pid: int) -> list[tuple[int, float, str]]:
    """The process's descendants now: pid, create time, name."""
    out = []
    for proc in psutil.Process(pid).children(recursive=True):
        try:
            out.append((proc.pid, proc.create_time(), proc.name()))
        except psutil.Error:
            continue
    return out


async def _doctor(state_dir: Path) -> dict[str, Any]:
    """``roostctl doctor --json``'s findings by check name."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "roost.ctl.main",
        "--state-dir",
        str(state_dir),
        "doctor",
        "--json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1"},
    )
    out, err = await proc.communicate()
    assert proc.returncode in (0, 1), err
    return {f["check"]: f for f in json.loads(out)["findings"]}


def _still_alive(pid: int, created: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


async def test_an_embedded_ray_runs_a_child_and_stops_with_the_daemon(
    tmp_path: Path, registry: RegistryBuilder, daemon_processes: list[DaemonProcess]
) -> None:
    add_doubles(registry)
    cfg = tmp_path / "roost.toml"
    cfg.write_text(
        f'registry_path = "{registry.root}"\nstate_dir = "{tmp_path / "state"}"\nspawn_allow = ["any"]\n'
        f"runtime_command = {json.dumps(list(RUNTIME))}\nstop_grace_secs = 2.0\n"
        f'launcher = "ray"\nray_namespace = "t-embedded"\nray_node_root = "{tmp_path / "nodes"}"\n'
    )
    env = {**os.environ, "RAY_ADDRESS": "127.0.0.1:1", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    loop = asyncio.get_running_loop()
    daemon = await loop.run_in_executor(
        None, partial(start_daemon_process, ["--config", str(cfg)], env=env, timeout=120)
    )
    daemon_processes.append(daemon)
    connected = [json.loads(ln) for ln in daemon.stderr_lines if '"ray_connected"' in ln]
    assert connected and connected[0]["address"] == "embedded" and connected[0]["nodes"] == 1, daemon.stderr_lines
    async with aiohttp.ClientSession() as http:
        body = {"name": "any", "version": "0.1.0", "task": "sleep 0.3"}
        async with http.post(daemon.url + "/jobs", json=body) as resp:
            job = await resp.json()
            assert resp.status == 201, job
        # The one node of the daemon's own Ray, not a node of anything RAY_ADDRESS names.
        doctor = await _doctor(tmp_path / "state")
        assert doctor["ray-cluster"]["status"] == "ok", doctor
        assert doctor["ray-cluster"]["detail"].startswith("embedded: 1 live node(s)"), doctor
        assert f"ray-node {job['node']['node_id'][:12]}" in doctor, doctor
        assert Path(job["workdir"]).is_relative_to(tmp_path / "nodes")

        async def ended() -> Any:
            async with http.get(f"{daemon.url}/jobs/{job['job_id']}") as resp:
                view = await resp.json()
            return view if view["state"] not in ("starting", "running") else None

        final = await wait_for(ended, timeout=40)
    assert final["state"] == "complete", final
    assert final["completion"]["status"] == "ok", final
    # Its Ray is the daemon's own: its head and raylet are the daemon's descendants (a keeper too).
    mine = _snapshot(daemon.proc.pid)
    assert {name for _, _, name in mine} >= RAY_PROCESS_NAMES, mine
    assert await loop.run_in_executor(None, partial(daemon.stop, signal.SIGTERM, 90)) == 0
    assert any('"stopped"' in ln for ln in daemon.stderr_lines)
    await wait_for(lambda: not [p for p in mine if _still_alive(p[0], p[1])], timeout=30)


async def test_doctor_says_what_to_fix_when_the_cluster_is_unreachable(
    tmp_path: Path, registry: RegistryBuilder, daemon_processes: list[DaemonProcess]
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    add_doubles(registry)
    cfg = tmp_path / "roost.toml"
    cfg.write_text(
        f'registry_path = "{registry.root}"\nstate_dir = "{tmp_path / "state"}"\nspawn_allow = ["any"]\n'
        f'launcher = "ray"\nray_address = "127.0.0.1:{port}"\nray_namespace = "t-unreachable"\n'
        f'ray_node_root = "{tmp_path / "nodes"}"\n'
    )
    loop = asyncio.get_running_loop()
    daemon = await loop.run_in_executor(None, partial(start_daemon_process, ["--config", str(cfg)], timeout=60))
    daemon_processes.append(daemon)
    found = (await _doctor(tmp_path / "state"))["ray-cluster"]
    assert found["status"] == "fail", found
    assert found["detail"].startswith(f"the Ray cluster (127.0.0.1:{port}) is not reachable: "), found
    assert found["fix"].startswith(f"start the head there (on 127.0.0.1: ray start --head --port {port})"), found
    assert "refuses launches until it answers" in found["fix"]
    assert await loop.run_in_executor(None, daemon.stop) == 0
