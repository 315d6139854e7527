"""The launcher, its starter and its completer over the fake process backend.

The launcher is composed as the daemon composes it (real referee, session table, SQLite store,
executor, events and metrics) but with :class:`tests.launcher.fake_backend.FakeBackend` behind
the process-backend seam, so each test drives a child through its start, ready line, exit or
stop by hand, and reads what the launcher did to the child, its directory and its job record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from a2a.client import A2AClient
from roost.backends.base import StartFailed
from roost.core.completion import OPERATOR_CANCEL_DETAIL, CompletionRecord
from roost.core.errors import BadGateway, Refused
from roost.core.jobs import Job
from roost.core.refusals import DRAINING_LAUNCH, refusals
from roost.core.requests import LaunchRequest
from roost.http.bodies.jobs import parse_launch
from roost.http.bodies.referee import parse_register
from roost.observe.events import EventBus
from roost.observe.metrics import Metrics
from roost.observe.tracesink import TraceFiles
from roost.services.launcher.context import LaunchServices
from roost.services.launcher.service import Launcher
from roost.services.referee.registration import RegisterCaller
from roost.services.referee.service import Referee
from roost.state.config import Config
from roost.state.keys import KeyHolder, KeyRing
from roost.state.repos.jobs import JobRepository
from roost.state.sessions import SessionRecord, SessionTable
from roost.state.settings import Settings
from roost.state.store import Store
from roost.system.blocking import BlockingExecutor
from tests.launcher.fake_backend import FakeBackend, FakeChild
from tests.support.registry import RegistryBuilder

CHILD_SESSION = "ses_" + "c" * 16
ECHO = LaunchRequest(name="echo", version="0.1.0", task={"objective": "hi"})


def jobs_gauge(metrics: Metrics) -> dict[str, int]:
    """The ``roost_jobs`` gauge by state, its zero states left out (as ``counts_by_state``)."""
    found = {}
    for family in metrics.registry.collect():
        if family.name == "roost_jobs":
            found = {sample.labels["state"]: int(sample.value) for sample in family.samples if sample.value}
    return found


def ready(session_id: str = CHILD_SESSION) -> bytes:
    return json.dumps({"session_id": session_id, "capsule_url": "http://127.0.0.1:9"}).encode() + b"\n"


@dataclass
class Harness:
    launcher: Launcher
    backend: FakeBackend
    referee: Referee
    store: Store
    metrics: Metrics
    services: LaunchServices
    a2a: A2AClient
    keys: KeyHolder
    traces: TraceFiles

    async def launch(self, req: LaunchRequest = ECHO, credential: str | None = None) -> Job:
        return await self.launcher.launch(req, credential, loopback=True, uid=os.geteuid(), operator=True)

    def restarted(self) -> Launcher:
        """A second launcher over the same store, table and backend, with metrics of its own:
        what a restarted daemon composes (its start reconciles what this one left running)."""
        services = replace(self.services, metrics=Metrics())
        return Launcher(services, trace=self.traces.write, a2a=self.a2a, door_key=self.keys.door_key_for)

    def child(self, job: Job) -> FakeChild:
        return self.backend.children[job.job_id]

    async def finished(self, job: Job) -> Job:
        await asyncio.wait_for(job.done.wait(), 30)
        return job


async def compose(registry: RegistryBuilder, tmp_path: Path, **config: object) -> AsyncIterator[Harness]:
    values: dict[str, object] = {
        "port": 0,
        "registry_path": registry.root,
        "state_dir": tmp_path / "state",
        "ephemeral_keys": True,
        "spawn_allow": ("echo", "boss"),
        "uid_max_live_sessions": 10,
        "uid_max_live_jobs": 10,
        "log_format": "json",
    }
    values.update(config)
    executor = BlockingExecutor()
    settings = Settings(Config.model_validate(values), executor=executor)
    table, metrics, events = SessionTable(), Metrics(), EventBus()
    keys = KeyHolder(KeyRing.ephemeral(), state_dir=None, executor=executor)
    store = Store(None, executor)
    await store.open()
    referee = Referee(settings=settings, table=table, store=store, keys=keys, executor=executor)
    backend = FakeBackend()
    traces = TraceFiles(executor, None)
    a2a = A2AClient(connect_timeout=1.0, total_timeout=2.0)
    services = LaunchServices(
        config=lambda: settings.config,
        clock=referee.clock,
        referee=referee,
        table=table,
        store=store,
        executor=executor,
        metrics=metrics,
        events=events,
        backend=backend,
        url=lambda: "http://127.0.0.1:1",
    )
    launcher = Launcher(services, trace=traces.write, a2a=a2a, door_key=keys.door_key_for)
    launcher.delivery_window_secs = 0.5
    await launcher.start()
    try:
        yield Harness(launcher, backend, referee, store, metrics, services, a2a, keys, traces)
    finally:
        await launcher.stop()
        await a2a.close()
        await traces.close_all()
        await store.close()


@pytest.fixture
async def harness(registry: RegistryBuilder, tmp_path: Path) -> AsyncIterator[Harness]:
    registry.add("echo")
    registry.add("boss", capabilities={"spawn": {"allow": ["echo"]}})
    async for h in compose(registry, tmp_path, max_live_capsules=2):
        yield h


async def test_a_top_level_launch_is_running_once_its_child_says_ready(harness: Harness) -> None:
    harness.backend.next_lines = [ready()]
    job = await harness.launch()
    assert (job.state, job.session_id, job.capsule_url) == ("running", CHILD_SESSION, "http://127.0.0.1:9")
    assert harness.backend.dirs[job.job_id].task == ECHO.task
    child = harness.child(job)
    assert child.stdin == b"" and job.pid == child.pid  # a top-level child on this host needs no approval
    assert harness.launcher.jobs[job.job_id] is job and harness.launcher.counts_by_state() == {"running": 1}
    assert job.job_id in harness.backend.lifelines


async def test_the_childs_own_record_is_kept_and_the_job_completes(harness: Harness) -> None:
    harness.backend.next_lines = [ready()]
    job = await harness.launch()
    own = CompletionRecord(job.delegation_id, "echo", "0.1.0", CHILD_SESSION, "ok", job.workdir, 5, "child")
    harness.backend.dirs[job.job_id].completion = own
    harness.child(job).exit("exit status 0")
    await harness.finished(job)
    assert job.state == "complete" and job.exit_status == "exit status 0"
    kept = harness.backend.dirs[job.job_id].completion
    assert kept is not None and (kept.reported_by, kept.status) == ("child", "ok")
    assert (job.job_id, job.pid) in harness.backend.finished_off
    assert job.job_id not in harness.backend.lifelines
    await harness.store.commit([])  # after everything enqueued before it
    stored = await JobRepository(harness.store).get(job.job_id)
    assert stored is not None and stored.state == "complete"


async def test_a_child_that_exits_without_a_record_is_recorded_crashed_by_the_launcher(harness: Harness) -> None:
    harness.backend.next_lines = [ready()]
    job = await harness.launch()
    harness.backend.dirs[job.job_id].stderr = ["Traceback (most recent call last):", "ZeroDivisionError"]
    harness.child(job).exit("exit status 3")
    await harness.finished(job)
    rec = harness.backend.dirs[job.job_id].completion
    assert job.state == "crashed" and rec is not None
    assert (rec.reported_by, rec.status, rec.session_id) == ("launcher", "crashed", CHILD_SESSION)
    assert rec.detail is not None and "exit status 3" in rec.detail and rec.detail.endswith("ZeroDivisionError")


async def test_an_operator_cancel_terminates_the_child_with_the_operators_detail(harness: Harness) -> None:
    harness.backend.next_lines = [ready()]
    job = await harness.launch()
    await harness.launcher.cancel_as_operator(job.job_id)
    await harness.finished(job)
    assert harness.child(job).signals == ["SIGTERM"]
    rec = harness.backend.dirs[job.job_id].completion
    assert job.state == "terminated" and job.stop_reason == "operator_cancel"
    assert rec is not None and (rec.status, rec.detail, rec.reported_by) == (
        "terminated",
        OPERATOR_CANCEL_DETAIL,
        "launcher",
    )


async def test_a_child_that_exits_before_its_ready_line_fails_the_launch(harness: Harness) -> None:
    harness.backend.next_exit = "exit status 2"
    harness.backend.dirs.clear()
    with pytest.raises(BadGateway) as info:
        await harness.launch()
    (job_id,) = harness.backend.children
    job = harness.launcher.jobs[job_id]
    assert job.state == "failed" and "exit status 2" in info.value.message
    assert (job_id, None) in harness.backend.finished_off and job_id not in harness.backend.lifelines
    assert harness.launcher.index.starting_top == 0  # the ceiling's hold was given back


async def test_a_child_that_cannot_be_started_is_counted_failed_by_the_gauge_as_by_the_index(
    harness: Harness,
) -> None:
    harness.backend.next_lines = [ready()]
    running = await harness.launch()
    harness.backend.start_error = StartFailed("/usr/bin/roost-capsule: No such file or directory")
    with pytest.raises(BadGateway):
        await harness.launch()
    assert harness.launcher.counts_by_state() == {"running": 1, "failed": 1}
    assert jobs_gauge(harness.metrics) == harness.launcher.counts_by_state()
    harness.child(running).exit("exit status 0")
    await harness.finished(running)
    assert jobs_gauge(harness.metrics) == harness.launcher.counts_by_state() == {"crashed": 1, "failed": 1}


async def test_jobs_a_restarted_launcher_adopts_or_finds_lost_are_counted_by_the_gauge_as_by_the_index(
    harness: Harness,
) -> None:
    harness.backend.next_lines = [ready("ses_" + "1" * 16)]
    running = await harness.launch()
    harness.backend.next_lines = [ready("ses_" + "2" * 16)]
    lost = await harness.launch()
    harness.backend.next_lines = []
    starting = asyncio.ensure_future(harness.launch())  # no ready line: it stays starting
    for _ in range(3000):
        if len(harness.launcher.jobs) == 3:
            break
        await asyncio.sleep(0.01)
    # As a crash would leave them: every job's row written, the third one's still "starting".
    await harness.store.commit([JobRepository.upsert_op(job) for job in harness.launcher.jobs.values()])
    gone = harness.backend.children.pop(lost.job_id)  # its child ended while no daemon watched
    second = harness.restarted()
    await second.start()
    try:
        report = second.last_reconcile
        assert report is not None and (report["matched"], report["lost"]) == (2, 1)
        assert second.counts_by_state() == {"running": 2, "crashed": 1}
        assert jobs_gauge(second.metrics) == second.counts_by_state()
    finally:
        await second.stop()
        gone.exit("exit status 0")
        with contextlib.suppress(BadGateway):
            await starting
    assert running.job_id in second.jobs


async def test_a_draining_daemon_refuses_before_anything_is_prepared(harness: Harness) -> None:
    harness.referee.start_draining()
    with pytest.raises(Refused) as info:
        await harness.launch()
    assert info.value.message == DRAINING_LAUNCH
    assert harness.backend.dirs == {} and harness.backend.children == {} and harness.launcher.jobs == {}


async def test_a_start_in_flight_counts_against_the_ceiling(harness: Harness) -> None:
    """max_live_capsules is 2: one registered session and one top-level child still starting
    fill it, so another launch is refused with the ceiling's sentence before its directory is made."""
    await harness.referee.register(
        None, parse_register({"session_id": "ses_" + "d" * 16, "name": "echo", "version": "0.1.0"}), RegisterCaller()
    )
    first = asyncio.ensure_future(harness.launch())
    await asyncio.wait_for(harness.backend.started.wait(), 30)
    with pytest.raises(Refused) as info:
        await harness.launch()
    assert info.value.message == refusals.ceiling(2, 2)
    assert len(harness.backend.dirs) == 1
    (child,) = harness.backend.children.values()
    child.say(ready())
    job = await first
    assert job.state == "running" and harness.launcher.index.starting_top == 0


