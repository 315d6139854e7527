"""``roostctl sessions end ID [--reason]`` through the real CLI, at a real ``mur-roost`` process.

The session ends ``failed`` with the operator's reason in memory, in ``roost.db`` and in the
``roost.session.end`` observation event; the lifeline of the child it delegated to closes, so
that child (a runtime double launched through ``POST /jobs``) reads EOF, says so and ends, and
its job ends for that reason. An unknown id, a session that already ended (one the daemon
remembers, and one only the database still remembers) and a malformed id each get their
sentence and exit 1; a missing id is a usage error (exit 2).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ops.support import Ctl, roostctl

from roost.core.finalize import PARENT_ENDED_REASON
from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.launcher import DOUBLE, add_doubles
from tests.support.registry import RegistryBuilder

CRED = "x-murmur-spawn-credential"
REASON = "maintenance window: the operator ends this tree"
HANG_GUARD = 30.0


def _until(pred: Any, what: str, timeout: float = HANG_GUARD) -> Any:
    """Poll ``pred`` until it is truthy; the timeout only guards against a hang."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what}: not seen in {timeout:g} s")


@pytest.fixture
def setup(tmp_path: Path, registry: RegistryBuilder) -> Iterator[tuple[DaemonProcess, Path]]:
    add_doubles(registry)
    state = tmp_path / "state"
    cfg = tmp_path / "roost.toml"
    cfg.write_text(
        f'registry_path = "{registry.root}"\nstate_dir = "{state}"\nspawn_allow = ["boss"]\n'
        f'runtime_command = ["{sys.executable}", "{DOUBLE}"]\nstop_grace_secs = 1.0\n'
        # Ended sessions leave memory at the next sweep, so one case is answered from roost.db.
        "session_memory_secs = 0.2\nretention_sweep_secs = 0.2\n"
    )
    proc = start_daemon_process(["--config", str(cfg)])
    try:
        yield proc, state
    finally:
        proc.stop()


def _db_session(state: Path, sid: str) -> tuple[str, str | None] | None:
    """The session's status and end reason as roost.db holds them (a read-only connection)."""
    with contextlib.closing(sqlite3.connect(f"file:{state / 'roost.db'}?mode=ro", uri=True)) as conn:
        row = conn.execute("SELECT status, end_reason FROM sessions WHERE session_id = ?", (sid,)).fetchone()
    return None if row is None else (str(row[0]), row[1])


