# ruff: noqa: ASYNC109
"""The per-node keeper actor on a real Ray cluster: a plain child process with a lifeline, its
directory records, its exit, and what happens to it when its lifeline closes or its keeper dies."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from roost.backends.ray.cluster import RayCluster
from roost.backends.ray.node.doors import DoorRequest
from roost.core import ids
from roost.system.blocking import BlockingExecutor

# Above the test's worst-case waits, plus the session cluster's start for the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

# A child that reports ready, then waits for its lifeline's EOF and records that it saw it.
CHILD = r"""
import json, os, sys, time
print(json.dumps({"session_id": "ses_" + "0" * 32, "pid": os.getpid()}), flush=True)
fd = int(os.environ["MURMUR_SPAWNER_LIFELINE"])
while os.read(fd, 1):
    pass
with open("eof.json", "w") as fh:
    json.dump({"uid": os.getuid(), "pgid": os.getpgid(0), "pid": os.getpid()}, fh)
sys.exit(143)
"""
ARGV = ["@python", "-c", CHILD]


@pytest.fixture
async def rc(ray_ns: str, ray_cluster: Any, tmp_path: Path) -> AsyncIterator[RayCluster]:
    executor = BlockingExecutor()
    cluster = RayCluster(
        executor,
        address=ray_cluster.address,
        namespace=ray_ns,
        node_root=str(tmp_path / "nodes"),
        job_cgroups="auto",
    )
    await cluster.start()
    assert cluster.connected, cluster.last_error
    yield cluster
    await cluster.stop()
    executor.shutdown()


async def _wait_gone(pid: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"process {pid} still runs")


async def test_child_runs_on_the_pinned_node_and_ends_when_its_lifeline_closes(
    rc: RayCluster, ray_cluster: Any
) -> None:
    node = ray_cluster.nodes["w1"]
    keeper = await rc.keeper(node)
    info = await keeper.info.remote()
    assert info["node_id"] == node
    job = ids.job_id()
    workdir = await keeper.prepare.remote(
        job, None, {"objective": "x", "instructions": None, "context": None, "output_format": None}
    )
    assert (Path(workdir) / "meta" / "job_id.txt").read_text().strip() == job
    assert json.loads((Path(workdir) / "input.json").read_text())["job_id"] == job
    started = await keeper.start.remote(
        job, ["@python", "-c", CHILD], {"MURMUR_JOB_ID": job}, None, {}, b"approval\n", False
    )
    pid = started["pid"]
    line, why = await keeper.wait_ready.remote(job, 30)
    assert why is None and json.loads(line)["pid"] == pid
    # A plain OS process in its own process group, the keeper's child — not a Ray worker.
    proc = psutil.Process(pid)
    assert os.getpgid(pid) == pid
    assert proc.ppid() == info["pid"]
    assert "default_worker" not in " ".join(proc.cmdline())
    listed = await keeper.list.remote()
    assert [(c["job_id"], c["status"]) for c in listed] == [(job, None)]
    await keeper.close_lifeline.remote(job)
    status = await keeper.wait_exit.remote(job)
    assert status == "exit status 143"
    assert json.loads((Path(workdir) / "eof.json").read_text())["pid"] == pid
    assert await keeper.read_completion.remote(job, None) is None


async def test_a_dead_keeper_takes_its_children_with_it(rc: RayCluster, ray_cluster: Any) -> None:
    import ray

    keeper = await rc.keeper(ray_cluster.nodes["w2"])
    jobs = [ids.job_id() for _ in range(3)]
    pids = []
    for job in jobs:
        await keeper.prepare.remote(job, None, None)
        started = await keeper.start.remote(
            job, ["@python", "-c", CHILD], {"MURMUR_JOB_ID": job}, None, {}, None, False
        )
        pids.append(started["pid"])
        assert (await keeper.wait_ready.remote(job, 30))[1] is None
    ray.kill(keeper)
    rc.forget_keeper(ray_cluster.nodes["w2"])
    for pid in pids:
        await _wait_gone(pid)


async def test_the_artifact_cache_takes_only_the_named_digest(rc: RayCluster, ray_cluster: Any) -> None:
    keeper = await rc.keeper(ray_cluster.nodes["head"])
    # The node's root lasts the whole session: earlier tests' artifacts may be cached there.
    before = (await keeper.info.remote())["cache"]
    data = b"PK\x05\x06" + b"\0" * 18
    digest = hashlib.sha256(data).hexdigest()
    assert not await keeper.has_artifact.remote("cap", "1.0.0", digest)
    with pytest.raises(Exception, match="does not match its sha256"):
        await keeper.put_artifact.remote("cap", "1.0.0", "0" * 64, data)
    await keeper.put_artifact.remote("cap", "1.0.0", digest, data)
    assert await keeper.has_artifact.remote("cap", "1.0.0", digest)
    after = (await keeper.info.remote())["cache"]
    assert after["count"] == before["count"] + 1 and after["bytes"] == before["bytes"] + len(data), after
    assert after["mismatched"] == [] and after["writable"], after


# A child with a "door": an HTTP server on its node's loopback (a small and a large answer).
DOOR_CHILD = r"""
import http.server, json, os, threading
class Door(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"x" * 5000 if self.path == "/big" else json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Door)
print(json.dumps({"session_id": "ses_" + "0" * 32, "port": server.server_address[1]}), flush=True)
fd = int(os.environ["MURMUR_SPAWNER_LIFELINE"])
threading.Thread(target=server.serve_forever, daemon=True).start()
while os.read(fd, 1):
    pass
"""


async def test_the_keeper_calls_its_childrens_doors_on_its_own_loopback_within_bounds(
    rc: RayCluster, ray_cluster: Any
) -> None:
    keeper = await rc.keeper(ray_cluster.nodes["w1"])
    job = ids.job_id()
    await keeper.prepare.remote(job, None, None)
    await keeper.start.remote(job, ["@python", "-c", DOOR_CHILD], {"MURMUR_JOB_ID": job}, None, {}, None, False)
    line, why = await keeper.wait_ready.remote(job, 30)
    assert why is None
    port = json.loads(line)["port"]
    answer = await keeper.door_request.remote(DoorRequest(job, "GET", port, "/a2a?x=1", {}, None, 10.0))
    assert (answer["status"], json.loads(answer["body"])) == (200, {"path": "/a2a?x=1"}), answer
    too_big = await keeper.door_request.remote(DoorRequest(job, "GET", port, "/big", {}, None, 10.0), 1000)
    assert too_big == {"error": "the door's answer is larger than 1000 bytes"}
    # Only a running child of this keeper's, with a plain door request.
    stranger = await keeper.door_request.remote(DoorRequest(ids.job_id(), "GET", port, "/", {}, None, 10.0))
    assert "has no running child on this node" in stranger["error"]
    odd = await keeper.door_request.remote(DoorRequest(job, "DELETE", port, "/", {}, None, 10.0))
    assert "not a door request" in odd["error"]
    await keeper.close_lifeline.remote(job)
    await keeper.wait_exit.remote(job)
    ended = await keeper.door_request.remote(DoorRequest(job, "GET", port, "/", {}, None, 10.0))
    assert "has no running child on this node" in ended["error"]