async def test_a_delegated_launch_hands_the_approval_to_the_child_on_stdin(harness: Harness, tmp_path: Path) -> None:
    workdir = tmp_path / "boss"
    workdir.mkdir(mode=0o700)
    credential, parent = await harness.referee.register(
        None,
        parse_register({"session_id": "ses_" + "b" * 16, "name": "boss", "version": "0.1.0", "workdir": str(workdir)}),
        RegisterCaller(uid=os.geteuid()),
    )
    assert isinstance(parent, SessionRecord)
    harness.backend.next_lines = [ready()]
    job = await harness.launch(parse_launch({"name": "echo", "version": "0.1.0", "task": "x"}), credential)
    assert job.parent_id == parent.session_id and job.delegated and job.state == "running"
    assert Path(job.workdir).parent == workdir / ".murmur" / "children"
    stdin = harness.child(job).stdin
    assert stdin.startswith(b"msa1.") and stdin.endswith(b"\n")
    # The parent's trace (a real file in its workdir) has the start line, naming the child.
    lines = (workdir / ".murmur" / parent.session_id / "trace.jsonl").read_text().splitlines()
    starts = [json.loads(line) for line in lines if json.loads(line)["event_type"] == "delegation_start"]
    assert [(s["delegation_id"], s["child_session_id"]) for s in starts] == [(job.delegation_id, CHILD_SESSION)]
