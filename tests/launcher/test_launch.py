# ruff: noqa: ASYNC240
"""Launch, refusal, stop, crash, delivery and lifeline tests against a real in-process daemon
with real children (runtime_double.py through Config.runtime_command)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import stat
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from roost.observe.tracelines import read_trace, trace_path
from roost.services.completionfile import TERMINATED_DETAIL, SpawnerHandle
from tests.support.daemon import RunningDaemon
from tests.support.launcher import DOUBLE, RUNTIME, add_doubles, job_final, wait_for
from tests.support.registry import RegistryBuilder

CRED = "x-murmur-spawn-credential"


def trace_of(workdir: Path, sid: str, event_type: str | None = None) -> list[dict[str, Any]]:
    lines = read_trace(trace_path(workdir, sid)) if trace_path(workdir, sid).exists() else []
    return [ln for ln in lines if event_type is None or ln["event_type"] == event_type]


async def start(daemon_factory: Any, registry: RegistryBuilder, **cfg: Any) -> RunningDaemon:
    add_doubles(registry)
    values: dict[str, Any] = {
        "spawn_allow": ("solo", "boss"),
        "runtime_command": RUNTIME,
        "stop_grace_secs": 1.0,
        "lifeline_grace_secs": 2.0,
        "launch_timeout_secs": 15.0,
    }
    values.update(cfg)
    d: RunningDaemon = await daemon_factory(registry.root, **values)
    d.roost.launcher.delivery_window_secs = 0.5
    return d


async def boss(d: RunningDaemon, tmp_path: Path, door_url: str | None = None) -> tuple[str, str, Path]:
    wd = tmp_path / "boss-wd"
    wd.mkdir(exist_ok=True)
    extra: dict[str, Any] = {"workdir": str(wd)}
    if door_url:
        extra["capsule_url"] = door_url
    sid, cred = await d.register_top("boss", **extra)
    return sid, cred, wd


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


# -- launch ------------------------------------------------------------------------------------


async def test_top_level_launch_writes_every_file_and_variable(
    daemon_factory: Any, registry: RegistryBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROOST_T_SHARED", "not-for-solo")
    d = await start(daemon_factory, registry)
    task = {"objective": "sleep 30", "instructions": "be brief", "context": None, "output_format": "text"}
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "solo", "version": "0.1.0", "task": task})
    assert status == 201, body
    assert set(body) >= {
        "job_id",
        "delegation_id",
        "session_id",
        "capsule_url",
        "name",
        "version",
        "sha256",
        "workdir",
        "state",
    }
    assert re.fullmatch(r"job_[0-9a-f]{32}", body["job_id"])
    assert body["delegation_id"].startswith("dlg_") and body["state"] == "running"
    assert body["sha256"] == registry.built["solo@0.1.0"]
    wd = Path(body["workdir"])
    assert wd == d.config.state_dir / "jobs" / body["job_id"]
    assert stat.S_IMODE(wd.stat().st_mode) == 0o700
    assert (wd / "meta" / "job_id.txt").read_text() == body["job_id"] + "\n"
    assert read_json(wd / "input.json") == {
        "schema": "murmur.message.v1",
        "type": "murmur.code_task.request.v1",
        "job_id": body["job_id"],
        "payload": task,
    }
    seen = await wait_for(lambda: (wd / "double.json").exists() and read_json(wd / "double.json"))
    env = seen["env"]
    expected = {
        "PATH",
        "HOME",
        "MURMUR_ROOST_URL",
        "MURMUR_JOB_ID",
        "MURMUR_REGISTRY_PATH",
        "MURMUR_SPAWNER_LIFELINE",
        "MURMUR_ROOST_INSTANCE",
        # The job's span, so the child's own spans continue its delegation tree's trace.
        "TRACEPARENT",
        "OTEL_SERVICE_NAME",
    } | ({"LANG"} if "LANG" in os.environ else set())
    assert set(env) == expected
    assert env["TRACEPARENT"].split("-")[1] == body["trace_id"] and env["OTEL_SERVICE_NAME"] == "solo"
    assert env["MURMUR_ROOST_URL"] == d.url
    assert env["MURMUR_JOB_ID"] == body["job_id"]
    assert env["MURMUR_REGISTRY_PATH"] == str(registry.root)
    assert int(env["MURMUR_SPAWNER_LIFELINE"]) >= 3
    assert seen["argv"][1:] == ["solo@0.1.0", "--workdir", str(wd), "--json", "--no-env-file", "--spawn-grant-stdin"]
    assert seen["approval_on_stdin"] is False and seen["cwd"] == str(wd)
    pid = seen["pid"]
    assert os.getpgid(pid) == pid  # its own process group
    # Resource limits do not apply to solo; the log exists in the records area.
    assert (wd / ".murmur" / "launcher.log").exists()
    status, view, _, _ = await d.call("GET", f"/jobs/{body['job_id']}")
    assert status == 200 and view["state"] == "running"
    status, view, _, _ = await d.call("POST", f"/jobs/{body['job_id']}/cancel")
    assert status == 200 and view["state"] == "terminated"
    assert view["completion"]["status"] == "terminated" and view["completion"]["reported_by"] == "launcher"
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_top_level_workdir_and_refusals(daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path) -> None:
    d = await start(daemon_factory, registry)
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "kid", "version": "0.1.0"})
    assert status == 403 and body == {"error": "capsule 'kid' is not in --spawn-allow"}
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "solo", "version": "0.1.0", "workdir": "rel"})
    assert status == 400
    # An allowed capsule at coordinates nobody published is the caller's mistake: 404 and a
    # sentence, not upstream's registry 500 (which /spawn and /register keep).
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "solo", "version": "9.9.9", "task": "x"})
    assert status == 404 and body == {
        "error": "capsule solo@9.9.9 is not in the registry: nothing is published at those coordinates"
    }, body
    target = tmp_path / "given" / "wd"
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "solo", "version": "0.1.0", "workdir": str(target), "task": "sleep 0.1"}
    )
    # A top-level job names an existing directory of the caller's (docs/security.md).
    assert status == 403 and body["error"].startswith(f"the workdir {target} does not exist"), body
    target.mkdir(parents=True)
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "solo", "version": "0.1.0", "workdir": str(target), "task": "sleep 0.1"}
    )
    assert status == 201, body
    assert body["workdir"] == str(target)
    final = await job_final(d, body["job_id"])
    assert final["state"] == "complete" and final["completion"]["status"] == "ok"


async def test_delegated_launch_env_spawner_lines_and_approval_hidden(
    daemon_factory: Any,
    registry: RegistryBuilder,
    tmp_path: Path,
    parent_door: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ROOST_T_SHARED", "shared-value")
    monkeypatch.setenv("ROOST_T_BOSSONLY", "boss-only")
    monkeypatch.setenv("ROOST_T_KIDONLY", "kid-only")
    d = await start(daemon_factory, registry)
    door = await parent_door("pending")
    sid, cred, wd = await boss(d, tmp_path, door.url)
    door.session_id = sid
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": "sleep 1.5"}, headers={CRED: cred}
    )
    assert status == 201, body
    child = Path(body["workdir"])
    assert child.parent == wd / ".murmur" / "children"
    assert re.fullmatch(r"kid-[0-9a-f]{16}", child.name)
    assert stat.S_IMODE(child.stat().st_mode) == 0o700
    seen = await wait_for(lambda: (child / "double.json").exists() and read_json(child / "double.json"))
    env = seen["env"]
    assert env["ROOST_T_SHARED"] == "shared-value"  # in both allow lists
    assert "ROOST_T_KIDONLY" not in env and "ROOST_T_BOSSONLY" not in env
    handle = SpawnerHandle.parse(env["MURMUR_SPAWNER"])
    assert handle.url == door.url and handle.session_id == sid and handle.trust == "trusted"
    assert handle.delegation_id == body["delegation_id"] and handle.context_id
    assert seen["approval_on_stdin"] is True and seen["approval_prefix"] == "msa1."
    pid = seen["pid"]
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    environ = Path(f"/proc/{pid}/environ").read_bytes()
    assert b"msa1." not in cmdline and b"msa1." not in environ and b"msc1." not in environ
    # resources: kid declares max_open_files 256
    assert psutil.Process(pid).rlimit(psutil.RLIMIT_NOFILE) == (256, 256)
    starts = trace_of(wd, sid, "delegation_start")
    assert len(starts) == 1
    assert {k: starts[0][k] for k in ("delegation_id", "capsule", "version", "child_session_id", "child_workdir")} == {
        "delegation_id": body["delegation_id"],
        "capsule": "kid",
        "version": "0.1.0",
        "child_session_id": body["session_id"],
        "child_workdir": str(child.relative_to(wd)),
    }
    final = await job_final(d, body["job_id"], {CRED: cred})
    assert final["state"] == "complete" and final["completion"]["reported_by"] == "child"
    ends = trace_of(wd, sid, "delegation")
    assert len(ends) == 1 and ends[0]["outcome"] == "ok" and ends[0]["reason"] is None
    assert ends[0]["child_session_id"] == body["session_id"] and ends[0]["delegation_id"] == body["delegation_id"]
    # Another session's credential cannot see the job; without a credential its owner uid (root
    # here, not inside a job) can (docs/security.md; another uid: tests/trust/test_http_attacks.py).
    _, other = await d.register_top("boss", workdir=str(wd))
    status, _, _, _ = await d.call("GET", f"/jobs/{body['job_id']}", headers={CRED: other})
    assert status == 404
    status, _, _, _ = await d.call("GET", f"/jobs/{body['job_id']}")
    assert status == 200


async def test_untrusted_request_lowers_trust(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, parent_door: Any
) -> None:
    d = await start(daemon_factory, registry)
    door = await parent_door("x")
    _, cred, _ = await boss(d, tmp_path, door.url)
    status, body, _, _ = await d.call(
        "POST",
        "/jobs",
        json={"name": "kid", "version": "0.1.0", "task": "sleep 0.2", "untrusted": True},
        headers={CRED: cred},
    )
    assert status == 201, body
    seen = await wait_for(
        lambda: (Path(body["workdir"]) / "double.json").exists() and read_json(Path(body["workdir"]) / "double.json")
    )
    assert json.loads(seen["env"]["MURMUR_SPAWNER"])["trust"] == "untrusted"
    await job_final(d, body["job_id"], {CRED: cred})


async def test_envelope_refusal_launches_nothing(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    d = await start(daemon_factory, registry)
    sid, cred, wd = await boss(d, tmp_path)
    s1, spawn_body = await d.spawn(cred, "greedy")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    s2, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "greedy", "version": "0.1.0", "task": "x"}, headers={CRED: cred}
    )
    assert s1 == s2 == 403 and body == spawn_body
    s3, body3, _, _ = await d.call("POST", "/jobs", json={"name": "solo", "version": "0.1.0"}, headers={CRED: cred})
    assert s3 == 403 and body3 == {"error": "capsule 'solo' is not in parent's spawn_allow"}
    assert not (wd / ".murmur" / "children").exists()
    after = {p.pid for p in psutil.Process().children(recursive=True)}
    assert after <= before
    refused = trace_of(wd, sid, "delegation")
    assert [r["outcome"] for r in refused] == ["refused", "refused"]
    assert refused[0]["delegation_id"] is None and refused[0]["child_session_id"] is None
    assert refused[0]["reason"] == spawn_body["error"]
    assert trace_of(wd, sid, "delegation_start") == []
    # A bad credential: the fixed identity refusal, nothing written anywhere.
    s4, body4, _, _ = await d.call(
        "POST", "/jobs", json={"name": "kid", "version": "0.1.0"}, headers={CRED: "msc1.bad.bad"}
    )
    assert s4 == 403 and body4["error"].startswith("not authorised")


# -- stop ----------------------------------------------------------------------------------------


async def test_cancel_sigterm_then_sigkill_for_a_stubborn_child(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, parent_door: Any
) -> None:
    d = await start(daemon_factory, registry, stop_grace_secs=1.0)
    door = await parent_door("x")
    sid, cred, wd = await boss(d, tmp_path, door.url)
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": "stubborn sleep 60"}, headers={CRED: cred}
    )
    assert status == 201
    t0 = time.monotonic()
    status, view, _, _ = await d.call("POST", f"/jobs/{body['job_id']}/cancel", headers={CRED: cred})
    took = time.monotonic() - t0
    assert status == 200 and view["state"] == "terminated"
    assert 1.0 <= took < 3.0, took  # SIGTERM ignored, SIGKILL after the 1 s grace
    assert view["exit_status"] == "killed by SIGKILL"
    comp = read_json(Path(body["workdir"]) / "completion.json")
    assert comp["status"] == "terminated" and comp["reported_by"] == "launcher"
    assert comp["detail"] == TERMINATED_DETAIL and comp["delivered"] is False
    assert door.posts == 0  # a terminated outcome is posted to nobody
    ends = trace_of(wd, sid, "delegation")
    assert len(ends) == 1 and ends[0]["outcome"] == "terminated"
    # A polite child goes at SIGTERM, well inside the grace.
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": "sleep 60"}, headers={CRED: cred}
    )
    t0 = time.monotonic()
    status, view, _, _ = await d.call("POST", f"/jobs/{body['job_id']}/cancel", headers={CRED: cred})
    assert time.monotonic() - t0 < 0.9 and view["exit_status"] == "killed by SIGTERM"


async def test_deadline_times_out_and_posts(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, parent_door: Any
) -> None:
    d = await start(daemon_factory, registry)
    door = await parent_door("x")
    sid, cred, wd = await boss(d, tmp_path, door.url)
    status, body, _, _ = await d.call(
        "POST",
        "/jobs",
        json={"name": "kid", "version": "0.1.0", "task": "sleep 60", "deadline_secs": 0.5},
        headers={CRED: cred},
    )
    assert status == 201
    final = await job_final(d, body["job_id"], {CRED: cred})
    assert final["state"] == "terminated" and final["outcome"] == "terminated"  # seed 000: not timed_out
    comp = final["completion"]
    assert comp["detail"] == "the capsule was still running after 0s and was ended at the delegation deadline"
    assert comp["delivered"] is True and door.posts == 1
    assert door.received[0]["headers"]["x-murmur-delegation-id"] == body["delegation_id"]
    assert door.received[0]["headers"]["x-murmur-task-origin"] == "completion"
    ends = trace_of(wd, sid, "delegation")
    assert len(ends) == 1 and ends[0]["outcome"] == "terminated" and ends[0]["reason"] == comp["detail"]


# -- crash, delivery ---------------------------------------------------------------------------


async def test_crash_record_with_stderr_detail_delivered_once(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, parent_door: Any
) -> None:
    d = await start(daemon_factory, registry)
    door = await parent_door("x")
    sid, cred, wd = await boss(d, tmp_path, door.url)
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": "crash"}, headers={CRED: cred}
    )
    assert status == 201
    final = await job_final(d, body["job_id"], {CRED: cred})
    assert final["state"] == "crashed"
    comp = read_json(Path(body["workdir"]) / "completion.json")
    assert comp["status"] == "crashed" and comp["reported_by"] == "launcher" and comp["delivered"] is True
    assert comp["detail"].startswith("the child process ended without recording a completion (exit status 7)")
    assert "double: crash line 2" in comp["detail"]
    assert door.posts == 1
    ends = trace_of(wd, sid, "delegation")
    assert len(ends) == 1 and ends[0]["outcome"] == "crashed" and ends[0]["reason"] == comp["detail"]


async def test_completion_delivery_asks_for_an_immediate_answer(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, parent_door: Any
) -> None:
    """A blocking parent door must never hold a delivery open (or time it out into a second one):
    the launcher's completion says so on the wire. A spawner handle names a murmur door, which is
    spoken to in 0.3 (roost/services/completionfile.py), so the ask is ``blocking: false``."""
    d = await start(daemon_factory, registry)
    door = await parent_door("x")
    _, cred, _ = await boss(d, tmp_path, door.url)
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": "crash"}, headers={CRED: cred}
    )
    assert status == 201, body
    final = await job_final(d, body["job_id"], {CRED: cred})
    assert final["completion"]["delivered"] is True and door.posts == 1
    sent = door.received[0]
    assert sent["headers"]["A2A-Version"] == "0.3" and sent["body"]["method"] == "message/send"
    assert sent["body"]["params"]["configuration"] == {"blocking": False}


@pytest.mark.parametrize("mode", ["refuses", "down"])
async def test_delivery_retried_once_then_recorded_undelivered(
    mode: str, daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, parent_door: Any
) -> None:
    d = await start(daemon_factory, registry)
    door = await parent_door("x", refuse=True)
    url = door.url
    if mode == "down":
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        s.close()
    _, cred, _ = await boss(d, tmp_path, url)
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": "crash"}, headers={CRED: cred}
    )
    assert status == 201
    final = await job_final(d, body["job_id"], {CRED: cred})
    comp = read_json(Path(body["workdir"]) / "completion.json")
    assert comp["delivered"] is False and comp["delivery_error"]
    assert final["completion"]["delivered"] is False
    if mode == "refuses":
        assert door.posts == 2 and comp["delivery_error"] == "no thanks"
    deliver = [e for e in d.roost.events.recent() if e["operation"] == "roost.completion.deliver"]
    assert [e["type"] for e in deliver] == ["operation.started", "operation.failed"]
    assert deliver[-1]["attributes"]["roost.completion.tries"] == 2


async def test_never_ready_is_killed_and_recorded_failed(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    d = await start(daemon_factory, registry, launch_timeout_secs=1.0)
    sid, cred, wd = await boss(d, tmp_path)
    t0 = time.monotonic()
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": "never-ready"}, headers={CRED: cred}
    )
    assert status == 504 and "did not report ready within 1s" in body["error"]
    assert time.monotonic() - t0 < 3
    child = next((wd / ".murmur" / "children").iterdir())
    pid = read_json(child / "double.json")["pid"]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    ends = trace_of(wd, sid, "delegation")
    assert len(ends) == 1 and ends[0]["outcome"] == "failed" and ends[0]["delegation_id"] is None
    rows = d.roost.store.rows("SELECT state FROM jobs")
    assert [r["state"] for r in rows] == ["failed"]
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": "bad-ready"}, headers={CRED: cred}
    )
    assert status == 502 and "ready line" in body["error"]


# -- lifelines -------------------------------------------------------------------------------


async def test_parent_killed_child_and_grandchild_go(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    d = await start(daemon_factory, registry, lifeline_grace_secs=2.0)
    status, top, _, _ = await d.call(
        "POST", "/jobs", json={"name": "boss", "version": "0.1.0", "task": "delegate mid delegate kid hang"}
    )
    assert status == 201, top
    top_wd = Path(top["workdir"])
    mid = await wait_for(lambda: (top_wd / "delegated.json").exists() and read_json(top_wd / "delegated.json"))
    mid_wd = Path(mid["workdir"])
    kid = await wait_for(lambda: (mid_wd / "delegated.json").exists() and read_json(mid_wd / "delegated.json"))
    kid_wd = Path(kid["workdir"])
    pids = [read_json(p / "double.json")["pid"] for p in (top_wd, mid_wd, kid_wd)]
    t0 = time.monotonic()
    os.kill(pids[0], signal.SIGKILL)

    def gone() -> bool:
        return all(not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE for p in pids)

    await wait_for(gone, timeout=2 * 2.0 + 2)
    assert time.monotonic() - t0 < 2 * 2.0
    for wd in (mid_wd, kid_wd):
        ended = await wait_for(
            lambda wd=wd: (wd / "spawner_ended.json").exists() and read_json(wd / "spawner_ended.json")
        )
        assert ended["event_type"] == "spawner_ended"
    await wait_for(lambda: all(d.roost.launcher.jobs[j["job_id"]].final for j in (top, mid, kid)))
    assert not (mid_wd / "completion.json").exists() and not (kid_wd / "completion.json").exists()
    assert d.roost.launcher.jobs[mid["job_id"]].state == "terminated"


async def test_deregister_closes_children_lifelines(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    d = await start(daemon_factory, registry)
    _, cred, _ = await boss(d, tmp_path)
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": "hang"}, headers={CRED: cred}
    )
    assert status == 201
    status, _, _, _ = await d.call("POST", "/deregister", json={"outcome": "complete"}, headers={CRED: cred})
    assert status == 200
    child = Path(body["workdir"])
    await wait_for(lambda: (child / "spawner_ended.json").exists(), timeout=5)
    job = d.roost.launcher.jobs[body["job_id"]]
    await asyncio.wait_for(job.done.wait(), 5)
    assert job.exit_status == "exit status 143" and not (child / "completion.json").exists()


async def test_events_and_metrics(daemon_factory: Any, registry: RegistryBuilder) -> None:
    d = await start(daemon_factory, registry)
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "solo", "version": "0.1.0", "task": "sleep 0"})
    assert status == 201
    await job_final(d, body["job_id"])
    # The state is final before the record is committed; the exit event closes after that.
    await asyncio.wait_for(d.roost.launcher.jobs[body["job_id"]].done.wait(), 20)
    ops = [(e["operation"], e["type"]) for e in d.roost.events.recent()]
    assert ("roost.process.start", "operation.completed") in ops
    assert ("roost.process.exit", "operation.completed") in ops
    rec = [e for e in d.roost.events.recent() if e["operation"] == "roost.process.reconcile"]
    assert rec[-1]["attributes"]["roost.process.matched"] == 0
    start_ev = next(e for e in d.roost.events.recent() if e["operation"] == "roost.process.start")
    assert start_ev["schemaVersion"] == 1 and start_ev["subsystem"] == "process"
    text = d.roost.metrics.render().decode()
    assert 'roost_jobs{state="complete"} 1.0' in text
    assert "roost_spawn_duration_seconds_count 1.0" in text
    assert 'roost_capsule_exits_total{reason="complete"} 1.0' in text
    assert DOUBLE.exists()
