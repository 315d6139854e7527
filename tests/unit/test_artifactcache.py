"""The referee's artifact cache with a counting registry double: one resolve per window and per burst."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from roost.core.manifest import parse_manifest
from roost.services.referee.resolvecache import ArtifactCache
from roost.state.registry import Artifact, ArtifactNotFound
from roost.system.blocking import BlockingExecutor

MANIFEST = parse_manifest("name: worker\nversion: 0.1.0\ncapabilities: {network: {allow: [example.com]}}\n")


class CountingRegistry:
    """Answers ``resolve`` like the registry does, after ``gate`` opens; counts each call."""

    def __init__(self) -> None:
        self.calls = 0
        self.digest = "a" * 64
        self.missing = False
        self.gate = threading.Event()
        self.gate.set()

    def resolve(self, name: str, version: str) -> Artifact:
        self.calls += 1
        self.gate.wait(5)
        if self.missing:
            raise ArtifactNotFound(name, version, "not published")
        return Artifact(name, version, self.digest, Path("/nonexistent"), MANIFEST)


def make(window: float = 60.0) -> tuple[ArtifactCache, CountingRegistry, list[float]]:
    reg = CountingRegistry()
    setting = [window]
    cache = ArtifactCache(lambda: reg, BlockingExecutor(), lambda: setting[0])  # type: ignore[arg-type,return-value]
    return cache, reg, setting


async def test_an_answer_is_reused_within_the_window() -> None:
    cache, reg, _ = make()
    assert cache.fresh("worker", "0.1.0") is None
    first = await cache.resolve("worker", "0.1.0")
    again = await cache.resolve("worker", "0.1.0")
    assert first is again and reg.calls == 1
    assert cache.fresh("worker", "0.1.0") is first
    assert ("worker", "0.1.0") in cache.resolved


async def test_a_burst_waits_for_one_resolution() -> None:
    cache, reg, _ = make()
    reg.gate.clear()
    waiters = [asyncio.ensure_future(cache.resolve("worker", "0.1.0")) for _ in range(20)]
    await asyncio.sleep(0.05)
    assert ("worker", "0.1.0") in cache.resolving
    reg.gate.set()
    got = await asyncio.gather(*waiters)
    assert reg.calls == 1 and all(a is got[0] for a in got)
    assert cache.resolving == {}


async def test_a_lapsed_window_resolves_again_and_a_changed_setting_applies_at_once() -> None:
    cache, reg, setting = make(window=60.0)
    await cache.resolve("worker", "0.1.0")
    setting[0] = 0.0
    assert cache.fresh("worker", "0.1.0") is None
    reg.digest = "b" * 64
    assert (await cache.resolve("worker", "0.1.0")).sha256 == "b" * 64
    assert reg.calls == 2


async def test_past_half_the_window_a_refresh_starts_in_the_background() -> None:
    cache, reg, setting = make()
    old = await cache.resolve("worker", "0.1.0")
    await asyncio.sleep(0.1)
    # A window just under twice the answer's age: past half of it, well inside the whole.
    setting[0] = (time.monotonic() - cache.resolved[("worker", "0.1.0")][1]) * 1.99
    reg.digest = "c" * 64
    assert cache.fresh("worker", "0.1.0") is old  # still within the window: answered at once
    for _ in range(100):
        if reg.calls == 2 and not cache.resolving:
            break
        await asyncio.sleep(0.01)
    assert reg.calls == 2
    setting[0] = 60.0
    hit = cache.fresh("worker", "0.1.0")
    assert hit is not None and hit.sha256 == "c" * 64


async def test_forgetting_mid_flight_answers_the_waiter_but_keeps_nothing() -> None:
    cache, reg, _ = make()
    reg.gate.clear()
    flight = asyncio.ensure_future(cache.resolve("worker", "0.1.0"))
    await asyncio.sleep(0.05)
    cache.forget()
    reg.gate.set()
    assert (await flight).name == "worker"
    assert cache.resolved == {}


async def test_a_registry_error_drops_the_entry_and_reaches_every_waiter() -> None:
    cache, reg, setting = make()
    await cache.resolve("worker", "0.1.0")
    setting[0] = 0.0
    reg.missing = True
    with pytest.raises(ArtifactNotFound):
        await cache.resolve("worker", "0.1.0")
    assert cache.resolved == {} and cache.resolving == {}


async def test_the_registry_is_read_at_each_resolution() -> None:
    regs = [CountingRegistry(), CountingRegistry()]
    current = [regs[0]]
    cache = ArtifactCache(lambda: current[0], BlockingExecutor(), lambda: 60.0)  # type: ignore[arg-type,return-value]
    await cache.resolve("worker", "0.1.0")
    current[0] = regs[1]
    cache.forget()
    await cache.resolve("worker", "0.1.0")
    assert [r.calls for r in regs] == [1, 1]


def test_an_envelope_is_lowered_once_per_digest() -> None:
    cache, _, _ = make()
    a = Artifact("worker", "0.1.0", "d" * 64, Path("/x"), MANIFEST)
    b = Artifact("worker", "0.1.1", "d" * 64, Path("/y"), MANIFEST)
    env: Any = cache.envelope_of(a)
    assert cache.envelope_of(b) is env
    assert env.network_allow == ("example.com",)
