"""A2A 1.0 §3.2.2 blocking sends, and 0.3 ``configuration.blocking``; the server-side cap."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from a2a.door import Door
from a2a.protocol.models import TaskState
from tests.a2a.conformance.harness import DIALECTS, SESSION, Caller, Script, serve


async def test_blocking_waits_for_terminal(caller: Caller, script: Script) -> None:
    pending = asyncio.ensure_future(caller.send("hold", immediate=False))
    await asyncio.wait_for(script.started.get(), 5)
    await asyncio.sleep(0.1)
    assert not pending.done()  # still held: the task is working
    script.release.set()
    task = await asyncio.wait_for(pending, 5)
    assert task["status"]["state"] == caller.d.state(TaskState.COMPLETED)
    assert task["artifacts"][0]["parts"][0]["text"] == "echo: hold"


async def test_blocking_returns_when_interrupted(caller: Caller) -> None:
    task = await asyncio.wait_for(caller.send("ask:more?", immediate=False), 5)
    assert task["status"]["state"] == caller.d.state(TaskState.INPUT_REQUIRED)


async def test_immediate_answers_at_once(caller: Caller, script: Script) -> None:
    task = await asyncio.wait_for(caller.send("hold", immediate=True), 5)
    assert task["status"]["state"] in (caller.d.state(TaskState.SUBMITTED), caller.d.state(TaskState.WORKING))
    script.release.set()
    await caller.wait(task["id"], TaskState.COMPLETED)


async def test_default_per_dialect(caller: Caller, script: Script) -> None:
    """1.0: absent returnImmediately blocks. 0.3: only blocking: true blocks (docs/a2a.md)."""
    pending = asyncio.ensure_future(caller.send("hold", immediate=None))
    await asyncio.wait_for(script.started.get(), 5)
    await asyncio.sleep(0.1)
    assert pending.done() is (not caller.d.v1)
    script.release.set()
    task = await asyncio.wait_for(pending, 5)
    want = TaskState.COMPLETED if caller.d.v1 else TaskState.SUBMITTED
    assert task["status"]["state"] in (caller.d.state(want), caller.d.state(TaskState.WORKING))


async def test_cap_answers_the_task_as_it_stands() -> None:
    for dialect in DIALECTS:
        script = Script()
        door = Door(name="capped", version="1", session_id=SESSION, runner=script, blocking_cap_secs=0.3)
        async with serve(door) as url, aiohttp.ClientSession() as http:
            c = Caller(http, url, dialect)
            started = time.monotonic()
            task = await asyncio.wait_for(c.send("hold", immediate=False), 5)
            assert 0.25 <= time.monotonic() - started < 3
            assert task["status"]["state"] == dialect.state(TaskState.WORKING)
            script.release.set()
            await c.wait(task["id"], TaskState.COMPLETED)


async def test_bad_flags_are_invalid(caller: Caller) -> None:
    params = caller.d.send_params("x")
    key = "returnImmediately" if caller.d.v1 else "blocking"
    params["configuration"][key] = "yes"
    err = await caller.error("send", params)
    assert err["code"] == -32602 and key in err["message"]
    params["configuration"] = "fast"
    err = await caller.error("send", params)
    assert err["code"] == -32602 and "configuration" in err["message"]
