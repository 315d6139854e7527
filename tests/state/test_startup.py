"""Start-up refusals, each through the real ``mur-roost`` command: one sentence, its own exit code."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from roost.daemon.startup import EXIT_DAMAGED, EXIT_HELD, EXIT_NO_KEY, EXIT_STATE_DIR
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


def _damage_leaves_of(db: Path, table: str, rows: int) -> None:
    """Fill ``table`` (``spent``) with expired ids, then damage half of its leaf pages only: the
    schema and the indexes stay sound, so the file opens and the first query that reaches a
    damaged page is one of start-up's own (pruning the expired ids)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        with conn:
            conn.executemany(
                f"INSERT INTO {table} (jti, exp_ms) VALUES (?, ?)",
                ((f"{i:032x}{'x' * 40}", 1000 + i) for i in range(rows)),
            )
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        sql = "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf'"
        pages = [r[0] for r in conn.execute(sql, (table,))]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    assert len(pages) > 4
    raw = bytearray(db.read_bytes())
    for page in pages[len(pages) // 2 :]:
        raw[(page - 1) * size : (page - 1) * size + 64] = b"\x5a" * 64
    db.write_bytes(bytes(raw))


def _damaged_spent_pages(db: Path) -> None:
    _damage_leaves_of(db, "spent", 20_000)


def _not_sqlite(db: Path) -> None:
    db.write_bytes(b"this is not sqlite" * 500)


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (_damage_pages, ("is damaged", "PRAGMA integrity_check")),
        (_damaged_spent_pages, ("is damaged", "PRAGMA integrity_check", "restore it from a backup")),
        (_not_sqlite, ("is damaged",)),
    ],
    ids=["damaged_pages_name_the_command_to_check_it", "damaged_data_pages_met_by_a_startup_write", "not_a_database"],
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


def test_after_an_unclean_stop_the_whole_database_is_checked_once_ready(
    tmp_path: Path, registry: RegistryBuilder, daemon_processes: list[DaemonProcess]
) -> None:
    """Damage in pages no start-up query reads (history) passes start-up; after a kill -9 the
    daemon checks the whole file once it is ready, says the damage in one sentence and turns
    /readyz to 503. After an orderly stop nothing is checked."""
    state = tmp_path / "state"
    args = ["--state-dir", str(state), "--registry-path", str(registry.root)]
    d = start_daemon_process(args)
    daemon_processes.append(d)
    assert d.stop() == 0
    again = start_daemon_process(args)
    daemon_processes.append(again)
    assert _readyz(again.url) == 200
    assert not any("state_database_check" in ln for ln in again.stderr_lines)
    again.stop(signal.SIGKILL)
    db = state / "roost.db"
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:  # history: ended long ago
        conn.executemany(
            "INSERT INTO sessions (session_id, name, version, sha256, status, depth_remaining, envelope, manifest,"
            " trust, cred_nonce, handle_salt, created_ms, ended_ms) VALUES (?, 'x', '0.1.0', '', 'complete', 0,"
            " '{}', '{}', 'trusted', '', '', ?, ?)",
            ((f"ses_{i:016x}", 1000, 2000 + i) for i in range(5000)),
        )
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        sql = "SELECT pageno FROM dbstat WHERE name = 'sessions' AND pagetype = 'leaf'"
        pages = [r[0] for r in conn.execute(sql)]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    raw = bytearray(db.read_bytes())
    page = pages[len(pages) // 2]
    raw[(page - 1) * size + 8 : (page - 1) * size + 40] = b"\xff" * 32  # its cell pointers
    db.write_bytes(bytes(raw))
    third = start_daemon_process(args)
    daemon_processes.append(third)
    deadline = time.monotonic() + 60
    while _readyz(third.url) == 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _readyz(third.url) == 503
    said = [ln for ln in third.stderr_lines if ln.startswith("mur-roost: the state database")]
    assert len(said) == 1 and "PRAGMA integrity_check" in said[0], third.stderr_lines
    assert any('"state_database_damaged"' in ln for ln in third.stderr_lines)
    assert not any("Traceback" in ln for ln in third.stderr_lines)


def _readyz(url: str) -> int:
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
