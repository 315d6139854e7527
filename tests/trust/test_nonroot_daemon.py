"""A daemon that is not root refuses to start a child of another uid, with a sentence.

The daemon runs as uid 65534 under the system's Python (the test's interpreter may live where
that uid cannot read), importing this checkout and the venv's packages; the caller is root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from trust.attacker import NOBODY, system_python

from tests.support.registry import REPO, RegistryBuilder

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="running a daemon as another uid needs root")

_BOOT = (
    "import runpy, sys; sys.path[:0] = [{repo!r}, {site!r}]; sys.argv[0] = 'mur-roost'; "
    "runpy.run_module('roost', run_name='__main__')"
)


@pytest.fixture
def scratch() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="roost-nonroot-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _post(url: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_service_user_daemon_refuses_another_uids_child(scratch: Path) -> None:
    site = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    reg = RegistryBuilder(root=scratch / "registry", src=scratch / "src")
    reg.root.mkdir()
    reg.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    reg.add("worker")
    for p in [scratch, *scratch.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    state = scratch / "state"
    state.mkdir(mode=0o700)
    os.chown(state, NOBODY, NOBODY)
    # Root's self-registered session may obtain launches only from a daemon whose launch_uids name
    # root (docs/security.md); here they do, so the refusal tested is the uid switch's.
    config = scratch / "roost.toml"
    config.write_text(f"launch_uids = [0, {NOBODY}]\n")
    config.chmod(0o644)
    cmd = [
        system_python(),
        "-I",
        "-c",
        _BOOT.format(repo=str(REPO), site=site),
        "--config",
        str(config),
        "--port",
        "0",
        "--log-format",
        "json",
        "--state-dir",
        str(state),
        "--registry-path",
        str(reg.root),
        "--spawn-allow",
        "orchestrator",
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, user=NOBODY, group=NOBODY, extra_groups=[], cwd="/"
    )
    try:
        assert proc.stderr is not None
        port = None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            line = proc.stderr.readline().decode(errors="replace")
            if not line:
                break
            lines.append(line)
            m = re.search(r"mur-roost: listening on \S+:(\d+)", line)
            if m:
                port = int(m.group(1))
        assert port is not None, "".join(lines)
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        url = f"http://127.0.0.1:{port}"
        status, body = _post(
            url + "/register", {"session_id": "ses_root0001", "name": "orchestrator", "version": "0.1.0"}
        )
        assert status == 200, body
        status, body = _post(
            url + "/jobs", {"name": "worker", "version": "0.1.0"}, {"x-murmur-spawn-credential": body["credential"]}
        )
        assert status == 409, body
        assert body == {
            "error": f"this daemon runs as uid {NOBODY}, so it cannot start a child as uid 0 (the session's own); "
            "run the daemon as root (with CAP_SETUID/CAP_SETGID) or as that user"
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
