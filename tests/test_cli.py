"""The ``mur-roost`` command line as an operator meets it: flags, errors, signals, restarts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from roost import __version__
from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.registry import RegistryBuilder


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "roost", *args], capture_output=True, text=True, timeout=30, env=env)


def http(
    method: str, url: str, body: object | None = None, headers: dict[str, str] | None = None
) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        url, data=data, method=method, headers={"content-type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_version() -> None:
    out = run_cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"mur-roost {__version__}"


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (["--bogus"], "mur-roost: unknown argument: --bogus"),
        (["--port"], "mur-roost: --port requires a value"),
        (["--port", "abc"], "mur-roost: invalid --port: 'abc' is not a whole number"),
        (["--port=70000"], "mur-roost: invalid --port: "),
        (["--max-depth", "-1"], "mur-roost: invalid --max-depth: '-1' must not be negative"),
        (["--log-format", "xml"], "mur-roost: invalid --log-format: 'xml' is not one of json, console, auto"),
        (["--bind", "0.0.0.0"], "mur-roost: invalid --bind: 0.0.0.0 is not a loopback address"),
        (["--bind", "not-an-ip"], "mur-roost: invalid --bind: 'not-an-ip' is not an IP address"),
        (["--config", "/nonexistent/roost.toml"], "mur-roost: cannot read --config /nonexistent/roost.toml"),
    ],
)
def test_bad_flags_exit_with_one_sentence(args: list[str], sentence: str, tmp_path: Path) -> None:
    out = run_cli(*args, "--state-dir", str(tmp_path / "s"), "--registry-path", str(tmp_path))
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(sentence), lines[0]


def test_bad_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "roost.toml"
    cfg.write_text('[roost]\nmax_depth = "three"\n')
    out = run_cli("--config", str(cfg), "--state-dir", str(tmp_path / "s"))
    # The file and the key are named, not a --max-depth flag nobody gave.
    assert out.returncode == 1 and out.stderr.startswith(f"mur-roost: invalid setting 'max_depth' in {cfg}:")
    cfg.write_text("[roost]\nmystery = 1\n")
    out = run_cli("--config", str(cfg))
    assert out.returncode == 1 and "unknown setting 'mystery'" in out.stderr


def test_config_file_flags_win_and_paths_are_relative_to_file(
    tmp_path: Path, registry: RegistryBuilder, daemon_processes: list[DaemonProcess]
) -> None:
    registry.add("orchestrator")
    cfg = tmp_path / "conf" / "roost.toml"
    cfg.parent.mkdir()
    rel = os.path.relpath(registry.root, cfg.parent)
    cfg.write_text(
        f'[roost]\nregistry_path = "{rel}"\nspawn_allow = ["orchestrator"]\nmax_depth = 2\nstate_dir = "state"\n'
    )
    d = start_daemon_process(["--config", str(cfg), "--max-depth", "1"])
    daemon_processes.append(d)
    status, body = http(
        "POST", d.url + "/register", {"session_id": "ses_c", "name": "orchestrator", "version": "0.1.0"}
    )
    assert status == 200, body
    status, body = http("GET", d.url + "/status/ses_c")
    assert status == 200 and body["depth_remaining"] == 1  # type: ignore[index]
    assert (cfg.parent / "state" / "roost.db").exists()


def test_sigterm_clean_shutdown_and_restart_keeps_credentials(
    tmp_path: Path, registry: RegistryBuilder, daemon_processes: list[DaemonProcess]
) -> None:
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    args = ["--registry-path", str(registry.root), "--state-dir", str(tmp_path / "st"), "--spawn-allow=orchestrator"]
    d1 = start_daemon_process(args)
    daemon_processes.append(d1)
    status, body = http(
        "POST", d1.url + "/register", {"session_id": "ses_p", "name": "orchestrator", "version": "0.1.0"}
    )
    assert status == 200
    cred = body["credential"]  # type: ignore[index]
    assert d1.stop(signal.SIGTERM) == 0
    assert any('"event": "stopped"' in line or '"event":"stopped"' in line for line in d1.stderr_lines)
    d2 = start_daemon_process(args)
    daemon_processes.append(d2)
    status, body = http(
        "POST", d2.url + "/spawn", {"name": "worker", "version": "0.1.0"}, {"x-murmur-spawn-credential": cred}
    )
    assert status == 200, body
    assert d2.stop(signal.SIGINT) == 0
    # No token ever reaches the log: only 16-hex ids.
    for line in d1.stderr_lines + d2.stderr_lines:
        assert "msc1." not in line and "msa1." not in line, line


def test_port_in_use_is_one_sentence(
    tmp_path: Path, registry: RegistryBuilder, daemon_processes: list[DaemonProcess]
) -> None:
    d = start_daemon_process(["--registry-path", str(registry.root), "--state-dir", str(tmp_path / "a")])
    daemon_processes.append(d)
    out = run_cli("--port", str(d.port), "--registry-path", str(registry.root), "--state-dir", str(tmp_path / "b"))
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].startswith(f"mur-roost: failed to bind port {d.port}")


def test_group_readable_key_file_refused(tmp_path: Path, registry: RegistryBuilder) -> None:
    state = tmp_path / "k"
    state.mkdir(mode=0o700)
    key = state / "master.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o644)
    out = run_cli("--port", "0", "--registry-path", str(registry.root), "--state-dir", str(state))
    assert out.returncode == 1
    assert "chmod 600" in out.stderr.strip().splitlines()[-1]
    time.sleep(0)
