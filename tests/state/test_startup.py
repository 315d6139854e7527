"""Start-up refusals, each through the real ``mur-roost`` command: one sentence, its own exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from roost.startup import EXIT_DAMAGED, EXIT_HELD, EXIT_NO_KEY, EXIT_STATE_DIR
from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.registry import EXAMPLES, RegistryBuilder


def _run(state: Path, registry: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "roost", "--port", "0", "--log-format", "json", "--state-dir", str(state)]
    cmd += ["--registry-path", str(registry), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def _one_sentence(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("mur-roost: ")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def _populated(state: Path, registry: RegistryBuilder, daemon_processes: list[DaemonProcess]) -> None:
    d = start_daemon_process(["--state-dir", str(state), "--registry-path", str(registry.root)])
    daemon_processes.append(d)
    assert d.stop() == 0


def _post_json(url: str, body: object) -> tuple[int, dict[str, object]]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _get_json(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=30) as resp:
        body: dict[str, object] = json.loads(resp.read())
        return body


@pytest.mark.parametrize("mode", [(), ("--ephemeral-keys",)], ids=["persisted_keys", "ephemeral_keys"])
def test_a_second_daemon_on_the_same_state_dir_names_the_first(
    tmp_path: Path, daemon_processes: list[DaemonProcess], mode: tuple[str, ...]
) -> None:
    """Whatever the mode, the lock comes first: with ephemeral keys the key and the database are in
    memory, but the keeper socket, admin.sock and jobs/ are in the state dir all the same."""
    state = tmp_path / "state"
    args = ["--state-dir", str(state), "--registry-path", str(EXAMPLES / "registry"), "--spawn-allow", "sleeper"]
    first = start_daemon_process([*args, *mode])
    daemon_processes.append(first)
    status, job = _post_json(first.url + "/jobs", {"name": "sleeper", "version": "0.1.0", "task": "sleep 600"})
    assert status == 201, job
    assert _get_json(f"{first.url}/jobs/{job['job_id']}")["state"] == "running"
    keeper_before = sorted(os.listdir(state))
    proc = _run(state, EXAMPLES / "registry", *mode)
    assert proc.returncode == EXIT_HELD, proc.stderr
    line = _one_sentence(proc)
    assert f"pid {first.proc.pid}" in line and "held by another running mur-roost" in line
    for never in ("keeper_reconnected", "job_readopted", "reconciled"):
        assert never not in proc.stderr, proc.stderr
    assert sorted(os.listdir(state)) == keeper_before
    assert first.proc.poll() is None  # the first one is untouched and still serving
    assert _get_json(f"{first.url}/jobs/{job['job_id']}")["state"] == "running"  # its child's lifeline too
    assert first.stop() == 0
    again = start_daemon_process([*args, *mode])
    daemon_processes.append(again)
    assert again.proc.poll() is None  # the lock went with the first daemon


def test_state_dir_open_to_others_is_refused(tmp_path: Path, registry: RegistryBuilder) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    proc = _run(state, registry.root)
    assert proc.returncode == EXIT_STATE_DIR
    assert "mode 0755, not 0700" in _one_sentence(proc)
    assert not (state / "master.key").exists()


def test_state_dir_of_another_user_is_refused(tmp_path: Path, registry: RegistryBuilder) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, 65534, 65534)
    proc = _run(state, registry.root)
    assert proc.returncode == EXIT_STATE_DIR
    assert "belongs to uid 65534" in _one_sentence(proc)


def _damage_pages(db: Path) -> None:
    raw = bytearray(db.read_bytes())
    raw[100:4096] = b"\xa5" * (4096 - 100)  # the schema page, past the header
    for page in range(4096, len(raw), 4096):
        raw[page : page + 64] = b"\x5a" * 64
    db.write_bytes(bytes(raw))


def _not_sqlite(db: Path) -> None:
    db.write_bytes(b"this is not sqlite" * 500)


@pytest.mark.parametrize(
    ("damage", "said"),
    [(_damage_pages, ("is damaged", "PRAGMA integrity_check")), (_not_sqlite, ("is damaged",))],
    ids=["damaged_pages_name_the_command_to_check_it", "not_a_database"],
)
def test_damaged_database_is_refused(
    tmp_path: Path,
    registry: RegistryBuilder,
    daemon_processes: list[DaemonProcess],
    damage: Callable[[Path], None],
    said: tuple[str, ...],
) -> None:
    state = tmp_path / "state"
    _populated(state, registry, daemon_processes)
    damage(state / "roost.db")
    proc = _run(state, registry.root)
    assert proc.returncode == EXIT_DAMAGED, proc.stderr
    line = _one_sentence(proc)
    for words in said:
        assert words in line


def test_missing_key_with_a_populated_database(
    tmp_path: Path, registry: RegistryBuilder, daemon_processes: list[DaemonProcess]
) -> None:
    state = tmp_path / "state"
    _populated(state, registry, daemon_processes)
    (state / "master.key").unlink()
    proc = _run(state, registry.root)
    assert proc.returncode == EXIT_NO_KEY
    line = _one_sentence(proc)
    assert "--reset-keys" in line and "revoke" in line
    assert not (state / "master.key").exists()
    d = start_daemon_process(["--state-dir", str(state), "--registry-path", str(registry.root), "--reset-keys"])
    daemon_processes.append(d)
    assert any("--reset-keys: started with a new key" in ln for ln in d.stderr_lines)
    assert (state / "master.key").exists()
    assert d.stop() == 0


def test_a_deleted_database_is_said_not_silent(
    tmp_path: Path, registry: RegistryBuilder, daemon_processes: list[DaemonProcess]
) -> None:
    state = tmp_path / "state"
    _populated(state, registry, daemon_processes)
    (state / "roost.db").unlink()
    d = start_daemon_process(["--state-dir", str(state), "--registry-path", str(registry.root)])
    daemon_processes.append(d)
    assert any("is missing although master.key is there" in ln for ln in d.stderr_lines), d.stderr_lines
