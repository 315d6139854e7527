"""A delegated ``roost-capsule`` reports its completion to a real parent door, or not at all."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from a2a.door import Door, DoorTask, TaskOutcome
from roost.core.ids import delegation_id
from roost.services.completionfile import SpawnerHandle
from tests.support.capsules import Capsules, add_examples, base_env, trace_events, wait_for
from tests.support.registry import RegistryBuilder
from tests.trace_checks import assert_trace_guarantees

COMPLETION_HEADERS = (
    "x-murmur-task-origin",
    "x-murmur-task-trust",
    "x-murmur-delegation-id",
    "x-murmur-completion-session",
)


@contextlib.asynccontextmanager
async def parent_door(session_id: str) -> AsyncIterator[tuple[str, list[DoorTask], list[dict[str, str]]]]:
    tasks: list[DoorTask] = []
    headers: list[dict[str, str]] = []

    async def runner(task: DoorTask) -> TaskOutcome:
        tasks.append(task)
        return TaskOutcome.completed("noted")

    door = Door(name="parent", version="0.1.0", session_id=session_id, runner=runner)

    @web.middleware
    async def capture(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "POST":
            headers.append({k.lower(): v for k, v in request.headers.items()})
        return await handler(request)

    door.app.middlewares.append(capture)
    runner_ = web.AppRunner(door.app)
    await runner_.setup()
    site = web.TCPSite(runner_, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner_.addresses[0][1]}"
    door.url = url
    try:
        yield url, tasks, headers
    finally:
        await runner_.cleanup()


async def _delegated(daemon_factory: Any, registry: RegistryBuilder, child: str) -> tuple[Any, str, str]:
    add_examples(registry, child)
    registry.add(
        "parent",
        capabilities={"spawn": {"allow": [child]}, "network": {"allow": ["127.0.0.1"]}, "env": {"allow": ["LANG"]}},
        script="print('parent')",
    )
    d = await daemon_factory(registry.root, spawn_allow=("parent",))
    parent_sid, cred = await d.register_top("parent")
    status, grant = await d.spawn(cred, child)
    assert status == 200, grant
    return d, parent_sid, grant["approval"]


async def test_completion_written_and_delivered(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    d, parent_sid, approval = await _delegated(daemon_factory, registry, "worker")
    dlg = delegation_id()
    work = tmp_path / "child"
    work.mkdir(mode=0o700)
    (work / "task.md").write_text("one two three")
    async with parent_door(parent_sid) as (door_url, tasks, headers):
        handle = SpawnerHandle(
            session_id=parent_sid, context_id="ctx_p", delegation_id=dlg, url=door_url, trust="trusted"
        )
        env = base_env(MURMUR_ROOST_URL=d.url, MURMUR_SPAWNER=handle.to_env(), MURMUR_JOB_ID="job_" + "b" * 32)
        cp = await capsules.start("worker@0.1.0", work, registry=registry.root, env=env, stdin_line=approval)
        assert await cp.wait() == 0, cp.stderr
        await wait_for(lambda: bool(tasks))
    rec = json.loads((work / "completion.json").read_text())
    assert rec["delegation_id"] == dlg and rec["session_id"] == cp.session_id
    assert (rec["status"], rec["reported_by"], rec["delivered"]) == ("ok", "child", True)
    assert rec["result_path"] == "out/result.txt" and rec["workdir"] == str(work)
    assert "delivery_error" not in rec and "detail" not in rec
    assert (work / "out" / "result.txt").read_text().startswith("worker report\nwords: 3\n")
    assert json.loads((work / "out" / "result.json").read_text())["job_id"] == "job_" + "b" * 32
    # The parent door got the four completion headers and a text naming the result path.
    sent = headers[-1]
    assert [sent.get(h) for h in COMPLETION_HEADERS] == ["completion", "trusted", dlg, parent_sid]
    task = tasks[0]
    # The child's own post is unsealed (only the launcher's delivery is sealed: tests/trust), so
    # the door takes it as an event, with no delegation id; the addressing still reached it.
    assert task.origin.value == "event" and task.delegation_id is None and task.context_id == "ctx_p"
    assert "result: out/result.txt (in that workdir)" in task.text and "worker report" not in task.text
    # The child session was registered under its parent and deregistered complete.
    child = d.roost.table.get(cp.session_id)
    assert child is not None and child.parent_id == parent_sid and child.status == "complete"
    recs = assert_trace_guarantees(cp.trace)
    assert recs[0]["spawned_by"] == parent_sid and recs[0]["delegation_id"] == dlg


async def test_sigterm_leaves_no_completion(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    d, parent_sid, approval = await _delegated(daemon_factory, registry, "sleeper")
    work = tmp_path / "child"
    work.mkdir(mode=0o700)
    (work / "task.md").write_text("3600")
    async with parent_door(parent_sid) as (door_url, tasks, _headers):
        handle = SpawnerHandle(
            session_id=parent_sid, context_id="ctx_p", delegation_id=delegation_id(), url=door_url, trust="trusted"
        )
        env = base_env(MURMUR_ROOST_URL=d.url, MURMUR_SPAWNER=handle.to_env())
        cp = await capsules.start("sleeper@0.1.0", work, registry=registry.root, env=env, stdin_line=approval)
        await wait_for(lambda: any(r["event_type"] == "task_start" for r in trace_events(cp.trace)))
        assert await cp.terminate() == 143
        assert not tasks
    assert not (work / "completion.json").exists()
    assert not (work / "out").exists()
    recs = assert_trace_guarantees(cp.trace)
    assert recs[-1]["exit_status"] == "canceled"
    assert d.roost.table.get(cp.session_id).status == "failed"
