"""Helpers for the operator-surface tests: a real ``mur-roost`` subprocess and ``roostctl`` runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "deploy" / "examples" / "registry"
BIN = Path(sys.executable).parent


@dataclass
class Ctl:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)


def roostctl(*args: str, state_dir: Path | None = None, env: dict[str, str] | None = None, timeout: float = 60) -> Ctl:
    cmd = [sys.executable, "-m", "roost.ctl.main"]
    if state_dir is not None:
        cmd += ["--state-dir", str(state_dir)]
    e = {**os.environ, "NO_COLOR": "1", **(env or {})}
    e.pop("ROOST_SOCKET", None)
    e.pop("ROOST_STATE_DIR", None)
    e.update(env or {})
    p = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, env=e, stdin=subprocess.DEVNULL)
    return Ctl(p.returncode, p.stdout, p.stderr)


def daemon_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTIFY_SOCKET", "WATCHDOG_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def admin_http(socket_path: Path) -> aiohttp.ClientSession:
    """An aiohttp session that talks to the admin socket (URLs: ``http://admin/<path>``)."""
    return aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(socket_path)))


def wait_for(predicate: Any, timeout: float = 15.0, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError("condition not met in time")
