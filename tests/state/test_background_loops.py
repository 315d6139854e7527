"""The daemon's periodic tasks (retention sweep, slot and lease expiry) outlive any failure.

A task that lets one exception out is dead for the rest of the daemon's life and nothing says so.
Each test here makes one step fail through an injected dependency (a store double that fails its
first checkpoint, a clock that fails its first reading) and checks that the loop goes on, and that
the failure is one log line with the error's class and no traceback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import structlog

from roost.services.periodic import every
from roost.services.referee.service import Referee
from roost.services.retention import Retention
from roost.state.config import Config
from roost.state.keys import KeyHolder, KeyRing
from roost.state.sessions import SessionTable
from roost.state.settings import Settings
from roost.state.store import Op, Store
from roost.system.blocking import BlockingExecutor
from tests.support.launcher import wait_for


class FailingFirstCheckpoint:
    """A store for the sweep whose first checkpoint raises what no store error covers."""

    def __init__(self) -> None:
        self.prunes = 0
        self.checkpoints = 0

    async def prune_rows(self, ops: Sequence[Op]) -> list[tuple[int, list[tuple[Any, ...]]]]:
        self.prunes += 1
        return [(0, [])] * len(ops)

    async def checkpoint(self) -> None:
        self.checkpoints += 1
        if self.checkpoints == 1:
            raise RuntimeError("checkpoint went wrong: msc1.secret-looking-text")


class ClockFailingOnce:
    """Wall-clock milliseconds, except that the first reading raises."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        if self.calls == 1:
            raise OSError("the clock could not be read")
        return 1_000_000 + self.calls


@pytest.fixture
def executor() -> Iterator[BlockingExecutor]:
    ex = BlockingExecutor()
    yield ex
    ex.shutdown()


def _config(tmp_path: Path, **values: Any) -> Config:
    return Config.model_validate({"registry_path": tmp_path, "state_dir": tmp_path / "state", **values})


def _failures(logs: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == event]


async def test_a_step_that_raises_is_one_line_and_the_loop_goes_on() -> None:
    steps: list[int] = []

    async def step() -> None:
        steps.append(len(steps))
        if len(steps) == 1:
            raise KeyError("text that must not reach the log")

    with structlog.testing.capture_logs() as logs:
        task = asyncio.get_running_loop().create_task(every(lambda: 0.001, step, failed="x_failed", logger="t"))
        try:
            await wait_for(lambda: len(steps) >= 3)
        finally:
            task.cancel()
    assert _failures(logs, "x_failed") == [{"event": "x_failed", "error": "KeyError", "log_level": "error"}]
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_retention_sweep_survives_a_failing_checkpoint(tmp_path: Path, executor: BlockingExecutor) -> None:
    store = FailingFirstCheckpoint()
    settings = Settings(_config(tmp_path, retention_sweep_secs=0.01), executor=executor)
    retention = Retention(settings=settings, table=SessionTable(), store=store, clock=lambda: 1_000_000)
    with structlog.testing.capture_logs() as logs:
        task = asyncio.get_running_loop().create_task(retention.run_forever())
        try:
            await wait_for(lambda: retention.last is not None)  # a whole sweep after the failed one
        finally:
            task.cancel()
    assert store.checkpoints >= 2
    (failed,) = _failures(logs, "retention_sweep_failed")
    assert failed["error"] == "RuntimeError"
    assert "exc_info" not in failed and "exception" not in failed and "detail" not in failed


async def test_the_expiry_sweep_survives_a_failing_tick(tmp_path: Path, executor: BlockingExecutor) -> None:
    cfg = _config(tmp_path, ephemeral_keys=True)
    settings = Settings(cfg, executor=executor)
    store = Store(None, executor)
    await store.open()
    clock = ClockFailingOnce()
    referee = Referee(
        settings=settings,
        table=SessionTable(),
        store=store,
        keys=KeyHolder(KeyRing.ephemeral(), state_dir=None, executor=executor),
        executor=executor,
        clock=clock,
    )
    try:
        with structlog.testing.capture_logs() as logs:
            task = asyncio.get_running_loop().create_task(referee.expire_forever(every_secs=0.001))
            try:
                await wait_for(lambda: clock.calls >= 3 or task.done())
                assert not task.done()
            finally:
                task.cancel()
    finally:
        await store.close()
    (failed,) = _failures(logs, "expiry_sweep_failed")
    assert failed["error"] == "OSError" and "exception" not in failed
