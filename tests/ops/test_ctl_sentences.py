"""What roostctl says when something is wrong or worth telling, against a real daemon.

Each test pins one sentence an operator reads: a mistyped verb or capsule gets a suggestion,
an unknown capsule is told apart from one that is not allowed (and what is allowed is listed,
without naming a flag nobody typed), a config file error names the file and the key, an
operator's cancel is recorded as such, a missing registry is reported, and a drain says what
it is waiting for and honours a deadline given while it already drains.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ops.support import EXAMPLES, Daemon, daemon_env, fresh_daemon, module_daemon, roostctl, wait_for

daemon = pytest.fixture(scope="module", name="daemon")(module_daemon)
fresh = pytest.fixture(name="fresh")(fresh_daemon)


def test_mistyped_verb_gets_a_suggestion(tmp_path: Path) -> None:
    res = roostctl("stauts", state_dir=tmp_path)
    assert res.code == 2 and "'stauts' is not a roostctl verb; did you mean 'status'?" in res.err
    res = roostctl("sesions", "--json", state_dir=tmp_path)
    assert res.code == 2 and "did you mean 'sessions'?" in res.json["error"]["message"]
    res = roostctl("qqqqqq", state_dir=tmp_path)
    assert res.code == 2 and "did you mean" not in res.err and "roostctl --help" in res.err


def test_unknown_capsule_is_not_called_disallowed(daemon: Daemon) -> None:
    res = daemon.ctl("spawn", "nosuch", "0.1.0", "--task", "x")
    assert res.code == 1
    assert f"capsule 'nosuch' does not exist in the registry {EXAMPLES}." in res.err
    assert "Capsules allowed to run top-level here (spawn_allow): echo, sleeper, worker." in res.err
    assert "--spawn-allow" not in res.err
    res = daemon.ctl("spawn", "slepper@0.1.0", "--task", "x")
    assert res.code == 1 and "(did you mean 'sleeper'?)" in res.err
    res = daemon.ctl("spawn", "sleeper@9.9.9", "--task", "x", "--json")
    assert res.code == 1
    assert "capsule 'sleeper' has no version 9.9.9" in res.json["error"]["message"]
    assert "its versions: 0.1.0 (e.g. sleeper@0.1.0)" in res.json["error"]["message"]


def test_name_at_version_is_accepted_and_printed(daemon: Daemon) -> None:
    res = daemon.ctl("spawn", "sleeper@0.1.0", "--task", "0", "--wait")
    assert res.code == 0, res
    assert "(sleeper@0.1.0); waiting" in res.err and re.search(r"capsule\s+sleeper@0\.1\.0", res.out)
    assert "sleeper@0.1.0" in daemon.ctl("jobs").out and "sleeper@0.1.0" in daemon.ctl("tree", "--all").out
    sid = next(ln.split()[-1] for ln in res.out.splitlines() if ln.startswith("session "))
    assert re.search(r"^capsule\s+sleeper@0\.1\.0$", daemon.ctl("sessions", sid).out, flags=re.M)
    assert daemon.ctl("spawn", "sleeper@0.1.0", "0.1.0", "--task", "0").code == 2
    res = daemon.ctl("spawn", "sleeper", "--task", "0")
    assert res.code == 2 and "give NAME@VERSION, e.g. sleeper@0.1.0" in res.err


def test_operator_cancel_is_recorded_as_the_operators(daemon: Daemon) -> None:
    job = daemon.ctl("spawn", "sleeper@0.1.0", "--task", "300", "--json").json
    res = daemon.ctl("logs", job["job_id"])
    assert res.code == 0 and f"nothing written yet by {job['job_id']}" in res.err
    res = daemon.ctl("cancel", job["job_id"])
    assert res.code == 0, res
    shown = daemon.ctl("job", job["job_id"], "--json").json
    assert shown["completion"]["detail"] == "an operator cancelled this job"
    assert shown["reason"] == "an operator cancelled this job"
    text = daemon.ctl("job", job["job_id"]).out  # the completion without --json
    assert re.search(r"completion\s+terminated, reported by launcher", text)
    assert "detail" in text and "an operator cancelled this job" in text
    assert "_ms" not in text and re.search(r"created\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+s ago\)", text)
    # The tree shows the job's state: terminated, not the session's "failed".
    tree = daemon.ctl("tree", "--all").out
    line = next(ln for ln in tree.splitlines() if job["session_id"] in ln)
    assert "terminated" in line and not line.startswith("sleeper@0.1.0 failed")
    # Both streams, labelled: the sleeper's stdout became its result when SIGTERM ended it.
    logs = daemon.ctl("logs", job["job_id"]).out
    assert all(re.match(r"^(stderr|stdout|result) +\| ", ln) for ln in logs.splitlines()), logs


def test_tree_without_all_prints_something(fresh: Daemon) -> None:
    res = fresh.ctl("tree")
    assert res.code == 0 and res.out.strip() == "no running sessions"
    assert fresh.ctl("spawn", "sleeper@0.1.0", "--task", "0", "--wait").code == 0
    res = fresh.ctl("tree")
    assert res.out.strip() == "no running sessions; 1 ended ('roostctl tree --all' shows them)"


def test_tables_fit_100_columns_unless_wide(daemon: Daemon) -> None:
    daemon.ctl("spawn", "sleeper@0.1.0", "--task", "0", "--wait")
    for verb in (["jobs"], ["sessions", "--all"]):
        narrow = daemon.ctl(*verb).out.splitlines()
        assert narrow and max(len(ln) for ln in narrow) <= 100, narrow
        wide = daemon.ctl(*verb, "--wide").out.splitlines()
        assert max(len(ln) for ln in wide) > 100
    assert "WORKDIR" in daemon.ctl("sessions", "--all", "--wide").out


def test_config_file_error_names_file_and_key(tmp_path: Path) -> None:
    cfg = tmp_path / "roost.toml"
    cfg.write_text('[roost]\nport = "seventy"\n')
    res = subprocess.run(
        [sys.executable, "-m", "roost", "--config", str(cfg)], capture_output=True, text=True, timeout=30
    )
    assert res.returncode != 0
    assert f"invalid setting 'port' in {cfg}:" in res.stderr and "(got 'seventy')" in res.stderr
    assert "--port" not in res.stderr
    res = subprocess.run(
        [sys.executable, "-m", "roost", "--config", str(cfg), "--port", "x"], capture_output=True, text=True, timeout=30
    )
    assert "invalid --port" in res.stderr  # a flag's error still names the flag


def test_missing_registry_is_reported(tmp_path: Path) -> None:
    missing = tmp_path / "no-registry"
    res = roostctl("registry", "ls", "--registry-path", str(missing))
    assert res.code == 1 and f"the registry {missing} does not exist" in res.err
    assert roostctl("registry", "verify", "--registry-path", str(missing)).code == 1
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "roost", "--port", "0", "--state-dir", str(state), "--registry-path", str(missing)],
        env=daemon_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: roostctl("status", state_dir=state).code == 0, timeout=30, interval=0.1)
        res = roostctl("registry", "ls", state_dir=state)  # the daemon's registry_path
        assert res.code == 1 and "does not exist" in res.err
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "registry_missing" in err and str(missing) in err


def test_drain_shows_what_it_waits_for_and_honours_a_later_deadline(fresh: Daemon) -> None:
    job = fresh.ctl("spawn", "sleeper@0.1.0", "--task", "600", "--json").json
    res = fresh.ctl("drain")
    assert res.code == 0 and "1 job(s)" in res.err
    assert f"end it: roostctl cancel {job['job_id']}" in res.err
    t0 = time.monotonic()
    res = fresh.ctl("drain", "--deadline", "1", "--wait", timeout=60)
    took = time.monotonic() - t0
    assert res.code == 0, res
    assert "already draining" in res.err and "draining: waiting for 1 job(s); it stops anyway in" in res.err
    assert "sleeper@0.1.0  running for" in res.err and "the daemon has stopped" in res.err
    assert took < 20, took  # the deadline given to a daemon already draining applied
    assert fresh.proc.wait(timeout=30) == 0


def test_help_has_no_markup_and_every_flag_is_explained() -> None:
    from roost.ctl.commands import VERBS
    from roost.ctl.main import build_parser

    parser, _ = build_parser()
    sub = next(a for a in parser._actions if a.dest == "verb")
    for verb in VERBS:
        p = sub.choices[verb]  # type: ignore[index]
        text = p.format_help()
        assert "``" not in text and "seeds/" not in text and "§" not in text, (verb, text)
        for action in p._actions:
            if action.dest != "help":
                assert action.help, (verb, action.option_strings or action.dest)
