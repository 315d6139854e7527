"""The child side of the lifeline: strict validation, and EOF ending a real sleeper session."""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from pathlib import Path

import pytest

from roost.capsule.lifeline import LifelineError, take_lifeline
from tests.support.capsules import Capsules, add_examples, base_env, trace_events, wait_for
from tests.support.registry import RegistryBuilder
from tests.trace_checks import assert_trace_guarantees


def test_blank_means_no_lifeline() -> None:
    assert take_lifeline(None) is None
    assert take_lifeline("  ") is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("abc", "it is not a decimal descriptor number"),
        ("-4", "it is not a decimal descriptor number"),
        ("1", "descriptor 1 is a standard stream, and a lifeline is 3 or above"),
        ("987", "descriptor 987 is not open"),
    ],
)
def test_refusals(value: str, reason: str) -> None:
    with pytest.raises(LifelineError) as exc:
        take_lifeline(value)
    assert str(exc.value) == reason


def test_regular_file_and_write_end_refused(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_CREAT | os.O_RDONLY)
    r, w = os.pipe()
    try:
        with pytest.raises(
            LifelineError, match=f"descriptor {fd} is a regular file, and a lifeline is a pipe's read end"
        ):
            take_lifeline(str(fd))
        with pytest.raises(
            LifelineError, match=f"descriptor {w} is open for writing, and a child holds only a read end"
        ):
            take_lifeline(str(w))
        os.set_inheritable(r, True)
        assert take_lifeline(str(r)) == r
        assert fcntl.fcntl(r, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    finally:
        for x in (fd, r, w):
            os.close(x)


async def test_bad_lifeline_refuses_launch(registry: RegistryBuilder, capsules: Capsules, tmp_path: Path) -> None:
    add_examples(registry, "sleeper")
    env = base_env(MURMUR_SPAWNER_LIFELINE="abc")
    cp = await capsules.start("sleeper@0.1.0", tmp_path / "w", registry=registry.root, env=env, expect_ready=False)
    assert await cp.wait() == 1
    assert cp.stderr == [
        "roost-capsule: MURMUR_SPAWNER_LIFELINE does not carry this session's spawner lifeline: it is not a decimal "
        "descriptor number; a delegated child that cannot hear its spawner would keep running after the session "
        "that delegated to it has ended, so the launch is refused"
    ]
    assert not (tmp_path / "w" / ".murmur").exists()


async def test_lifeline_eof_ends_sleeper(registry: RegistryBuilder, capsules: Capsules, tmp_path: Path) -> None:
    add_examples(registry, "sleeper")
    work = tmp_path / "w"
    work.mkdir()
    (work / "task.md").write_text("3600")
    r, w = os.pipe()
    env = base_env(MURMUR_SPAWNER_LIFELINE=str(r))
    try:
        cp = await capsules.start("sleeper@0.1.0", work, registry=registry.root, env=env, pass_fds=(r,))
    finally:
        os.close(r)
    await wait_for(lambda: any("sleeping" in line for line in cp.stderr + cp.stdout_rest) or _started(cp.trace))
    await asyncio.sleep(0.3)  # let the entrypoint reach its sleep
    t0 = time.monotonic()
    os.close(w)
    rc = await cp.wait(25)
    elapsed = time.monotonic() - t0
    assert rc == 143
    assert elapsed < 5, f"lifeline teardown took {elapsed:.1f}s"
    recs = assert_trace_guarantees(cp.trace)
    kinds = [r["event_type"] for r in recs]
    assert kinds == ["session_start", "task_start", "spawner_ended", "task_end", "session_end"]
    ended = recs[2]
    assert "spawned_by" not in ended and "delegation_id" not in ended  # launched without MURMUR_SPAWNER
    assert recs[3]["exit_status"] == "canceled"
    assert recs[4]["exit_status"] == "canceled"
    assert not (work / "completion.json").exists()
    assert any("spawner lifeline closed" in line for line in cp.stderr)


def _started(trace: Path) -> bool:
    return any(r["event_type"] == "task_start" for r in trace_events(trace))
