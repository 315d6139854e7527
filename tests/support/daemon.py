"""Real daemons for tests: one inside the test's event loop, or ``mur-roost`` as a child process.

:class:`RunningDaemon` wraps a :class:`roost.daemon.compose.Roost` started in the test's loop (real TCP,
real SQLite, real registry) with a :class:`FakeClock`; :func:`start_daemon_process` runs the CLI
as a child process for tests of flags, signals and restarts. :class:`DaemonReads` is what tests
read of an in-process daemon beyond its services (its configuration, keys, ports and URLs), each
from the service that owns it.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from roost.daemon.compose import Roost
from roost.state.config import Config
from roost.state.keys import KeyRing
from roost.state.registry import Registry

__all__ = [
    "DaemonFactory",
    "DaemonProcess",
    "DaemonReads",
    "FakeClock",
    "InProcessDaemon",
    "RunningDaemon",
    "start_daemon_process",
]


class FakeClock:
    """Wall-clock milliseconds that only move when a test moves them."""

    def __init__(self, start_ms: int | None = None) -> None:
        self.now = start_ms if start_ms is not None else int(time.time() * 1000)

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


class DaemonReads:
    """What tests read and set of an in-process daemon that is not a service of its own: the
    daemon object only composes its services, so each answer comes from the one that owns it."""

    roost: Roost

    @property
    def config(self) -> Config:
        return self.roost.settings.config

    @property
    def registry(self) -> Registry:
        return self.roost.settings.registry

    @property
    def keys(self) -> KeyRing:
        return self.roost.key_holder.ring

    @property
    def config_loader(self) -> Callable[[], Config] | None:
        return self.roost.settings.loader

    @config_loader.setter
    def config_loader(self, loader: Callable[[], Config] | None) -> None:
        self.roost.settings.loader = loader

    @property
    def stop_callback(self) -> Callable[[str], None] | None:
        return self.roost.lifecycle.stop_callback

    @stop_callback.setter
    def stop_callback(self, callback: Callable[[str], None] | None) -> None:
        self.roost.lifecycle.stop_callback = callback

    @property
    def port(self) -> int | None:
        return self.roost.lifecycle.port

    @property
    def network_port(self) -> int | None:
        return self.roost.lifecycle.network_port

    @property
    def network_url(self) -> str | None:
        return self.roost.lifecycle.network_url

    @property
    def advertise_url(self) -> str:
        return self.roost.lifecycle.advertise_url


class InProcessDaemon(DaemonReads):
    """A started :class:`Roost` on its own (no client session, no fake clock); ``url`` is its
    local URL, as :class:`RunningDaemon`'s."""

    def __init__(self, roost: Roost) -> None:
        self.roost = roost
        self.url = roost.lifecycle.url


@dataclass
class RunningDaemon(DaemonReads):
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


def start_daemon_process(
    args: list[str], *, env: dict[str, str] | None = None, timeout: float = 30, prefix: Sequence[str] = ()
) -> DaemonProcess:
    """``mur-roost`` as a process of its own; ``prefix`` runs it through a command that execs it
    (the same pid), e.g. ``unshare`` to give it a mount namespace of its own."""
    cmd = [*prefix, sys.executable, "-m", "roost", "--port", "0", "--log-format", "json", *args]
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
            def drain() -> None:
                assert proc.stderr is not None
                for more in proc.stderr:
                    lines.append(more.decode(errors="replace").rstrip("\n"))

            threading.Thread(target=drain, daemon=True).start()
            return DaemonProcess(proc=proc, port=int(m.group(2)), stderr_lines=lines)
    proc.kill()
    proc.wait()
    raise AssertionError("daemon did not start:\n" + "\n".join(lines))
