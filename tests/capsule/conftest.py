"""Fixtures for running ``roost-capsule`` as a real subprocess next to an in-process daemon.

Every process is killed at teardown, and the teardown fails if anything that ran in the test's
directories is still alive. The helpers are in :mod:`tests.support.capsules`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.capsules import (
    CAPSULE_CMD,
    CapsuleProc,
    Capsules,
    add_examples,
    base_env,
    leftovers,
    trace_events,
    wait_for,
)

__all__ = ["CAPSULE_CMD", "CapsuleProc", "Capsules", "add_examples", "base_env", "capsules", "trace_events", "wait_for"]


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
