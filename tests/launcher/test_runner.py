"""The job runner against a fake process backend: every way a child's start and stop can go."""

from __future__ import annotations

import asyncio
import json

from roost.backends.base import ChildDir, ChildHandle, ProcessBackend, StartSpec
from roost.core import ids
from roost.core.manifest import ResourceCaps
from roost.services.launcher.runner import JobRunner, NotReady, Ready, parse_ready
from tests.launcher.fake_backend import FakeBackend, FakeChild

SESSION = "ses_" + "a" * 16


def _spawn(coro: object) -> asyncio.Task[object]:
    return asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]


async def _runner(backend: FakeBackend, **child: str) -> tuple[JobRunner, FakeChild]:
    job_id = ids.job_id()
    dir = ChildDir(job_id, f"/tmp/{job_id}", None, None)
    await backend.prepare_dir(dir, None, fresh=True)
    backend.next_child = dict(child)
    runner = JobRunner(backend, dir, _spawn)
    spec = StartSpec(
        dir=dir,
        argv=["capsule"],
        env={},
        cwd=dir.workdir,
        stdin=b"approval\n",
        uid=None,
        resources=ResourceCaps(),
        limits_in_child=False,
        capsule="t@0.1.0",
        instance="i",
    )
    await runner.start(spec)
    return runner, backend.children[job_id]


def _ready(url: str | None = "127.0.0.1:9") -> bytes:
    return json.dumps({"session_id": SESSION, "capsule_url": url}).encode() + b"\n"


async def test_the_fake_is_a_process_backend() -> None:
    """The typed assignments are what holds the fake to the interface (mypy checks this file:
    pyproject's [tool.mypy] files); isinstance only sees the attribute names."""
    backend: ProcessBackend = FakeBackend()
    child: ChildHandle = FakeChild("job_1", 4242)
    assert isinstance(backend, ProcessBackend) and isinstance(child, ChildHandle)


async def test_ready_then_output_drains_into_the_log() -> None:
    backend = FakeBackend()
    runner, child = await _runner(backend)
    assert child.stdin == b"approval\n"
    child.say(_ready())
    assert await runner.handshake(5) == Ready(SESSION, "http://127.0.0.1:9")
    ticks: list[str] = []
    runner.run(60, lambda: ticks.append("deadline"))
    child.say(b"later line\n")
    child.say(b"x" * (70 * 1024) + b"\n")  # too long: dropped, the drain goes on
    child.say(b"last\n")
    child.exit("exit status 0")
    assert await runner.exited() == "exit status 0"
    await runner.settle()
    assert backend.dirs[runner.dir.job_id].log == ["later line", "last"]
    runner.close()
    assert child.closed and ticks == []


async def test_a_first_line_that_is_no_ready_line() -> None:
    backend = FakeBackend()
    runner, child = await _runner(backend)
    backend.dirs[runner.dir.job_id].stderr = ["boom", "bad config"]
    child.say(b"hello\n")
    got = await runner.handshake(5)
    assert isinstance(got, NotReady)
    assert got.why == "the child's first stdout line was not a ready line carrying a session_id"
    assert got.reason == got.why + "; its last stderr lines were:\nboom\nbad config"
    assert (got.status, got.timed_out, got.containment) == ("killed by SIGKILL", False, False)
    assert child.signals == ["SIGKILL"]


async def test_exit_before_ready() -> None:
    backend = FakeBackend()
    runner, child = await _runner(backend)
    child.exit("exit status 3")
    got = await runner.handshake(5)
    assert isinstance(got, NotReady)
    assert got.reason == "the child ended before it reported ready (exit status 3)"
    assert (got.status, got.timed_out) == ("exit status 3", False)
    assert child.signals == []  # already gone: nothing to kill


async def test_a_ready_line_written_just_before_the_exit_still_counts() -> None:
    backend = FakeBackend()
    runner, child = await _runner(backend)
    child.say(_ready(None))
    child.exit("exit status 0")
    assert await runner.handshake(5) == Ready(SESSION, None)


