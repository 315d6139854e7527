"""A remote child's records stay on its node and reach the daemon only through the node's keeper.

Each test node has a root of its own that the daemon is never told about (tests/cluster/conftest.py).
Real example capsules run under the real ``roost-capsule`` host on chosen nodes (the log test: a
runtime double that prints stdout lines on cue). While they run, a Python audit hook watches this
process (the daemon runs in it; tests/support/nodewatch.py): it must open nothing under the nodes'
roots, so a trace line or a log line that reached the right file on the right node went there
through the keeper, not through a disk the daemon happened to share with the node.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from roost.observe.tracelines import trace_path
from tests.support.cluster import add_doubles, job_final, ray_settings, wait_for
from tests.support.daemon import RunningDaemon
from tests.support.nodewatch import daemon_stays_off
from tests.support.registry import EXAMPLES, RegistryBuilder
from tests.trace_checks import assert_trace_guarantees

# Above the test's worst-case waits, plus the session cluster's start for the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

PLACEMENT = {
    "orchestrator": {"resources": {"w1": 1}},
    "worker": {"resources": {"w2": 1}},
}


@pytest.fixture
async def records_daemon(ray_ns: str, daemon_factory: Any, ray_cluster: Any, tmp_path: Path) -> RunningDaemon:
    settings = ray_settings(ray_cluster, tmp_path, ray_ns, ray_placement=PLACEMENT)
    del settings["runtime_command"]
    settings.update(spawn_allow=("orchestrator", "worker"), launch_timeout_secs=60.0)
    d: RunningDaemon = await daemon_factory(EXAMPLES / "registry", **settings)
    d.roost.launcher.delivery_window_secs = 2.0
    return d


def _held(wd: Path) -> dict[str, str]:
    """The log files a child's directory holds on its node, by name (read by the test itself)."""
    files = [wd / ".murmur" / "launcher.log", *wd.glob(".murmur/ses_*/*.log"), wd / "out" / "result.txt"]
    return {p.name: p.read_text() for p in files if p.is_file()}


def _on(root: Path, workdir: str) -> bool:
    return Path(workdir).is_relative_to(root)


async def _admin(d: RunningDaemon, path: str) -> Any:
    connector = aiohttp.UnixConnector(path=str(d.config.admin_socket_path))
    async with aiohttp.ClientSession(connector=connector) as http, http.get("http://admin" + path) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def test_a_delegation_across_nodes_writes_each_trace_on_its_own_node(
    records_daemon: RunningDaemon, ray_cluster: Any, tmp_path: Path
) -> None:
    d = records_daemon
    with daemon_stays_off(ray_cluster.base) as opened:
        status, orch, _, _ = await d.call(
            "POST", "/jobs", json={"name": "orchestrator", "version": "0.1.0", "task": "red green blue"}
        )
        assert status == 201, orch
        worker = await wait_for(
            lambda: next((j for j in d.roost.launcher.jobs.values() if j.name == "worker"), None), timeout=60
        )
        final = await job_final(d, orch["job_id"], timeout=90)
        assert final["state"] == "complete", final
        await wait_for(lambda: worker.done.is_set(), timeout=30)
        view = await _admin(d, f"/jobs/{orch['job_id']}")
    assert opened == [], f"the daemon opened files on a node's root itself: {opened[:5]}"
    # Each child's directory is under its own node's root, which the daemon was never told about.
    assert _on(ray_cluster.roots["w1"], orch["workdir"]), orch["workdir"]
    assert _on(ray_cluster.roots["w2"], worker.workdir), worker.workdir
    assert not any((tmp_path / "nodes").glob("*/jobs/*")), "a keeper used the daemon's ray_node_root"
    assert worker.view()["state"] == "complete", worker.view()
    # The parent's trace (on w1): its own lines from its host and the daemon's delegation lines,
    # appended there through w1's keeper, meeting every guarantee of the trace format.
    parent = assert_trace_guarantees(trace_path(orch["workdir"], orch["session_id"]))
    mine = [
        ln
        for ln in parent
        if ln["event_type"].startswith("delegation") and ln.get("delegation_id") == worker.delegation_id
    ]
    assert [ln["event_type"] for ln in mine] == ["delegation_start", "delegation"], mine
    assert mine[0]["child_session_id"] == worker.session_id and mine[1]["outcome"] == "ok", mine
    # The child's trace (on w2), complete and well formed too.
    assert worker.session_id is not None
    child = assert_trace_guarantees(trace_path(worker.workdir, worker.session_id))
    assert child[-1]["event_type"] == "session_end", child[-1]
    # roostctl job: the result files of a remote child are listed by its node.
    assert view["node"]["node_id"] == ray_cluster.nodes["w1"]
    assert "out/result.txt" in view["out_files"], view
    assert "worker report" in (Path(orch["workdir"]) / "out" / "result.txt").read_text()


@pytest.fixture
async def doubles_daemon(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, tmp_path: Path
) -> RunningDaemon:
    add_doubles(registry)
    d: RunningDaemon = await daemon_factory(registry.root, **ray_settings(ray_cluster, tmp_path, ray_ns))
    return d


async def test_logs_follow_streams_a_remote_childs_lines_while_it_runs_and_ends_with_it(
    doubles_daemon: RunningDaemon, ray_cluster: Any
) -> None:
    """A runtime double on w2 prints a stdout line, then waits for a ``go`` file before its last
    line and its end: the first line must reach the follower while the job runs."""
    d = doubles_daemon
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": "chatter"})
    assert status == 201, job
    assert _on(ray_cluster.roots["w2"], job["workdir"]), job["workdir"]
    items: list[dict[str, Any]] = []
    state_at_first_line: str | None = None
    connector = aiohttp.UnixConnector(path=str(d.config.admin_socket_path))

    async def follow() -> None:
        nonlocal state_at_first_line
        url = f"http://admin/logs/{job['job_id']}?follow=1&tail=100"
        async with aiohttp.ClientSession(connector=connector) as http, http.get(url) as resp:
            assert resp.status == 200, await resp.text()
            async for raw in resp.content:
                if not raw.strip():
                    continue
                item = json.loads(raw)
                items.append(item)
                if state_at_first_line is None and item["line"] == "chatter: first":
                    state_at_first_line = d.roost.launcher.jobs[job["job_id"]].state
                    # Let the child go on (another process touches the file: this one stays off the node).
                    touch = await asyncio.create_subprocess_exec("touch", str(Path(job["workdir"]) / "go"))
                    assert await touch.wait() == 0

    with daemon_stays_off(ray_cluster.base) as opened:
        await asyncio.wait_for(follow(), 90)  # the stream ends by itself when the job ends
        final = await job_final(d, job["job_id"], timeout=30)
    assert opened == [], f"the daemon opened files on a node's root itself: {opened[:5]}"
    assert state_at_first_line == "running", (state_at_first_line, items)
    stdout = [it["line"] for it in items if it["stream"] == "stdout"]
    assert stdout == ["chatter: first", "chatter: last"], items
    assert final["state"] == "complete", final
    # What was streamed is what the node holds, in the files the stream named.
    held = _held(Path(job["workdir"]))
    assert all(it["line"] in held.get(it["file"], "") for it in items), (items, held)
