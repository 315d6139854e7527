"""``roost-capsule`` as a real subprocess next to an in-process daemon, and reading its trace.

The daemon runs in the test's event loop, so capsules are started with asyncio subprocesses
(a blocking wait would freeze the daemon they register with).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from roost.state.registry.packing import pack_capsule
from tests.support.registry import EXAMPLES, RegistryBuilder

__all__ = [
    "CAPSULE_CMD",
    "CapsuleProc",
    "Capsules",
    "add_examples",
    "base_env",
    "capsules",
    "leftovers",
    "trace_events",
    "wait_for",
]

CAPSULE_CMD = [sys.executable, "-m", "roost.capsule"]


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
    env.update(extra)
    return env


def add_examples(registry: RegistryBuilder, *names: str) -> None:
    for name in names or ("echo", "worker", "sleeper", "crasher", "orchestrator"):
        pack_capsule(EXAMPLES / "capsules" / name, registry.root)


@dataclass
class CapsuleProc:
    proc: asyncio.subprocess.Process
    workdir: Path
    ready: dict[str, Any] | None
    stderr: list[str] = field(default_factory=list)
    stdout_rest: list[str] = field(default_factory=list)
    _pumps: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def session_id(self) -> str:
        assert self.ready is not None
        return str(self.ready["session_id"])

    @property
    def url(self) -> str:
        assert self.ready is not None
        return str(self.ready["capsule_url"])

    @property
    def trace(self) -> Path:
        return self.workdir / ".murmur" / self.session_id / "trace.jsonl"

    async def wait(self, within: float = 30) -> int:
        rc = await asyncio.wait_for(self.proc.wait(), within)
        for t in self._pumps:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(t, 5)
        return rc

    async def terminate(self, within: float = 15) -> int:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        return await self.wait(within)


class Capsules:
    def __init__(self) -> None:
        self.started: list[CapsuleProc] = []

    async def start(
        self,
        coords: str,
        workdir: Path,
        *,
        registry: Path,
        env: dict[str, str] | None = None,
        stdin_line: str | None = None,
        pass_fds: tuple[int, ...] = (),
        expect_ready: bool = True,
        json_flag: bool = True,
        ready_within: float = 30,
    ) -> CapsuleProc:
        args = [*CAPSULE_CMD, "run", coords, "--workdir", str(workdir), "--registry-path", str(registry)]
        if json_flag:
            args.append("--json")
        if stdin_line is not None:
            args.append("--spawn-grant-stdin")
        proc = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env if env is not None else base_env(),
            pass_fds=pass_fds,
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        if stdin_line is not None:
            proc.stdin.write(stdin_line.encode() + b"\n")
            await proc.stdin.drain()
        proc.stdin.close()
        cp = CapsuleProc(proc=proc, workdir=workdir, ready=None)
        self.started.append(cp)

        async def pump_err() -> None:
            assert proc.stderr is not None
            async for line in proc.stderr:
                cp.stderr.append(line.decode(errors="replace").rstrip("\n"))

        cp._pumps.append(asyncio.create_task(pump_err()))
        if expect_ready and json_flag:
            line = await asyncio.wait_for(proc.stdout.readline(), ready_within)
            assert line, "no ready line; stderr:\n" + "\n".join(cp.stderr)
            cp.ready = json.loads(line)

        async def pump_out() -> None:
            assert proc.stdout is not None
            async for line in proc.stdout:
                cp.stdout_rest.append(line.decode(errors="replace"))

        cp._pumps.append(asyncio.create_task(pump_out()))
        return cp

    async def close(self) -> None:
        for cp in self.started:
            if cp.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    cp.proc.kill()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(cp.proc.wait(), 10)
            for t in cp._pumps:
                t.cancel()


def leftovers(root: Path) -> list[str]:
    """Live capsule hosts naming ``root``, and live processes whose cwd is under it (entrypoints).

    Daemon-owned helpers (the launcher's keeper) are the daemon fixture's to stop, not ours.
    """
    found = []
    me = os.getpid()
    for p in psutil.process_iter(["pid", "cmdline", "cwd", "status"]):
        try:
            if p.info["pid"] == me or p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmd = " ".join(p.info["cmdline"] or [])
            cwd = p.info["cwd"] or ""
        except (psutil.Error, OSError):
            continue
        if ("roost.capsule" in cmd and str(root) in cmd) or cwd.startswith(str(root)):
            found.append(f"{p.info['pid']} {cmd}")
    return found


async def wait_for(predicate: Any, within: float = 20, interval: float = 0.05) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return
        await asyncio.sleep(interval)
    raise AssertionError("condition not met in time")


def trace_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture
async def capsules(tmp_path: Path) -> AsyncIterator[Capsules]:
    c = Capsules()
    yield c
    await c.close()
    deadline = time.monotonic() + 10
    left = leftovers(tmp_path)
    while left and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        left = leftovers(tmp_path)
    for entry in left:  # clean up before failing, so one failure does not leak into the next test
        with contextlib.suppress(Exception):
            os.kill(int(entry.split()[0]), signal.SIGKILL)
    assert not left, f"processes left behind: {left}"
