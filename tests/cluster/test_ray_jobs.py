"""Jobs on a 3-node Ray cluster through a real daemon: placement, records, lifelines, the cascade,
refusals, and a node that dies.

The daemon runs in the test's event loop with ``launcher = "ray"``, joined to the session's test
cluster; children are the runtime double (tests/launcher/runtime_double.py), placed per capsule
on a chosen node by its custom resource.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from roost import __version__
from roost.backends.base import NodeRef
from roost.backends.ray.keepers import keeper_gone_sentence, node_gone_sentence
from roost.core.completion import crash_detail
from roost.observe.tracelines import read_trace, trace_path
from tests.support.cluster import (
    add_doubles,
    delegated_final,
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


@pytest.fixture
async def ray_daemon(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, tmp_path: Path
) -> RunningDaemon:
    add_doubles(registry)
    d: RunningDaemon = await daemon_factory(registry.root, **ray_settings(ray_cluster, tmp_path, ray_ns))
    return d


async def _launch(d: RunningDaemon, name: str, task: str, **extra: Any) -> tuple[int, Any]:
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": name, "version": "0.1.0", "task": task, **extra})
    return status, body


def _delegated(workdir: str) -> dict[str, Any] | None:
    """The job a runtime double launched (it writes the POST /jobs answer into its directory)."""
    path = Path(workdir) / "delegated.json"
    return dict(json.loads(path.read_text())) if path.exists() else None


async def test_a_delegation_tree_spans_all_three_nodes(ray_daemon: RunningDaemon, ray_cluster: Any) -> None:
    d = ray_daemon
    # boss (head) → mid (w1) → kid (w2); kid finishes at once, the others wait for the cascade.
    status, boss = await _launch(d, "boss", "sleep 60 delegate mid sleep 60 delegate kid sleep 0.3")
    assert status == 201, boss
    assert boss["node"] == {"node_id": ray_cluster.nodes["head"], "address": "127.0.0.1"}
    mid_job = await wait_for(lambda: _delegated(boss["workdir"]))
    assert mid_job["node"]["node_id"] == ray_cluster.nodes["w1"]
    kid_job = await wait_for(lambda: _delegated(mid_job["workdir"]))
    assert kid_job["node"]["node_id"] == ray_cluster.nodes["w2"]
    # Each child's directory is under its own node's root, with the records a local child gets.
    for job in (boss, mid_job, kid_job):
        wd = Path(job["workdir"])
        assert (wd / "meta" / "job_id.txt").read_text().strip() == job["job_id"]
        assert json.loads((wd / "input.json").read_text())["job_id"] == job["job_id"]
    assert len({Path(j["workdir"]).parent.parent for j in (boss, mid_job, kid_job)}) == 3
    # One trace for the whole tree, across the three nodes: each child's job span hangs under the
    # delegation span its parent's job opened (roost/observe/jobspans.py).
    assert boss["trace_id"] and mid_job["trace_id"] == boss["trace_id"] == kid_job["trace_id"]
    runs = {
        str(e["attributes"]["roost.job.job_id"]): e
        for e in d.roost.events.recent()
        if e.get("operation") == "roost.job.run" and e["type"] == "operation.started"
    }
    invokes = {
        e["spanId"]: e
        for e in d.roost.events.recent()
        if e.get("operation") == "roost.delegation.invoke" and e["type"] == "operation.started"
    }
    for parent, child in ((boss, mid_job), (mid_job, kid_job)):
        delegation = invokes[runs[child["job_id"]]["parentSpanId"]]
        assert delegation["parentSpanId"] == runs[parent["job_id"]]["spanId"]
        assert delegation["traceId"] == boss["trace_id"]
    # Each node fetched its artifact from the daemon by sha256 (GET /artifacts/{sha256}) into its cache.
    for job in (boss, mid_job, kid_job):
        root = Path(job["workdir"]).parent.parent
        assert (root / "blobs" / f"{job['sha256']}.mur.zip").is_file()
        assert (root / "registry" / job["name"] / "0.1.0" / f"{job['name']}-0.1.0.mur.zip").is_file()
    # The leaf finishes: exactly one completion (its own), and both lines in mid's trace.
    kid_final = await delegated_final(d, kid_job["job_id"])
    assert kid_final["state"] == "complete", kid_final
    assert kid_final["node"]["node_id"] == ray_cluster.nodes["w2"]
    completion = json.loads((Path(kid_job["workdir"]) / "completion.json").read_text())
    assert completion["status"] == "ok" and completion["reported_by"] == "child"
    assert kid_final["completion"]["delegation_id"] == kid_job["delegation_id"]
    mid_rec = d.roost.table.get(mid_job["session_id"])
    assert mid_rec is not None and mid_rec.workdir is not None
    lines = read_trace(trace_path(mid_rec.workdir, mid_rec.session_id))
    mine = [ln for ln in lines if ln.get("delegation_id") == kid_job["delegation_id"]]
    assert [ln["event_type"] for ln in mine] == ["delegation_start", "delegation"], mine
    assert mine[1]["outcome"] == "ok"
    # Ending the top of the tree cascades down the other nodes; nothing is left anywhere.
    status, body, _, _ = await d.call("POST", f"/jobs/{boss['job_id']}/cancel")
    assert status == 200, body
    assert (await job_final(d, boss["job_id"]))["state"] == "terminated"
    mid_final = await delegated_final(d, mid_job["job_id"])
    assert mid_final["reason"] is not None and "lifeline" in mid_final["reason"], mid_final
    assert (Path(mid_job["workdir"]) / "spawner_ended.json").exists()
    assert not (Path(mid_job["workdir"]) / "completion.json").exists()
    await no_process_left({boss["job_id"], mid_job["job_id"], kid_job["job_id"]})


async def test_cancel_and_deadline_end_remote_children_with_nothing_left(ray_daemon: RunningDaemon) -> None:
    d = ray_daemon
    status, slow = await _launch(d, "mid", "stubborn sleep 600")
    assert status == 201, slow
    status, timed = await _launch(d, "kid", "sleep 600", deadline_secs=1.5)
    assert status == 201, timed
    status, body, _, _ = await d.call("POST", f"/jobs/{slow['job_id']}/cancel")
    assert status == 200, body
    assert body["state"] == "terminated"
    final = await job_final(d, timed["job_id"])
    assert final["state"] == "terminated" and final["outcome"] == "terminated", final
    await no_process_left({slow["job_id"], timed["job_id"]})


async def test_an_infeasible_request_is_refused_at_once_naming_the_resource(ray_daemon: RunningDaemon) -> None:
    t0 = time.monotonic()
    status, body = await _launch(ray_daemon, "huge", "sleep 1")
    took = time.monotonic() - t0
    assert status == 409, body
    assert "1000 CPU" in body["error"] and "largest node has 16 CPU" in body["error"], body
    assert took < 2.5  # well inside ray_busy_wait_secs: nothing waited for a bundle


async def test_a_busy_request_waits_then_runs_and_one_that_stays_busy_is_refused(ray_daemon: RunningDaemon) -> None:
    d = ray_daemon
    # "big" takes 400 of w1's 1000 units: two fit, the third must wait for one to end.
    first = [await _launch(d, "big", "sleep 2") for _ in range(2)]
    assert all(s == 201 for s, _ in first), first
    t0 = time.monotonic()
    status, third = await _launch(d, "big", "sleep 0.2")
    assert status == 201, third
    assert time.monotonic() - t0 > 0.5  # it waited for room
    hogs = [await _launch(d, "big", "hang") for _ in range(2)]
    assert all(s == 201 for s, _ in hogs), hogs
    status, body = await _launch(d, "big", "sleep 0.1")
    assert status == 409, body
    assert "within 3s" in body["error"] and "busy" in body["error"], body
    for _, job in hogs:
        await d.call("POST", f"/jobs/{job['job_id']}/cancel")
    await no_process_left({j["job_id"] for _, j in (*first, (0, third), *hogs)})


async def test_removing_a_worker_node_crashes_its_children_naming_it(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, tmp_path: Path
) -> None:
    node = ray_cluster.add_worker("w3")
    add_doubles(registry)
    registry.add("doomed")
    settings = ray_settings(ray_cluster, tmp_path, ray_ns)
    settings["ray_placement"] = {**settings["ray_placement"], "doomed": {"resources": {"w3": 1}}}
    settings["spawn_allow"] = (*settings["spawn_allow"], "doomed")
    d: RunningDaemon = await daemon_factory(registry.root, **settings)
    doomed = []
    for _ in range(2):
        status, job = await _launch(d, "doomed", "sleep 600")
        assert status == 201, job
        assert job["node"] == {"node_id": node.node_id, "address": "127.0.0.1"}, job
        doomed.append(job)
    safe_jobs = []
    for name in ("mid", "kid"):  # one on each other worker node
        status, job = await _launch(d, name, "sleep 600")
        assert status == 201, job
        safe_jobs.append(job)
    safe_pids = {p.pid for p in job_processes({j["job_id"] for j in safe_jobs})}
    assert safe_pids
    ray_cluster.cluster.remove_node(node, allow_graceful=False)
    # The node's death, not its keeper's, with its id and address (the job's record names both).
    died = crash_detail(node_gone_sentence(NodeRef(node.node_id, "127.0.0.1")), [])
    assert keeper_gone_sentence(NodeRef(node.node_id, "127.0.0.1")) not in died
    lost_root = d.config.state_dir / "ray-lost"
    for job in doomed:
        final = await job_final(d, job["job_id"], timeout=90)
        assert final["state"] == "crashed", final
        assert final["reason"] == died, final
        assert final["node"] == {"node_id": node.node_id, "address": "127.0.0.1"}, final
        assert final["completion"]["status"] == "crashed", final
        assert final["completion"]["detail"] == died, final
        # The node's disk is gone: the one completion.json is the daemon's, under ray-lost/<job>.
        kept = json.loads((lost_root / job["job_id"] / "completion.json").read_text())
        assert kept["status"] == "crashed" and kept["detail"] == died, kept
        assert kept["reported_by"] == "launcher", kept
        assert not (Path(job["workdir"]) / "completion.json").exists()
    assert sorted(p.name for p in lost_root.iterdir()) == sorted(j["job_id"] for j in doomed)
    # Children elsewhere are untouched: still running, the same processes, their lifelines held.
    for job in safe_jobs:
        view = await job_view(d, job["job_id"])
        assert view["state"] == "running", view
        assert not (Path(job["workdir"]) / "spawner_ended.json").exists()
    assert {p.pid for p in job_processes({j["job_id"] for j in safe_jobs})} == safe_pids
    for job in safe_jobs:
        await d.call("POST", f"/jobs/{job['job_id']}/cancel")
    await no_process_left({*(j["job_id"] for j in safe_jobs), *(j["job_id"] for j in doomed)})


async def _roostctl(d: RunningDaemon, *args: str) -> str:
    return (await _roostctl_code(d, *args))[1]


async def _roostctl_code(d: RunningDaemon, *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "roost.ctl.main",
        "--state-dir",
        str(d.config.state_dir),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1"},
    )
    out, err = await proc.communicate()
    assert proc.returncode in (0, 1), err
    return proc.returncode, out.decode()


async def test_roostctl_shows_the_node_and_doctor_checks_the_cluster(
    ray_daemon: RunningDaemon, ray_cluster: Any
) -> None:
    d = ray_daemon
    status, job = await _launch(d, "mid", "sleep 30")
    assert status == 201, job
    w1 = ray_cluster.nodes["w1"]
    assert f"{w1} (127.0.0.1)" in await _roostctl(d, "job", job["job_id"])
    assert w1[:12] in await _roostctl(d, "--wide", "jobs")
    findings = {f["check"]: f for f in json.loads(await _roostctl(d, "doctor", "--json"))["findings"]}
    assert findings["ray-cluster"]["status"] == "ok", findings
    assert "3 live node(s)" in findings["ray-cluster"]["detail"]
    node = findings[f"ray-node {w1[:12]}"]
    assert node["status"] == "ok", node
    assert "keeper alive" in node["detail"] and "1 children" in node["detail"]
    # The capsule command ran on w1 as a child there would start it (the node's own interpreter).
    capsule = findings[f"ray-node {w1[:12]} roost-capsule"]
    assert capsule["status"] == "ok", capsule
    assert "@python -m roost.capsule runs there" in capsule["detail"], capsule
    assert capsule["detail"].endswith(f": roost-capsule {__version__}"), capsule
    assert findings[f"ray-node {w1[:12]} mur-runtime"]["status"] == "ok"
    # At least mid's artifact: a node's root (and its cache) lasts the whole test session.
    cache = findings[f"ray-node {w1[:12]} artifact-cache"]
    assert cache["status"] == "ok", cache
    cached = re.search(r"(\d+) cached artifact\(s\)", cache["detail"])
    assert cached is not None and int(cached.group(1)) >= 1, cache
    # This daemon started no keeper on the head or on w2: nothing was checked there, and doctor says so.
    for other in (ray_cluster.nodes["head"], ray_cluster.nodes["w2"]):
        assert findings[f"ray-node {other[:12]}"]["status"] == "note", findings
        assert "no keeper yet, so nothing was checked there" in findings[f"ray-node {other[:12]}"]["detail"]
        assert f"ray-node {other[:12]} roost-capsule" not in findings
    await d.call("POST", f"/jobs/{job['job_id']}/cancel")
    await no_process_left({job["job_id"]})


async def test_doctor_fails_a_node_where_the_capsule_command_does_not_run(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, tmp_path: Path
) -> None:
    add_doubles(registry)
    # A capsule host whose interpreter is gone (the children here are runtime doubles, so they still run).
    broken = tmp_path / "bin" / "roost-capsule"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho 'roost-capsule: bad interpreter: /opt/gone/python3' >&2\nexit 126\n")
    broken.chmod(0o755)
    settings = ray_settings(ray_cluster, tmp_path, ray_ns, capsule_command=(str(broken),))
    d: RunningDaemon = await daemon_factory(registry.root, **settings)
    status, job = await _launch(d, "mid", "sleep 60")
    assert status == 201, job
    w1 = ray_cluster.nodes["w1"]

    code, out = await _roostctl_code(d, "doctor", "--json")
    findings = {f["check"]: f for f in json.loads(out)["findings"]}
    assert code == 1
    found = findings[f"ray-node {w1[:12]} roost-capsule"]
    assert found["status"] == "fail", found
    assert found["detail"] == (
        f"127.0.0.1: the capsule command ({broken}) does not run there: "
        f"'{broken} --version' exited 126: roost-capsule: bad interpreter: /opt/gone/python3"
    ), found
    assert found["fix"] == (
        f"install mur-roost {__version__} on that node (pip install mur-roost=={__version__}) so that "
        f"'{broken} --version' runs there, or set capsule_command in roost.toml to a command every node has"
    ), found
    # The keeper itself is fine, and says so; only the command is wrong.
    assert findings[f"ray-node {w1[:12]}"]["status"] == "ok"
    await d.call("POST", f"/jobs/{job['job_id']}/cancel")
    await no_process_left({job["job_id"]})
