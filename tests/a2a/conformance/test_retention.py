"""Retention and bounds (docs/a2a.md, "Retention"): finished tasks and tasks waiting for input are
kept for the retention period and up to a count per owner; one owner's flood never pushes out
another owner's tasks. Owners come from the door's ``identify`` (a test double reading a header
here; the capsule host's real one, by uid, is tested in tests/capsule)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from a2a.door import Door
from a2a.protocol.models import TaskState
from tests.a2a.conformance.harness import DIALECTS, SESSION, Caller, Dialect, Script, serve

OWNER = "x-test-owner"


async def _by_header(request: web.Request) -> str | None:
    return request.headers.get(OWNER)


@pytest.fixture(params=DIALECTS, ids=lambda d: d.name)
def dialect(request: pytest.FixtureRequest) -> Dialect:
    d: Dialect = request.param
    return d


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    # one connection per request: the door looks an owner up once per connection
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as s:
        yield s


def _door(script: Script, **kw: object) -> Door:
    return Door(name="kept", version="1", session_id=SESSION, runner=script, identify=_by_header, **kw)  # type: ignore[arg-type]


class Owner:
    def __init__(self, http: aiohttp.ClientSession, url: str, d: Dialect, name: str) -> None:
        self.c = Caller(http, url, d)
        self.name = name
        self.n = 0

    async def send(self, text: str, **kw: object) -> dict[str, object]:
        self.n += 1
        params = self.c.d.send_params(text, message_id=f"{self.name}-{self.n}", **kw)
        return self.c.d.task(await self.c.ok("send", params, headers={OWNER: self.name}))

    async def get(self, task_id: str) -> dict[str, object]:
        r = await self.c.call(self.c.d.method("get"), {"id": task_id}, headers={OWNER: self.name})
        return r

    async def state(self, task_id: str) -> str:
        r = await self.get(task_id)
        assert "result" in r, r
        status = r["result"]["status"]  # type: ignore[index]
        return str(status["state"])


async def test_a_waiting_task_expires_after_the_retention(script: Script, dialect: Dialect) -> None:
    door = _door(script)
    async with serve(door) as url, aiohttp.ClientSession() as http:
        a = Owner(http, url, dialect, "uid:1")
        asked = await a.send("ask:colour?", immediate=False)
        tid = str(asked["id"])
        assert await a.state(tid) == dialect.state(TaskState.INPUT_REQUIRED)  # kept while young
        door.queue.retention_secs = 0.0  # now it has waited longer than the retention
        r = await a.get(tid)
        status = r["result"]["status"]  # type: ignore[index]
        assert status["state"] == dialect.state(TaskState.CANCELED)
        assert status["message"]["parts"][0]["text"] == "task canceled: it waited for input longer than 0 s"
        door.queue.retention_secs = 3600.0  # the canceled task is kept as finished tasks are
        late = await a.c.error(
            "send", dialect.send_params("blue", taskId=tid, message_id="late"), headers={OWNER: a.name}
        )
        assert late["code"] == -32004  # canceled: terminal
    assert [t.text for t in script.seen] == ["ask:colour?"]


async def test_an_expired_waiting_task_tells_the_cancel_hook(script: Script) -> None:
    seen: list[tuple[str, str]] = []

    async def on_cancel(task: object, phase: str) -> None:
        seen.append((task.id, phase))  # type: ignore[attr-defined]

    door = _door(script, on_cancel=on_cancel)
    rec = door.queue.submit_local("ask:anyone?")
    await asyncio.wait_for(door.queue.wait_idle(), 5)
    assert rec.state is TaskState.INPUT_REQUIRED
    door.queue.retention_secs = 0.0
    assert door.queue.record(rec.task.id) is rec and rec.state is TaskState.CANCELED
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0)
    assert seen == [(rec.task.id, "queued")]
    await door.shutdown()


async def test_waiting_tasks_are_bounded_per_owner(
    script: Script, dialect: Dialect, http: aiohttp.ClientSession
) -> None:
    door = _door(script, max_waiting=2)
    async with serve(door) as url:
        a, b = Owner(http, url, dialect, "uid:1"), Owner(http, url, dialect, "uid:2")
        b_ids = [str((await b.send(f"ask:b{i}?", immediate=False))["id"]) for i in range(2)]
        a_ids = [str((await a.send(f"ask:a{i}?", immediate=False))["id"]) for i in range(5)]
        waiting, canceled = dialect.state(TaskState.INPUT_REQUIRED), dialect.state(TaskState.CANCELED)
        assert [await a.state(t) for t in a_ids] == [canceled] * 3 + [waiting] * 2
        assert [await b.state(t) for t in b_ids] == [waiting] * 2  # A's flood left B's alone
        r = await a.get(a_ids[0])
        text = r["result"]["status"]["message"]["parts"][0]["text"]  # type: ignore[index]
        assert text == "task canceled: its owner has 2 newer tasks waiting for input"
        done = await b.send("blue", immediate=False, taskId=b_ids[0])
        assert done["status"]["state"] == dialect.state(TaskState.COMPLETED)  # type: ignore[index]


async def test_a_flood_of_rejected_sends_keeps_other_owners_tasks(
    script: Script, dialect: Dialect, http: aiohttp.ClientSession
) -> None:
    door = _door(script, max_finished=3, queue_depth=1)
    async with serve(door) as url:
        a, b = Owner(http, url, dialect, "uid:1"), Owner(http, url, dialect, "uid:2")
        b_ids = [str((await b.send(f"b{i}", immediate=False))["id"]) for i in range(2)]
        holding = await a.send("hold")  # runs and holds; the next one queues; the rest are rejected
        a_ids = [str((await a.send(f"flood {i}"))["id"]) for i in range(20)]
        completed = dialect.state(TaskState.COMPLETED)
        assert [await b.state(t) for t in b_ids] == [completed] * 2
        rejected = dialect.state(TaskState.REJECTED)
        assert [await a.state(t) for t in a_ids[-3:]] == [rejected] * 3
        gone = await a.get(a_ids[1])
        assert gone["error"] == {"code": -32001, "message": "Task not found"}  # A's own oldest were dropped
        assert len([r for r in door.queue.records() if r.task.owner == "uid:1" and r.state.terminal]) == 3
        script.release.set()
        await asyncio.wait_for(door.queue.wait_idle(), 5)
        assert [await b.state(t) for t in b_ids] == [completed] * 2
        assert await a.state(str(holding["id"])) == completed
