"""Helpers for the operator-surface tests: a real ``mur-roost`` subprocess and ``roostctl`` runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

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


class Daemon:
    def __init__(self, root: Path, *extra: str) -> None:
        self.root = root
        self.state = root / "state"
        cfg = root / "roost.toml"
        cfg.write_text(
            f'registry_path = "{EXAMPLES}"\nspawn_allow = ["sleeper", "worker", "echo"]\nstate_dir = "state"\n'
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "roost", "--config", str(cfg), "--port", "0", "--log-format", "json", *extra],
            env=daemon_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: roostctl("status", state_dir=self.state).code == 0, timeout=30, interval=0.1)

    def ctl(self, *args: str, **kw: object) -> Ctl:
        return roostctl(*args, state_dir=self.state, **kw)  # type: ignore[arg-type]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def module_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """One daemon for a test module (wrap with ``pytest.fixture(scope="module", name=...)``)."""
    d = Daemon(tmp_path_factory.mktemp("ctl"))
    yield d
    d.stop()


def fresh_daemon(tmp_path: Path) -> Iterator[Daemon]:
    """A daemon of the test's own, for tests that stop or drain it."""
    d = Daemon(tmp_path)
    yield d
    d.stop()
