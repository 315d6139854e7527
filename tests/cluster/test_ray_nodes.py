"""One node's trouble stays on that node: its start gate (``max_starting``) holds back only the
launches placed there, and its keeper's death ends only its children, each with the documented
``crashed`` completion, while the next launch there gets a fresh keeper.

The daemon runs in the test's event loop with ``launcher = "ray"``, joined to the session's test
cluster; children are the runtime double, placed per capsule on a chosen node.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import psutil
import pytest

from roost.backends.base import NodeRef
from roost.backends.ray.cluster import PG_PREFIX
from roost.backends.ray.keepers import keeper_gone_sentence, node_gone_sentence
from roost.backends.ray.placement import keeper_name
from roost.core.completion import crash_detail
from tests.support.cluster import (
    add_doubles,
    job_final,
    job_processes,
    job_view,
    no_process_left,
    ray_settings,
    wait_for,
)
from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder

# Above the test's worst-case waits, plus the session cluster's start for the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

ray = pytest.importorskip("ray")
from ray.util.placement_group import placement_group_table  # noqa: E402


async def _launch(d: RunningDaemon, name: str, task: str) -> tuple[int, Any]:
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": name, "version": "0.1.0", "task": task})
    return status, body


def _placed_jobs() -> set[str]:
    """Job ids whose placement group Ray has created (the session's cluster, every namespace)."""
    return {
        str(info["name"])[len(PG_PREFIX) :]
        for info in placement_group_table().values()
        if str(info.get("name", "")).startswith(PG_PREFIX) and info.get("state") == "CREATED"
    }


async def test_max_starting_gates_each_node_on_its_own(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, tmp_path: Path
) -> None:
    add_doubles(registry)
    settings = ray_settings(ray_cluster, tmp_path, ray_ns, max_starting=1, launch_timeout_secs=90)
    d: RunningDaemon = await daemon_factory(registry.root, **settings)
    before = _placed_jobs()
    # A child on w1 that registers but will not report ready until told: it holds w1's one slot.
    slow = asyncio.ensure_future(_launch(d, "mid", "hold-ready sleep 600"))
    (slow_id,) = await wait_for(lambda: _placed_jobs() - before, timeout=60)
    await wait_for(lambda: job_processes({slow_id}), timeout=60)
    # A second launch on w1 is placed, then waits at w1's gate.
    queued = asyncio.ensure_future(_launch(d, "mid", "sleep 600"))
    (queued_id,) = await wait_for(lambda: _placed_jobs() - before - {slow_id}, timeout=60)
    # A launch placed on w2 starts and reports ready while w1's slot is still taken.
    status, other = await _launch(d, "kid", "sleep 600")
    assert status == 201, other
    assert other["node"]["node_id"] == ray_cluster.nodes["w2"], other
    assert not slow.done() and not queued.done()
    held = await job_view(d, slow_id)
    assert held["state"] == "starting", held
    assert not job_processes({queued_id}), "w1's gate let a second child start beside a starting one"
    # Once the slow child is ready, w1's slot passes to the queued launch.
    (Path(held["workdir"]) / "go").touch()
    status, first = await slow
    assert status == 201 and first["node"]["node_id"] == ray_cluster.nodes["w1"], first
    status, second = await queued
    assert status == 201 and second["job_id"] == queued_id, second
    assert second["node"]["node_id"] == ray_cluster.nodes["w1"], second
    ids = {slow_id, queued_id, other["job_id"]}
    for job_id in ids:
        await d.call("POST", f"/jobs/{job_id}/cancel")
    await no_process_left(ids)


async def test_a_keeper_killed_on_its_node_ends_its_children_and_the_next_launch_gets_a_new_one(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, tmp_path: Path
) -> None:
    add_doubles(registry)
    d: RunningDaemon = await daemon_factory(registry.root, **ray_settings(ray_cluster, tmp_path, ray_ns))
    w1 = ray_cluster.nodes["w1"]
    doomed = []
    for _ in range(2):
        status, job = await _launch(d, "mid", "sleep 600")
        assert status == 201, job
        doomed.append(job)
    status, safe = await _launch(d, "kid", "sleep 600")
    assert status == 201, safe
    safe_pids = {p.pid for p in job_processes({safe["job_id"]})}
    keeper = ray.get_actor(keeper_name(w1), namespace=ray_ns)
    old_pid = int((await keeper.info.remote())["pid"])
    assert {p.ppid() for p in job_processes({j["job_id"] for j in doomed})} == {old_pid}
    os.kill(old_pid, signal.SIGKILL)  # the keeper's Ray worker process, as an OOM kill would
    # Each child saw its lifeline close (the keeper held the write end) and ended; the daemon
    # records the keeper's death, not the node's: the node lives on and keeps the records.
    where = NodeRef(w1, "127.0.0.1")
    died = crash_detail(keeper_gone_sentence(where), [])
    for job in doomed:
        final = await job_final(d, job["job_id"], timeout=90)
        assert final["state"] == "crashed", final
        assert final["reason"].startswith(died), final
        assert node_gone_sentence(where) not in final["reason"], final
        assert "spawner lifeline closed" in final["reason"], final  # its stderr tail
        assert final["node"] == {"node_id": w1, "address": "127.0.0.1"}, final
        assert final["completion"]["status"] == "crashed", final
        assert final["completion"]["detail"] == final["reason"], final
        workdir = Path(job["workdir"])
        assert (workdir / "spawner_ended.json").exists()
        record = json.loads((workdir / "completion.json").read_text())
        assert record["status"] == "crashed" and record["reported_by"] == "launcher", record
        assert record["detail"] == final["reason"], record
        assert not (d.config.state_dir / "ray-lost" / job["job_id"]).exists()
    await no_process_left({j["job_id"] for j in doomed})
    # The other node's child never noticed.
    assert (await job_view(d, safe["job_id"]))["state"] == "running"
    assert {p.pid for p in job_processes({safe["job_id"]})} == safe_pids
    # The next launch on w1 runs under a fresh keeper.
    status, again = await _launch(d, "mid", "sleep 600")
    assert status == 201, again
    fresh = ray.get_actor(keeper_name(w1), namespace=ray_ns)
    new_pid = int((await fresh.info.remote())["pid"])
    assert new_pid != old_pid and not psutil.pid_exists(old_pid)
    assert {p.ppid() for p in job_processes({again["job_id"]})} == {new_pid}
    assert (await job_view(d, again["job_id"]))["state"] == "running"
    for job_id in (again["job_id"], safe["job_id"]):
        await d.call("POST", f"/jobs/{job_id}/cancel")
    await no_process_left({again["job_id"], safe["job_id"]})
