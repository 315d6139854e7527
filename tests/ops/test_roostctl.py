"""``roostctl`` against a real ``mur-roost`` subprocess: every verb, both output modes, exit codes.

Exit codes scripts rely on: 0 ok, 1 refused or failed, 2 usage, 3 daemon unreachable. Under
``--json`` stdout is exactly one JSON document, on failure too (the error envelope).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ops.support import EXAMPLES, REPO, Ctl, Daemon, fresh_daemon, module_daemon, roostctl

DAEMON_VERBS = [
    ["status"],
    ["sessions"],
    ["jobs"],
    ["job", "job_" + "0" * 32],
    ["cancel", "job_" + "0" * 32],
    ["tree"],
    ["events"],
    ["logs", "job_" + "0" * 32],
    ["drain"],
    ["keys", "rotate", "--yes"],
    ["config"],
    ["reconcile"],
    ["reload"],
    ["spawn", "sleeper", "0.1.0", "--task", "0"],
]


daemon = pytest.fixture(scope="module", name="daemon")(module_daemon)
fresh = pytest.fixture(name="fresh")(fresh_daemon)


def _one_json(res: Ctl) -> object:
    doc = json.loads(res.out)  # exactly one document: json.loads fails on trailing data
    return doc


# -- no daemon: exit 3, one error envelope -------------------------------------------------


@pytest.mark.parametrize("args", DAEMON_VERBS, ids=lambda a: a[0] + ("-" + a[1] if a[0] == "keys" else ""))
def test_unreachable_exits_3_in_both_modes(args: list[str], tmp_path: Path) -> None:
    res = roostctl(*args, state_dir=tmp_path / "nothing")
    assert res.code == 3, res
    assert res.out == "" and "not reachable" in res.err
    res = roostctl(*args, "--json", state_dir=tmp_path / "nothing")
    assert res.code == 3
    doc = _one_json(res)
    assert isinstance(doc, dict) and doc["error"]["code"] == "unreachable" and doc["error"]["exit"] == 3


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    for args in (["bogus"], ["jobs", "--state", "nope"], ["job"], ["spawn", "x", "1"], []):
        res = roostctl(*args, state_dir=tmp_path)
        assert res.code == 2, (args, res)
    res = roostctl("--json", "bogus")
    assert res.code == 2 and _one_json(res) == {
        "error": {"code": "usage", "message": res.json["error"]["message"], "exit": 2}
    }


def test_socket_discovery_order(tmp_path: Path, daemon: Daemon) -> None:
    sock = daemon.state / "admin.sock"
    assert roostctl("--socket", str(sock), "status").code == 0
    assert roostctl("status", env={"ROOST_SOCKET": str(sock)}).code == 0
    assert roostctl("status", env={"ROOST_STATE_DIR": str(daemon.state)}).code == 0
    # --socket wins over the environment
    assert roostctl("--socket", str(tmp_path / "x.sock"), "status", env={"ROOST_SOCKET": str(sock)}).code == 3
    # global flags may also follow the verb
    assert roostctl("status", "--json", "--socket", str(sock)).code == 0


# -- every verb against a live daemon -------------------------------------------------------


def test_status(daemon: Daemon) -> None:
    res = daemon.ctl("status")
    assert res.code == 0 and "mur-roost" in res.out and "\x1b[" not in res.out  # NO_COLOR / not a TTY
    doc = daemon.ctl("status", "--json").json
    assert doc["draining"] is False and doc["admin_socket"] == str(daemon.state / "admin.sock")
    assert len(doc["key_id"]) == 16


def test_spawn_wait_job_jobs_sessions_tree_logs(daemon: Daemon) -> None:
    res = daemon.ctl("spawn", "sleeper", "0.1.0", "--task", "0", "--wait")
    assert res.code == 0, res
    assert "complete" in res.out and "waiting" in res.err and "complete" in res.err  # progress on stderr
    res = daemon.ctl("spawn", "sleeper", "0.1.0", "--task", "0", "--wait", "--json")
    assert res.code == 0, res
    job = _one_json(res)
    assert isinstance(job, dict) and job["state"] == "complete" and job["job_id"].startswith("job_")
    job_id, sid = job["job_id"], job["session_id"]

    shown = daemon.ctl("job", job_id, "--json").json
    assert shown["job_id"] == job_id and shown["state"] == "complete"
    assert job_id in daemon.ctl("job", job_id).out

    listed = daemon.ctl("jobs", "--json").json["jobs"]
    assert job_id in {j["job_id"] for j in listed}
    assert {j["state"] for j in daemon.ctl("jobs", "--state", "complete", "--json").json["jobs"]} == {"complete"}
    assert job_id in daemon.ctl("jobs").out

    sessions = daemon.ctl("sessions", "--all", "--json").json["sessions"]
    assert sid in {s["session_id"] for s in sessions}
    assert "credential" not in json.dumps(sessions) and "cred_nonce" not in json.dumps(sessions)
    assert sid in daemon.ctl("sessions", "--all").out
    assert daemon.ctl("sessions", sid, "--json").json["session_id"] == sid

    tree = daemon.ctl("tree", "--all", "--json").json["roots"]
    assert sid in {n["session_id"] for n in tree}
    assert "sleeper@0.1.0" in daemon.ctl("tree", "--all").out

    logs = daemon.ctl("logs", job_id, "--json").json
    assert isinstance(logs["lines"], list) and all("line" in ln for ln in logs["lines"])
    assert daemon.ctl("logs", job_id).code == 0
    assert daemon.ctl("logs", job_id, "-f", "--json").code == 0  # ends: the job is over


def test_spawn_refused_exits_1(daemon: Daemon) -> None:
    res = daemon.ctl("spawn", "orchestrator", "0.1.0", "--task", "x")
    assert res.code == 1 and "'orchestrator@0.1.0' exists but is not allowed to run top-level" in res.err
    assert "(spawn_allow): echo, sleeper, worker." in res.err and "--spawn-allow" not in res.err
    res = daemon.ctl("spawn", "orchestrator", "0.1.0", "--task", "x", "--json")
    assert res.code == 1 and res.json["error"]["code"] == "refused" and res.json["error"]["http_status"] == 403


def test_job_unknown_exits_1(daemon: Daemon) -> None:
    res = daemon.ctl("job", "job_" + "f" * 32, "--json")
    assert res.code == 1 and res.json["error"]["code"] == "not_found"


def test_cancel_and_logs_follow(daemon: Daemon) -> None:
    job = daemon.ctl("spawn", "sleeper", "0.1.0", "--task", "300", "--json").json
    assert job["state"] == "running"
    follower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "roost.ctl.main",
            "--state-dir",
            str(daemon.state),
            "logs",
            job["job_id"],
            "-f",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)
    res = daemon.ctl("cancel", job["job_id"])
    assert res.code == 0 and "terminated" in res.out, res
    assert daemon.ctl("job", job["job_id"], "--json").json["state"] == "terminated"
    out, _ = follower.communicate(timeout=30)  # the follow ends with the job
    assert follower.returncode == 0
    assert all(json.loads(line)["line"] is not None for line in out.splitlines() if line.strip())
    # Cancelling a job that already ended says so and fails; the API stays idempotent.
    res = daemon.ctl("cancel", job["job_id"], "--json")
    assert res.code == 1 and res.json["error"]["code"] == "already_ended", res
    assert "had already ended (terminated)" in res.json["error"]["message"]
    res = daemon.ctl("cancel", job["job_id"])
    assert res.code == 1 and "nothing to cancel" in res.err and not res.out, res
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(daemon.state / "admin.sock"))
        s.sendall(f"POST /jobs/{job['job_id']}/cancel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = b"".join(iter(lambda: s.recv(65536), b""))
    assert answer.startswith(b"HTTP/1.1 200") and b'"state": "terminated"' in answer.replace(b'":"', b'": "')


def test_events(daemon: Daemon) -> None:
    daemon.ctl("spawn", "sleeper", "0.1.0", "--task", "0", "--wait")
    doc = daemon.ctl("events", "-n", "50", "--json").json
    ops = {e["operation"] for e in doc["events"]}
    assert "roost.process.start" in ops
    for e in doc["events"]:
        assert e["schemaVersion"] == 1 and e["type"].startswith("operation.")
    assert "roost.process.start" in daemon.ctl("events", "-n", "50").out
    # -f streams NDJSON until interrupted
    proc = subprocess.Popen(
        [sys.executable, "-m", "roost.ctl.main", "--state-dir", str(daemon.state), "events", "-f", "-n", "3", "--json"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())
    assert first["schemaVersion"] == 1
    proc.terminate()
    proc.wait(timeout=10)


def test_config_reload_reconcile(daemon: Daemon) -> None:
    cfg = daemon.ctl("config", "--json").json
    assert cfg["registry_path"] == str(EXAMPLES) and "sleeper" in cfg["spawn_allow"]
    assert "spawn_allow" in daemon.ctl("config").out
    doc = daemon.ctl("reload", "--json").json
    assert doc["reloaded"] is True and doc["needs_restart"] == []
    assert daemon.ctl("reload").code == 0
    rep = daemon.ctl("reconcile", "--json").json
    assert {"matched", "lost", "orphans"} <= set(rep)
    assert daemon.ctl("reconcile").code == 0


def test_registry_verbs_work_without_a_daemon(tmp_path: Path) -> None:
    reg = tmp_path / "reg"
    shutil.copytree(EXAMPLES, reg)
    ls = roostctl("registry", "ls", "--registry-path", str(reg), "--json", state_dir=tmp_path / "none")
    assert ls.code == 0
    assert {a["name"] for a in ls.json["artifacts"]} == {"crasher", "echo", "orchestrator", "sleeper", "worker"}
    assert "worker@0.1.0" in roostctl("registry", "ls", "--registry-path", str(reg), state_dir=tmp_path).out
    ok = roostctl("registry", "verify", "--registry-path", str(reg), "--json", state_dir=tmp_path / "none")
    assert ok.code == 0 and ok.json["problems"] == []
    src = tmp_path / "hello"
    src.mkdir()
    (src / "murmur.yaml").write_text("name: hello\nversion: 1.0.0\n")
    add = roostctl("registry", "add", str(src), "--registry-path", str(reg), "--json", state_dir=tmp_path / "none")
    assert add.code == 0 and add.json["name"] == "hello" and add.json["daemon_notified"] is False
    assert (reg / "hello" / "1.0.0" / "hello-1.0.0.mur.zip").is_file()
    (reg / "hello" / "1.0.0" / "hello-1.0.0.sha256").write_text("0" * 64 + "  hello-1.0.0.mur.zip\n")
    bad = roostctl("registry", "verify", "--registry-path", str(reg), state_dir=tmp_path / "none")
    assert bad.code == 1 and "hello@1.0.0" in bad.out
    assert roostctl("registry", "add", str(tmp_path / "missing"), "--registry-path", str(reg)).code == 1


def test_registry_add_tells_the_daemon(daemon: Daemon, tmp_path: Path) -> None:
    reg = tmp_path / "reg"
    reg.mkdir()
    src = tmp_path / "hi"
    src.mkdir()
    (src / "murmur.yaml").write_text("name: hi\nversion: 1.0.0\n")
    add = daemon.ctl("registry", "add", str(src), "--registry-path", str(reg), "--json")
    assert add.code == 0 and add.json["daemon_notified"] is True


def test_doctor(daemon: Daemon, tmp_path: Path) -> None:
    res = daemon.ctl("doctor", "--json")
    doc = res.json
    checks = {f["check"]: f for f in doc["findings"]}
    assert res.code == 0 and doc["ok"] is True
    for name in ("daemon", "admin-socket", "state-dir", "key-file", "registry", "roost-capsule", "mur-runtime"):
        assert name in checks
    assert checks["admin-socket"]["status"] == "ok" and checks["key-file"]["status"] == "ok"
    assert all(f["fix"] for f in doc["findings"] if f["status"] != "ok")
    assert "daemon" in daemon.ctl("doctor").out
    # without a daemon: a failed finding with its fix, exit 1
    res = roostctl("doctor", "--json", state_dir=tmp_path)
    assert res.code == 1
    daemon_check = next(f for f in res.json["findings"] if f["check"] == "daemon")
    assert daemon_check["status"] == "fail" and "mur-roost" in daemon_check["fix"]


def test_doctor_flags_loose_permissions(fresh: Daemon) -> None:
    key = fresh.state / "master.key"
    os.chmod(key, 0o644)
    try:
        doc = fresh.ctl("doctor", "--json").json
        finding = next(f for f in doc["findings"] if f["check"] == "key-file")
        assert finding["status"] == "fail" and f"chmod 600 {key}" in finding["fix"]
    finally:
        os.chmod(key, 0o600)


def test_keys_rotate(fresh: Daemon) -> None:
    before = fresh.ctl("status", "--json").json["key_id"]
    res = fresh.ctl("keys", "rotate", "--json")
    assert res.code == 0
    doc = res.json
    assert doc["previous_key_id"] == before and doc["key_id"] != before and doc["persisted"] is True
    assert doc["sessions_affected"] == 0
    assert fresh.ctl("keys", "rotate").code == 0
    assert stat.S_IMODE((fresh.state / "master.key").stat().st_mode) == 0o600


def test_keys_rotate_asks_when_sessions_would_be_hit(fresh: Daemon) -> None:
    job = fresh.ctl("spawn", "sleeper", "0.1.0", "--task", "300", "--json").json
    res = fresh.ctl("keys", "rotate", "--json")  # stdin is not a terminal: refuse without --yes
    assert res.code == 1 and "--yes" in res.json["error"]["message"]
    res = fresh.ctl("keys", "rotate", "--yes", "--json")
    assert res.code == 0 and res.json["sessions_affected"] == 1
    fresh.ctl("cancel", job["job_id"])


def test_drain_then_exit(fresh: Daemon) -> None:
    job = fresh.ctl("spawn", "sleeper", "0.1.0", "--task", "2", "--json").json
    res = fresh.ctl("drain", "--json")
    assert res.code == 0 and res.json["draining"] is True and res.json["active_jobs"] == 1
    assert fresh.ctl("status", "--json").json["draining"] is True
    refused = fresh.ctl("spawn", "sleeper", "0.1.0", "--task", "0", "--json")
    assert refused.code == 1 and "draining" in refused.json["error"]["message"]
    assert fresh.proc.wait(timeout=30) == 0  # the running job finished, then the daemon stopped
    assert not (fresh.state / "admin.sock").exists()
    import sqlite3

    with sqlite3.connect(fresh.state / "roost.db") as db:
        (state,) = db.execute("SELECT state FROM jobs WHERE job_id = ?", (job["job_id"],)).fetchone()
    assert state == "complete"  # it was allowed to finish, not terminated
    assert fresh.ctl("drain").code == 3


def test_drain_wait(fresh: Daemon) -> None:
    res = fresh.ctl("drain", "--wait", "--json")
    assert res.code == 0 and res.json["stopped"] is True
    assert fresh.proc.wait(timeout=10) == 0


def test_help_lists_every_verb() -> None:
    res = roostctl("--help")
    assert res.code == 0
    for verb in ("status", "sessions", "jobs", "job", "spawn", "cancel", "tree", "events", "logs", "drain", "keys"):
        assert verb in res.out
    assert (REPO / "roost" / "ctl" / "commands" / "doctor.py").is_file()
