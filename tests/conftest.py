"""Shared fixtures: real registries on disk, real daemons on ephemeral loopback ports.

``daemon_factory`` runs a :class:`roost.daemon.Roost` inside the test's event loop (real TCP,
real SQLite, real registry) with an injectable clock; ``spawn_daemon_process`` runs the
``mur-roost`` CLI as a child process for tests of flags, signals and restarts.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from roost.config import Config
from roost.daemon import Roost
from roost.packing import pack_capsule

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "deploy" / "examples"


class FakeClock:
    """Wall-clock milliseconds that only move when a test moves them."""

    def __init__(self, start_ms: int | None = None) -> None:
        self.now = start_ms if start_ms is not None else int(time.time() * 1000)

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@dataclass
class RegistryBuilder:
    root: Path
    src: Path
    built: dict[str, str] = field(default_factory=dict)

    def add(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        capabilities: dict[str, Any] | None = None,
        entrypoint: list[str] | None = None,
        script: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """Pack a capsule into the registry and return its sha256."""
        d = self.src / f"{name}-{version}"
        d.mkdir(parents=True, exist_ok=True)
        manifest: dict[str, Any] = {"name": name, "version": version}
        if capabilities:
            manifest["capabilities"] = capabilities
        if script is not None:
            main = d / "main.py"
            main.write_text("#!/usr/bin/env python3\n" + textwrap.dedent(script))
            main.chmod(0o755)
            manifest["entrypoint"] = entrypoint or ["main.py"]
        elif entrypoint is not None:
            manifest["entrypoint"] = entrypoint
        if extra:
            manifest.update(extra)
        (d / "murmur.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
        result = pack_capsule(d, self.root)
        self.built[f"{name}@{version}"] = result.sha256
        return result.sha256


@pytest.fixture
def registry(tmp_path: Path) -> RegistryBuilder:
    root = tmp_path / "registry"
    root.mkdir()
    return RegistryBuilder(root=root, src=tmp_path / "capsule-src")


@dataclass
class RunningDaemon:
    roost: Roost
    url: str
    http: aiohttp.ClientSession
    clock: FakeClock

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any, aiohttp.ClientResponse, bytes]:
        async with self.http.request(method, self.url + path, json=json, data=data, headers=headers) as resp:
            raw = await resp.read()
            try:
                body = await resp.json(content_type=None)
            except ValueError:
                body = None
            return resp.status, body, resp, raw

    async def register_top(self, name: str, version: str = "0.1.0", **extra: Any) -> tuple[str, str]:
        sid = extra.pop("session_id", None) or f"ses_{os.urandom(8).hex()}"
        status, body, _, _ = await self.call(
            "POST", "/register", json={"session_id": sid, "name": name, "version": version, **extra}
        )
        assert status == 200, body
        return sid, body["credential"]

    async def spawn(self, credential: str, name: str, version: str = "0.1.0") -> tuple[int, Any]:
        status, body, _, _ = await self.call(
            "POST", "/spawn", json={"name": name, "version": version}, headers={"x-murmur-spawn-credential": credential}
        )
        return status, body

    async def register_child(self, approval: str, name: str, version: str = "0.1.0") -> tuple[str, str]:
        sid = f"ses_{os.urandom(8).hex()}"
        status, body, _, _ = await self.call(
            "POST",
            "/register",
            json={"session_id": sid, "name": name, "version": version},
            headers={"x-murmur-spawn-approval": approval},
        )
        assert status == 200, body
        return sid, body["credential"]


DaemonFactory = Callable[..., "asyncio.Future[RunningDaemon]"]


@pytest.fixture
async def daemon_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    started: list[RunningDaemon] = []

    async def make(registry_root: Path, *, clock: FakeClock | None = None, **overrides: Any) -> RunningDaemon:
        values: dict[str, Any] = {
            "port": 0,
            "registry_path": registry_root,
            "state_dir": overrides.pop("state_dir", tmp_path / "state"),
            "log_format": "json",
        }
        values.update(overrides)
        cfg = Config.model_validate(values)
        clk = clock or FakeClock()
        roost = Roost(cfg, clock=clk)
        await roost.start()
        http = aiohttp.ClientSession()
        d = RunningDaemon(roost=roost, url=roost.url, http=http, clock=clk)
        started.append(d)
        return d

    yield make
    for d in started:
        await d.http.close()
        if d.roost.app is not None:
            await d.roost.stop()


@pytest.fixture
async def daemon(daemon_factory: Callable[..., Any], registry: RegistryBuilder) -> RunningDaemon:
    """A daemon over a registry holding a parent/child pair; ``orchestrator`` may run top-level."""
    registry.add(
        "orchestrator",
        capabilities={"spawn": {"allow": ["worker", "orchestrator", "greedy"]}, "network": {"allow": ["localhost"]}},
    )
    registry.add("worker", capabilities={"network": {"allow": ["localhost:8080"]}})
    registry.add("greedy", capabilities={"network": {"allow": ["example.com"]}})
    d: RunningDaemon = await daemon_factory(registry.root, spawn_allow=("orchestrator",))
    return d


# -- subprocess daemons --------------------------------------------------------------------

_LISTEN_RE = re.compile(r"mur-roost: listening on (\S+):(\d+)")


@dataclass
class DaemonProcess:
    proc: subprocess.Popen[bytes]
    port: int
    stderr_lines: list[str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


def start_daemon_process(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 30) -> DaemonProcess:
    cmd = [sys.executable, "-m", "roost", "--port", "0", "--log-format", "json", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        raw = proc.stderr.readline()
        if not raw:
            break
        line = raw.decode(errors="replace").rstrip("\n")
        lines.append(line)
        m = _LISTEN_RE.search(line)
        if m:
            # Keep draining stderr so the daemon never blocks on a full pipe.
            import threading

            def drain() -> None:
                assert proc.stderr is not None
                for more in proc.stderr:
                    lines.append(more.decode(errors="replace").rstrip("\n"))

            threading.Thread(target=drain, daemon=True).start()
            return DaemonProcess(proc=proc, port=int(m.group(2)), stderr_lines=lines)
    proc.kill()
    proc.wait()
    raise AssertionError("daemon did not start:\n" + "\n".join(lines))


@pytest.fixture
def daemon_processes() -> Iterator[list[DaemonProcess]]:
    procs: list[DaemonProcess] = []
    yield procs
    for p in procs:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()
