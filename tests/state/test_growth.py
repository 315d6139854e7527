"""Things that grow or surprise over time, at a real daemon: a child's ``launcher.log`` is bounded,
a database a newer release wrote is refused with a sentence and its own exit code, and
``roostctl keys rotate --grace`` keeps the old key verifying — credentials, handles, door seals —
for the grace only (docs/operations.md)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from a2a.protocol import seal
from roost.core import tokens
from tests.ops.support import admin_http
from tests.support.capsules import wait_for
from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder

CRED = "x-murmur-spawn-credential"

CHATTY = """
import sys, time
for _ in range(64):
    sys.stderr.write("x" * 32767 + "\\n")
sys.stderr.flush()
time.sleep(20)
"""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return -1


async def test_a_childs_launcher_log_is_rotated_past_its_cap(daemon_factory: Any, registry: RegistryBuilder) -> None:
    """2 MiB of stderr under ``launcher_log_max_bytes = 256Ki``: the log is cut back and its last
    part kept in ``launcher.log.1``, both bounded, while the child keeps writing to the log."""
    registry.add("chatty", script=CHATTY)
    cap = 256 * 1024
    d = await daemon_factory(registry.root, spawn_allow=("chatty",), launcher_log_max_bytes=cap)
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "chatty", "version": "0.1.0", "task": "go"})
    assert status == 201, job
    logs = Path(job["workdir"]) / ".murmur"
    await wait_for(lambda: _size(logs / "launcher.log.1") > 0, within=30)
    await wait_for(lambda: 0 <= _size(logs / "launcher.log") <= 2 * cap, within=15)
    assert 0 < _size(logs / "launcher.log.1") <= cap
    status, _, _, _ = await d.call("POST", f"/jobs/{job['job_id']}/cancel")
    assert status == 200


def test_a_database_from_a_newer_release_is_refused(tmp_path: Path) -> None:
    """``roost.db`` at a schema this release does not know: one sentence, exit 8, not opened."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    key = state / "master.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    with sqlite3.connect(state / "roost.db") as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("PRAGMA user_version=99")
    (tmp_path / "reg").mkdir()
    args = ["--port", "0", "--state-dir", str(state), "--registry-path", str(tmp_path / "reg")]
    proc = subprocess.run(
        [sys.executable, "-m", "roost", *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == 8, proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("mur-roost: ")]
    assert said and "written by a newer mur-roost (schema 99" in said[-1], proc.stderr
    assert "Traceback" not in proc.stderr
    with sqlite3.connect(state / "roost.db") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 99  # untouched


async def _rotate(d: RunningDaemon, grace: float | None) -> dict[str, Any]:
    body = {} if grace is None else {"grace_secs": grace}
    async with admin_http(d.config.admin_socket_path) as http, http.post("http://admin/keys/rotate", json=body) as r:
        assert r.status == 200, await r.text()
        return dict(await r.json())


async def test_rotate_with_a_grace_keeps_old_tokens_verifying_for_the_grace_only(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    registry.add("alpha", extra={"exports": {"peer_files": {"root": "share"}}})
    d = await daemon_factory(registry.root, spawn_allow=("alpha",))
    wd = tmp_path / "wd"
    (wd / "share").mkdir(parents=True)
    (wd / "share" / "f.txt").write_text("kept")
    status, reg, _, _ = await d.call(
        "POST",
        "/register",
        json={"session_id": "ses_grace0001", "name": "alpha", "version": "0.1.0", "workdir": str(wd)},
    )
    assert status == 200, reg
    cred = reg["credential"]
    door_key = bytes.fromhex(reg["door_key"])
    rec = d.roost.table.get("ses_grace0001")
    assert rec is not None
    old_handle_key = d.keys.handle_key(rec.session_id, rec.handle_salt)
    handle = tokens.mint_handle(old_handle_key, iss=rec.session_id, path="f.txt", exp_ms=2**50, audience="peer@h:1")

    answer = await _rotate(d, 3.0)
    assert answer["grace_secs"] == 3.0 and answer["key_id"] != answer["previous_key_id"]
    # During the grace: the old credential, handle and door key still hold; new tokens are new.
    assert (await d.call("POST", "/renew", headers={CRED: cred}))[0] == 200
    status, _, _, data = await d.call("GET", f"/resources/peer/{handle}", headers={"x-murmur-audience": "peer@h:1"})
    assert (status, data) == (200, b"kept")
    assert d.roost.key_holder.door_key_for(rec.session_id) == door_key
    facts = {"receiver": rec.session_id, "origin": "peer", "trust": "trusted", "subject": "m"}
    sealed = seal.seal(d.roost.key_holder.door_key_for(rec.session_id), sender="ses_x", traceparent="", **facts)
    assert seal.verify(door_key, sealed, traceparent=None, **facts) == "ses_x"  # the door still believes it
    status, fresh, _, _ = await d.call(
        "POST", "/register", json={"session_id": "ses_grace0002", "name": "alpha", "version": "0.1.0"}
    )
    assert status == 200 and fresh["door_key"] != reg["door_key"]  # minted under the new key
    assert tokens.verify_credential(d.keys.credential_key, fresh["credential"]).sid == "ses_grace0002"

    await asyncio.sleep(3.3)
    # After it: all of them are revoked, as an immediate rotation would have.
    status, body, _, _ = await d.call("POST", "/renew", headers={CRED: cred})
    assert status == 403, body
    status, _, _, _ = await d.call("GET", f"/resources/peer/{handle}", headers={"x-murmur-audience": "peer@h:1"})
    assert status == 403
    assert d.roost.key_holder.door_key_for(rec.session_id) != door_key
    assert (await d.call("POST", "/renew", headers={CRED: fresh["credential"]}))[0] == 200


async def test_rotate_without_a_grace_revokes_at_once(daemon_factory: Any, registry: RegistryBuilder) -> None:
    registry.add("alpha")
    d = await daemon_factory(registry.root, spawn_allow=("alpha",))
    _, cred = await d.register_top("alpha")
    answer = await _rotate(d, None)
    assert answer["grace_secs"] == 0
    assert (await d.call("POST", "/renew", headers={CRED: cred}))[0] == 403
