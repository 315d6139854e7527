"""Shared fixtures: real registries on disk, real daemons on ephemeral loopback ports.

``daemon_factory`` runs a :class:`roost.daemon.compose.Roost` inside the test's event loop (real TCP,
real SQLite, real registry) with an injectable clock; ``daemon_processes`` collects ``mur-roost``
child processes (:func:`tests.support.daemon.start_daemon_process`) and kills what is left. The
helpers themselves live in ``tests/support/`` so each exists once, whatever imports it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, settings

from roost.daemon.compose import Roost
from roost.state.config import Config
from tests.support.daemon import DaemonProcess, FakeClock, RunningDaemon
from tests.support.registry import RegistryBuilder

# The suite runs on a shared 2-core machine: hypothesis's timing checks (a per-example deadline,
# "data generation is too slow") measure the machine's load, not the code, so they are off.
settings.register_profile("roost", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("roost")


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory under /tmp that every uid can enter (pytest's own tmp dirs are root's 0700):
    for tests that act as another uid (tests/trust/attacker.py)."""
    d = Path(tempfile.mkdtemp(prefix="roost-scratch-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def registry(tmp_path: Path) -> RegistryBuilder:
    root = tmp_path / "registry"
    root.mkdir()
    return RegistryBuilder(root=root, src=tmp_path / "capsule-src")


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
        d = RunningDaemon(roost=roost, url=roost.lifecycle.url, http=http, clock=clk)
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


@pytest.fixture
def daemon_processes() -> Iterator[list[DaemonProcess]]:
    procs: list[DaemonProcess] = []
    yield procs
    for p in procs:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()
