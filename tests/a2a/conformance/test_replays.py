"""A message id seen again from the same owner answers the task it opened (a retry or a replay),
never a second task; another owner's same id is its own message; a rejected send is not
remembered. Both dialects, over raw HTTP."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web

from a2a.door import Door
from a2a.protocol.models import TaskState
from tests.a2a.conformance.harness import DIALECTS, SESSION, Caller, Dialect, Script, serve


async def test_the_same_message_twice_is_one_task(caller: Caller, door: Door, script: Script) -> None:
    first = await caller.send("once", message_id="m-retry", immediate=False)
    again = await caller.send("once", message_id="m-retry", immediate=False)
    assert again["id"] == first["id"] and again["status"]["state"] == caller.d.state(TaskState.COMPLETED)
    changed = await caller.send("changed body", message_id="m-retry")  # the id decides, as a key would
    assert changed["id"] == first["id"]
    await asyncio.wait_for(door.queue.wait_idle(), 5)
    assert [t.text for t in script.seen] == ["once"]
    assert len(door.queue.records()) == 1


async def test_a_replayed_continuation_runs_once(caller: Caller, script: Script) -> None:
    asked = await caller.send("ask:colour?", immediate=False)
    params = caller.d.send_params("blue", immediate=False, taskId=asked["id"], message_id="m-answer")
    first = caller.d.task(await caller.ok("send", params))
    again = caller.d.task(await caller.ok("send", params))  # completed by now: no -32004, its task
    assert first["id"] == again["id"] == asked["id"]
    assert again["status"]["state"] == caller.d.state(TaskState.COMPLETED)
    assert [t.text for t in script.seen] == ["ask:colour?", "blue"]


async def _owner(request: web.Request) -> str | None:
    return request.headers.get("x-test-owner")


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
async def test_owners_and_rejections_are_not_conflated(script: Script, dialect: Dialect) -> None:
    door = Door(name="r", version="1", session_id=SESSION, runner=script, identify=_owner, queue_depth=1)
    connector = aiohttp.TCPConnector(force_close=True)  # the door looks an owner up once per connection
    async with serve(door) as url, aiohttp.ClientSession(connector=connector) as http:
        c = Caller(http, url, dialect)

        async def send(owner: str, text: str, mid: str) -> dict[str, object]:
            return c.d.task(await c.ok("send", c.d.send_params(text, message_id=mid), headers={"x-test-owner": owner}))

        held = await send("uid:1", "hold", "m-1")
        queued = await send("uid:1", "queued", "m-2")
        busy = await send("uid:1", "busy", "m-3")
        assert busy["status"]["state"] == c.d.state(TaskState.REJECTED)
        other = await send("uid:2", "someone else's m-1", "m-1")
        assert other["status"]["state"] == c.d.state(TaskState.REJECTED)  # its own message, and no room
        assert other["id"] != held["id"]
        script.release.set()
        await asyncio.wait_for(door.queue.wait_idle(), 5)
        retried = await send("uid:1", "busy", "m-3")  # after "busy", a retry is a new attempt
        assert retried["id"] != busy["id"]
        await asyncio.wait_for(door.queue.wait_idle(), 5)
        assert [t.text for t in script.seen] == ["hold", "queued", "busy"]
        assert queued["id"] != held["id"]
