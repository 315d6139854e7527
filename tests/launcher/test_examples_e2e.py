"""End to end with the real example capsules under the real ``roost-capsule`` host."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from trace_checks import assert_trace_guarantees

from roost.observe.tracelines import read_trace, trace_path
from tests.support.daemon import RunningDaemon
from tests.support.launcher import job_final, wait_for
from tests.support.registry import EXAMPLES

CRED = "x-murmur-spawn-credential"
pytestmark = pytest.mark.skipif(
    not (Path(__file__).resolve().parents[2] / "roost" / "capsule" / "cli.py").exists(), reason="no roost-capsule"
)


async def start(daemon_factory: Any) -> RunningDaemon:
    d: RunningDaemon = await daemon_factory(
        EXAMPLES / "registry",
        spawn_allow=("orchestrator", "worker", "sleeper", "crasher"),
        stop_grace_secs=1.0,
        lifeline_grace_secs=3.0,
        launch_timeout_secs=30.0,
    )
    d.roost.launcher.delivery_window_secs = 2.0
    return d


async def test_worker_top_level(daemon_factory: Any) -> None:
    d = await start(daemon_factory)
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "worker", "version": "0.1.0", "task": "alpha beta gamma"}
    )
    assert status == 201, body
    assert body["capsule_url"].startswith("http://127.0.0.1:")
    final = await job_final(d, body["job_id"], timeout=30)
    assert final["state"] == "complete", final
    result = (Path(body["workdir"]) / "out" / "result.txt").read_text()
    assert "reversed: gamma beta alpha" in result


async def test_worker_delegated_completion_reaches_the_door(
    daemon_factory: Any, tmp_path: Path, parent_door: Any
) -> None:
    d = await start(daemon_factory)
    door = await parent_door("x")
    wd = tmp_path / "orch"
    wd.mkdir()
    sid, cred = await d.register_top("orchestrator", workdir=str(wd), capsule_url=door.url)
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "worker", "version": "0.1.0", "task": "one two"}, headers={CRED: cred}
    )
    assert status == 201, body
    final = await job_final(d, body["job_id"], {CRED: cred}, timeout=30)
    assert final["state"] == "complete", final
    comp = json.loads((Path(body["workdir"]) / "completion.json").read_text())
    assert comp["reported_by"] == "child" and comp["delivered"] is True and comp["status"] == "ok"
    assert door.posts == 1
    lines = read_trace(trace_path(wd, sid))
    assert [ln["event_type"] for ln in lines if ln["event_type"].startswith("delegation")] == [
        "delegation_start",
        "delegation",
    ]
    assert lines[-1]["outcome"] == "ok"


async def test_sleeper_stubborn_cancel(daemon_factory: Any) -> None:
    d = await start(daemon_factory)
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "sleeper", "version": "0.1.0", "task": "stubborn 60"}
    )
    assert status == 201, body
    await wait_for(
        lambda: b"sleeping" in (Path(body["workdir"]) / ".murmur" / "launcher.log").read_bytes() or True, timeout=5
    )
    t0 = time.monotonic()
    status, view, _, _ = await d.call("POST", f"/jobs/{body['job_id']}/cancel")
    assert status == 200 and view["state"] == "terminated"
    assert time.monotonic() - t0 < 4
    assert view["completion"]["detail"] == "the parent ended this delegation"


async def test_crasher_delegated(daemon_factory: Any, tmp_path: Path, parent_door: Any) -> None:
    d = await start(daemon_factory)
    door = await parent_door("x")
    wd = tmp_path / "orch"
    wd.mkdir()
    # orchestrator may only spawn worker; crasher runs top-level instead.
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "crasher", "version": "0.1.0", "task": "boom"})
    assert status == 201, body
    final = await job_final(d, body["job_id"], timeout=30)
    # Its script failed, but its host ended the session and said so: a failure, not a crash.
    assert final["state"] == "failed" and final["outcome"] == "error", final
    assert final["completion"]["status"] == "error", final
    assert door.posts == 0


async def test_orchestrator_delegates_to_worker(daemon_factory: Any) -> None:
    d = await start(daemon_factory)
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "orchestrator", "version": "0.1.0", "task": "red green blue"}
    )
    assert status == 201, body
    wd = Path(body["workdir"])
    out = wd / "out" / "result.txt"
    await wait_for(lambda: out.exists() and "worker report" in out.read_text(), timeout=60)
    children = list((wd / ".murmur" / "children").glob("worker-*"))
    assert children
    comp = await wait_for(
        lambda: next(
            (json.loads((c / "completion.json").read_text()) for c in children if (c / "completion.json").exists()),
            None,
        ),
        timeout=30,
    )
    assert comp["status"] == "ok" and comp["delivered"] is True
    # orchestrator ends after its task (after_task: exit), so its own job completes.
    view = await job_final(d, body["job_id"], timeout=60)
    assert view["state"] == "complete", view
    lines = read_trace(trace_path(wd, body["session_id"]))
    kinds = [ln["event_type"] for ln in lines]
    assert "delegation_start" in kinds and "delegation" in kinds
    (end,) = [ln for ln in lines if ln["event_type"] == "delegation"]
    assert end["outcome"] == "ok" and end["capsule"] == "worker"
    assert_trace_guarantees(trace_path(wd, body["session_id"]))


async def test_worker_delegated_by_a_parent_without_a_door_writes_its_own_completion(
    daemon_factory: Any, tmp_path: Path
) -> None:
    """Nobody to deliver to, but the child ended its own session: its completion, result_path and all."""
    d = await start(daemon_factory)
    wd = tmp_path / "orch"
    wd.mkdir()
    _, cred = await d.register_top("orchestrator", workdir=str(wd))  # no capsule_url: no door
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "worker", "version": "0.1.0", "task": "one two"}, headers={CRED: cred}
    )
    assert status == 201, body
    final = await job_final(d, body["job_id"], {CRED: cred}, timeout=30)
    assert final["state"] == "complete", final
    comp = json.loads((Path(body["workdir"]) / "completion.json").read_text())
    assert comp["reported_by"] == "child" and comp["status"] == "ok", comp
    assert comp["result_path"] == "out/result.txt" and comp["delivered"] is False
    assert (Path(body["workdir"]) / "out" / "result.txt").is_file()