async def test_no_ready_line_within_the_launch_bound() -> None:
    backend = FakeBackend()
    runner, child = await _runner(backend)
    got = await runner.handshake(0.05)
    assert isinstance(got, NotReady)
    assert got.why == "the child did not report ready within 0.05s (launch bound), so it was killed"
    assert (got.timed_out, got.status) == (True, "killed by SIGKILL")
    assert child.signals == ["SIGKILL"]


async def test_a_containment_refusal_is_said_as_is() -> None:
    backend = FakeBackend()
    runner, child = await _runner(backend)
    sentence = "E-CAP-003: containment class 'strict' is not available on this host"
    backend.dirs[runner.dir.job_id].stderr = ["starting", f"roost-capsule: {sentence}"]
    child.exit("exit status 78")
    got = await runner.handshake(5)
    assert isinstance(got, NotReady)
    assert (got.reason, got.containment) == (sentence, True)


async def test_an_overlong_first_line() -> None:
    backend = FakeBackend()
    runner, child = await _runner(backend)
    child.say(b"{" * (65 * 1024) + b"\n")
    got = await runner.handshake(5)
    assert isinstance(got, NotReady) and got.why == "the child's first stdout line was longer than 64 KiB"


async def test_the_deadline_calls_back() -> None:
    backend = FakeBackend()
    runner, child = await _runner(backend)
    child.say(_ready())
    await runner.handshake(5)
    passed = asyncio.Event()
    runner.run(0.05, passed.set)
    await asyncio.wait_for(passed.wait(), 5)
    assert await runner.stop(0.5) is False  # the launcher's answer to a deadline: stop it
    assert child.signals == ["SIGTERM"] and await runner.exited() == "killed by SIGTERM"


async def test_a_closed_runner_never_calls_its_deadline() -> None:
    backend = FakeBackend()
    runner, _ = await _runner(backend)
    called: list[int] = []
    runner.run(0.05, lambda: called.append(1))
    runner.close()
    await asyncio.sleep(0.15)
    assert called == []


async def test_cancel_with_grace_kills_a_child_that_ignores_sigterm() -> None:
    backend = FakeBackend()
    runner, child = await _runner(backend, on_term="ignore")
    assert await runner.stop(0.05) is True
    assert child.signals == ["SIGTERM", "SIGKILL"]
    assert await runner.exited() == "killed by SIGKILL"
    assert await runner.stop(0.05) is False  # stopping a stopped child does nothing


async def test_parent_end_closes_the_lifeline_and_the_child_ends_itself() -> None:
    backend = FakeBackend()
    runner, child = await _runner(backend)
    assert runner.dir.job_id in await backend.held_lifelines()
    runner.parent_ended(0.05)
    assert runner.dir.job_id not in await backend.held_lifelines()
    assert await runner.exited() == "exit status 0"
    await asyncio.sleep(0.1)
    assert child.signals == []  # it went by itself: the grace timer found nothing to force


async def test_parent_end_forces_out_a_child_that_ignores_its_lifeline() -> None:
    backend = FakeBackend()
    runner, child = await _runner(backend, on_lifeline="ignore")
    runner.parent_ended(0.05)
    assert await asyncio.wait_for(runner.exited(), 5) == "killed by SIGKILL"
    assert child.signals == ["SIGKILL"]


async def test_an_adopted_child_has_no_stdout_here() -> None:
    backend = FakeBackend()
    first, child = await _runner(backend)
    again = JobRunner(backend, first.dir, _spawn)
    again.adopt(child.ref)
    assert again.pid == child.pid and again.alive
    child.exit("exit status unknown: the process was not started by this daemon instance")
    assert (await again.exited()).startswith("exit status unknown")


def test_ready_lines() -> None:
    assert parse_ready(_ready("http://h:1")) == Ready(SESSION, "http://h:1")
    assert parse_ready(json.dumps({"session_id": SESSION, "url": "h:2"}).encode()) == Ready(SESSION, "http://h:2")
    assert parse_ready(json.dumps({"session_id": SESSION, "capsule_url": ""}).encode()) == Ready(SESSION, None)
    assert parse_ready(b'{"session_id": "nope"}') is None
    assert parse_ready(b"[1]") is None
    assert parse_ready(b"not json") is None
