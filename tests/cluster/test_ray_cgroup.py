# ruff: noqa: ASYNC240
"""A child on a Ray node runs inside its job's cgroup there, and when the job ends, ``cgroup.kill``
leaves nothing of it — not even a double-forked, ``setsid``, SIGTERM-ignoring leftover whose
environment no longer names the job (which the marker sweep could not find).

The children are the runtime double behind a small launcher script (written by the test) that
first leaves such a process behind, then execs the double.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from roost.backends.process.cgroups import JobCgroups, find_v2_mount
from roost.backends.ray.placement import keeper_name
from tests.support.cluster import add_doubles, job_final, ray_settings, wait_for
from tests.support.daemon import RunningDaemon
from tests.support.launcher import DOUBLE
from tests.support.registry import RegistryBuilder

# Above the test's worst-case waits, plus the session cluster's start for the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

LEAVER = r"""
import os, signal, sys, time
workdir = sys.argv[sys.argv.index("--workdir") + 1]
# A runtime forks nothing before its start is complete (the keeper moves it into the job's
# cgroup just after exec; roost-capsule forks only once registered): wait to be moved.
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    with open("/proc/self/cgroup") as fh:
        if any(line.startswith("0::/") and os.environ["MURMUR_JOB_ID"] in line for line in fh):
            break
    time.sleep(0.01)
first = os.fork()
if first == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        env = {k: v for k, v in os.environ.items() if k != "MURMUR_JOB_ID"}
        with open(os.path.join(workdir, "leftover.pid.tmp"), "w") as fh:
            fh.write(str(os.getpid()))
        os.rename(os.path.join(workdir, "leftover.pid.tmp"), os.path.join(workdir, "leftover.pid"))
        code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"
        os.execve(sys.executable, [sys.executable, "-c", code], env)
    os._exit(0)
os.waitpid(first, 0)
os.execv(sys.executable, [sys.executable, DOUBLE, *sys.argv[1:]])
"""


def _cgroup_of(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    raise AssertionError(f"process {pid} is in no cgroup v2")


def _alive(pid: int, created: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


async def test_a_remote_childs_tree_is_in_its_job_cgroup_and_cgroup_kill_ends_it(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, tmp_path: Path
) -> None:
    if JobCgroups.discover("auto") is None:
        pytest.skip("this machine offers no writable cgroup v2 hierarchy with cgroup.kill")
    mount = find_v2_mount(Path("/proc/self/mounts").read_text())
    assert mount is not None
    leaver = tmp_path / "leaver.py"
    leaver.write_text(f"DOUBLE = {json.dumps(str(DOUBLE))}\n" + LEAVER)
    add_doubles(registry)
    settings = ray_settings(ray_cluster, tmp_path, ray_ns, runtime_command=(sys.executable, str(leaver)))
    d: RunningDaemon = await daemon_factory(registry.root, **settings)
    status, job, _, _ = await d.call(
        "POST", "/jobs", json={"name": "mid", "version": "0.1.0", "task": "stubborn sleep 600"}
    )
    assert status == 201, job
    w1 = ray_cluster.nodes["w1"]
    assert job["node"]["node_id"] == w1
    job_id = job["job_id"]
    pid_file = Path(job["workdir"]) / "leftover.pid"
    await wait_for(pid_file.exists, timeout=20)
    leftover = psutil.Process(int(pid_file.read_text()))
    leftover_created = leftover.create_time()
    try:
        assert "MURMUR_JOB_ID" not in leftover.environ(), "the leftover must be out of the marker sweep's sight"
        child_pid = d.roost.launcher.jobs[job_id].pid
        assert child_pid is not None
        assert os.getsid(leftover.pid) != os.getsid(child_pid), "the leftover really left the child's session"
        # Both are in the job's cgroup, made under the w1 keeper's jobs root.
        ray = pytest.importorskip("ray")
        keeper = ray.get_actor(keeper_name(w1), namespace=ray_ns)
        info = await keeper.info.remote()
        assert info["cgroups"] is not None, info
        job_cgroup = Path(info["cgroups"]) / job_id
        assert job_cgroup.is_dir()
        for pid in (child_pid, leftover.pid):
            assert Path(mount) / _cgroup_of(pid).lstrip("/") == job_cgroup, pid
        status, body, _, _ = await d.call("POST", f"/jobs/{job_id}/cancel")
        assert status == 200, body
        final = await job_final(d, job_id)
        assert final["state"] == "terminated", final
        # Gone at the job's end: the leftover too, and the job's cgroup with it.
        await wait_for(lambda: not _alive(leftover.pid, leftover_created), timeout=15)
        await wait_for(lambda: not job_cgroup.exists(), timeout=15)
    finally:
        if _alive(leftover.pid, leftover_created):
            leftover.kill()  # only when an assertion above failed: never leave it running