def _call(url: str, method: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """One HTTP request to the daemon's TCP listener: its status and JSON body."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        url, data=data, method=method, headers={"content-type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=HANG_GUARD) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _register(url: str, workdir: Path) -> tuple[str, str]:
    sid = f"ses_{os.urandom(8).hex()}"
    workdir.mkdir()
    body = {"session_id": sid, "name": "boss", "version": "0.1.0", "workdir": str(workdir)}
    status, answer = _call(url + "/register", "POST", body)
    assert status == 200, answer
    return sid, str(answer["credential"])


def _refused(res: Ctl, code: str, status: int, sentence: str) -> None:
    assert res.code == 1, res
    doc = json.loads(res.out)
    assert doc["error"]["code"] == code and doc["error"]["http_status"] == status, doc
    assert sentence in doc["error"]["message"], doc


def test_sessions_end_records_the_reason_closes_the_lifelines_and_says_so(
    setup: tuple[DaemonProcess, Path], tmp_path: Path
) -> None:
    proc, state = setup
    sid, cred = _register(proc.url, tmp_path / "boss-wd")
    body = {"name": "kid", "version": "0.1.0", "task": "hang"}
    status, job = _call(proc.url + "/jobs", "POST", body, {CRED: cred})
    assert status == 201, job

    def job_view() -> Any:
        status, view = _call(f"{proc.url}/jobs/{job['job_id']}", "GET", headers={CRED: cred})
        assert status == 200, view
        return view

    _until(lambda: job_view()["state"] == "running", "the child job running")
    kid_dir = Path(job_view()["workdir"])
    assert not (kid_dir / "spawner_ended.json").exists()

    res = roostctl("sessions", "end", sid, "--reason", REASON, "--json", state_dir=state)
    assert res.code == 0, res
    ended = json.loads(res.out)
    assert ended["session_id"] == sid and ended["status"] == "failed" and ended["end_reason"] == REASON, ended
    status, answer = _call(f"{proc.url}/status/{sid}", "GET")
    assert status == 200 and answer["status"] == "failed", answer
    assert _db_session(state, sid) == ("failed", REASON)

    # The child read EOF on its lifeline, recorded that its spawner ended, and ended.
    told = json.loads(_until(lambda: _read(kid_dir / "spawner_ended.json"), "the child's spawner_ended"))
    assert told["event_type"] == "spawner_ended" and told["spawned_by"] == sid, told

    def job_ended() -> Any:
        shown = roostctl("job", job["job_id"], "--json", state_dir=state).json
        return shown if shown["state"] not in ("starting", "running") else None

    shown = _until(job_ended, "the child job's end")
    assert shown["state"] == "terminated" and shown["reason"] == PARENT_ENDED_REASON, shown
    assert not (kid_dir / "completion.json").exists()  # nobody left to report to

    # The observation event says who ended it and why.
    events = roostctl("events", "-n", "500", "--json", state_dir=state).json["events"]
    ends = [
        e["attributes"]
        for e in events
        if e["operation"] == "roost.session.end"
        and e["type"] == "operation.completed"
        and e["attributes"].get("roost.session.id") == sid
    ]
    assert ends == [{**ends[0], "roost.session.status": "failed", "roost.session.reason": REASON}], (
        f"one roost.session.end event of {sid} with the reason: {ends}"
    )
    # The human form shows the record too.
    again = roostctl("sessions", sid, state_dir=state)
    assert again.code == 0 and REASON in again.out, again


def test_sessions_end_refusals_have_their_sentence_and_exit_code(
    setup: tuple[DaemonProcess, Path], tmp_path: Path
) -> None:
    proc, state = setup
    unknown = "ses_" + "0" * 16
    res = roostctl("sessions", "end", unknown, "--json", state_dir=state)
    _refused(res, "not_found", 404, "session not found")
    res = roostctl("sessions", "end", unknown, state_dir=state)
    assert res.code == 1 and res.out == "" and "session not found" in res.err, res

    twice, _ = _register(proc.url, tmp_path / "twice-wd")
    done, done_cred = _register(proc.url, tmp_path / "done-wd")
    status, answer = _call(proc.url + "/deregister", "POST", {"outcome": "complete"}, {CRED: done_cred})
    assert status == 200, answer
    # Ended by the operator, then ended again: the second is refused and changes nothing.
    first = roostctl("sessions", "end", twice, state_dir=state)
    assert first.code == 0 and "ended by the operator" in first.out, first
    res = roostctl("sessions", "end", twice, "--reason", "again", "--json", state_dir=state)
    _refused(res, "conflict", 409, f"session {twice} has already ended (failed)")
    assert _db_session(state, twice) == ("failed", "ended by the operator")

    # A session that deregistered and left the daemon's memory: only roost.db remembers it.
    _until(lambda: done not in _listed(state), "the ended session leaving memory")
    res = roostctl("sessions", "end", done, "--json", state_dir=state)
    _refused(res, "conflict", 409, f"session {done} has already ended (complete)")
    assert _db_session(state, done) == ("complete", None)

    res = roostctl("sessions", "end", "ses_a..b", "--json", state_dir=state)
    _refused(res, "bad_request", 400, "session_id must not be '.' or contain '..'")
    res = roostctl("sessions", "end", twice, "--reason", "x" * 501, "--json", state_dir=state)
    _refused(res, "bad_request", 400, "reason must be a non-empty string of at most 500 characters")
    res = roostctl("sessions", "end", state_dir=state)
    assert res.code == 2 and "sessions end needs a session id" in res.err, res


def _listed(state: Path) -> set[str]:
    return {s["session_id"] for s in roostctl("sessions", "--all", "--json", state_dir=state).json["sessions"]}


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
