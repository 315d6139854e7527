"""Through the daemon: a floor above what the host offers is refused (E-CAP-003) with records
saying so; the example capsules run unchanged under ``scoped``; delegation works under ``sealed``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from roost.capsule.probe import probe_host
from roost.observe.tracelines import read_trace, trace_path
from roost.state.registry.packing import pack_capsule
from tests.support.capsules import wait_for
from tests.support.launcher import parent_door
from tests.support.registry import EXAMPLES

__all__ = ["parent_door"]

OFFERED = probe_host().offered
ORDER = {"advisory": 0, "scoped": 1, "sealed": 2}


def _pack_as(tmp_path: Path, registry: Path, name: str, cls: str) -> None:
    src = tmp_path / "src" / f"{name}-{cls}"
    shutil.copytree(EXAMPLES / "capsules" / name, src)
    manifest = yaml.safe_load((src / "murmur.yaml").read_text())
    manifest.setdefault("capabilities", {})["containment"] = cls
    (src / "murmur.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    pack_capsule(src, registry)


async def test_sealed_floor_on_a_host_forced_to_scoped_is_refused(daemon_factory: Any, tmp_path: Path) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    _pack_as(tmp_path, registry, "worker", "sealed")
    d = await daemon_factory(registry, spawn_allow=("worker",), containment_max="scoped", launch_timeout_secs=30.0)
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "worker", "version": "0.1.0", "task": "a b"})
    assert status == 502, body
    assert "E-CAP-003" in body["error"] and "'sealed'" in body["error"] and "containment_max" in body["error"]
    jobs = [j for j in d.roost.launcher.jobs.values() if j.name == "worker"]
    assert len(jobs) == 1
    job = jobs[0]
    assert job.state == "failed" and "E-CAP-003" in (job.reason or "")
    workdir = Path(job.workdir)
    comp = json.loads((workdir / "completion.json").read_text())
    assert comp["status"] == "error" and "E-CAP-003" in comp["detail"]
    assert "'scoped'" in comp["detail"]
    # Nothing ran: no result, an empty trace, no session registered.
    assert not (workdir / "out" / "result.txt").exists()
    traces = list((workdir / ".murmur").glob("ses_*/trace.jsonl"))
    assert traces and all(t.read_text() == "" for t in traces)
    assert not [r for r in d.roost.table.sessions.values() if r.name == "worker"]
    seen = d.roost.events.recent()
    refused = [e for e in seen if (e.get("error") or {}).get("name") == "ContainmentRefused"]
    assert refused, seen
    assert "E-CAP-003" in refused[0]["error"]["message"]


@pytest.mark.skipif(ORDER[OFFERED] < 1, reason="this host cannot enforce scoped")
async def test_examples_run_unchanged_under_scoped(daemon_factory: Any, tmp_path: Path) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    for name in ("orchestrator", "worker", "echo"):
        _pack_as(tmp_path, registry, name, "scoped")
    d = await daemon_factory(registry, spawn_allow=("orchestrator", "worker", "echo"), launch_timeout_secs=30.0)
    d.roost.launcher.delivery_window_secs = 2.0
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "orchestrator", "version": "0.1.0", "task": "red green blue"}
    )
    assert status == 201, body
    wd = Path(body["workdir"])
    out = wd / "out" / "result.txt"
    await wait_for(lambda: out.exists() and "worker report" in out.read_text(), within=60)
    assert "reversed: blue green red" in out.read_text()
    start = read_trace(trace_path(wd, body["session_id"]))[0]
    assert start["containment_achieved"] == OFFERED  # the host's class (seed 000); it ran scoped:
    rec = d.roost.table.get(body["session_id"])
    assert rec is not None and rec.containment == "scoped"
    # echo stays up, answers its task and writes the file it exports on the peer plane.
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "echo", "version": "0.1.0", "task": "hello"})
    assert status == 201, body
    ewd = Path(body["workdir"])
    await wait_for(lambda: (ewd / "out" / "result.txt").exists(), within=60)
    assert "echo: hello" in (ewd / "out" / "result.txt").read_text()
    assert (ewd / "share" / "last-task.txt").exists()
    status, view, _, _ = await d.call("POST", f"/jobs/{body['job_id']}/cancel")
    assert status == 200, view


@pytest.mark.skipif(ORDER[OFFERED] < 2, reason="this host cannot enforce sealed")
async def test_orchestrator_delegates_to_worker_under_sealed(daemon_factory: Any, tmp_path: Path) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    for name in ("orchestrator", "worker"):
        _pack_as(tmp_path, registry, name, "sealed")
    d = await daemon_factory(registry, spawn_allow=("orchestrator", "worker"), launch_timeout_secs=30.0)
    d.roost.launcher.delivery_window_secs = 2.0
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "orchestrator", "version": "0.1.0", "task": "one two three"}
    )
    assert status == 201, body
    wd = Path(body["workdir"])
    out = wd / "out" / "result.txt"
    await wait_for(lambda: out.exists() and "worker report" in out.read_text(), within=60)
    assert "reversed: three two one" in out.read_text()
    children = list((wd / ".murmur" / "children").glob("worker-*"))
    assert children
    start = read_trace(trace_path(wd, body["session_id"]))[0]
    assert start["containment_achieved"] == OFFERED


async def test_a_refused_delegated_child_tells_its_spawner(
    daemon_factory: Any, tmp_path: Path, parent_door: Any
) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    _pack_as(tmp_path, registry, "orchestrator", "advisory")
    _pack_as(tmp_path, registry, "worker", "sealed")
    d = await daemon_factory(
        registry, spawn_allow=("orchestrator",), containment_max="scoped", launch_timeout_secs=30.0
    )
    door = await parent_door("x")
    wd = tmp_path / "orch"
    wd.mkdir()
    sid, cred = await d.register_top("orchestrator", workdir=str(wd), capsule_url=door.url)
    status, body, _, _ = await d.call(
        "POST",
        "/jobs",
        json={"name": "worker", "version": "0.1.0", "task": "a b"},
        headers={"x-murmur-spawn-credential": cred},
    )
    assert status == 502 and "E-CAP-003" in body["error"], body
    await wait_for(lambda: door.posts >= 1, within=20)
    text = json.dumps(door.received[0]["body"])
    assert "E-CAP-003" in text and "error" in text
    lines = read_trace(trace_path(wd, sid))
    ended = [ln for ln in lines if ln["event_type"] == "delegation"]
    assert ended and ended[-1]["outcome"] == "failed" and "E-CAP-003" in json.dumps(ended[-1])
