"""Streaming (A2A 1.0 §3.1.2, §3.1.6; 0.3 ``message/stream``, ``tasks/resubscribe``) over SSE.

The runner is a test double of the capsule that writes its output chunk by chunk through the
door's queue, as the capsule host does with what an entrypoint writes; each chunk waits for the
test's go, so a test can see an update arrive while the run is still going.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from a2a.door import Door, DoorTask, TaskOutcome
from a2a.protocol.models import TaskState
from tests.a2a.conformance.harness import DIALECTS, SESSION, Caller, serve


class Writer:
    """``write:a,b,c`` writes a, b and c (each after one ``go``), then completes; ``fail`` fails."""

    def __init__(self) -> None:
        self.door: Door | None = None
        self.go = asyncio.Queue[None]()
        self.started = asyncio.Event()
        self.runs: list[DoorTask] = []

    async def __call__(self, task: DoorTask) -> TaskOutcome:
        assert self.door is not None
        self.runs.append(task)
        self.started.set()
        if task.text == "fail":
            return TaskOutcome.failed("it failed")
        chunks = task.text.removeprefix("write:").split(",")
        for chunk in chunks:
            await self.go.get()
            self.door.queue.write_output(task.id, chunk)
        return TaskOutcome.completed("".join(chunks))

    def release(self, n: int) -> None:
        for _ in range(n):
            self.go.put_nowait(None)


@pytest.fixture
def writer() -> Writer:
    return Writer()


@pytest.fixture(params=DIALECTS, ids=lambda d: d.name)
async def caller(request: pytest.FixtureRequest, writer: Writer) -> AsyncIterator[Caller]:
    door = Door(name="streams", version="1", session_id=SESSION, runner=writer, heartbeat_secs=0.05)
    writer.door = door
    async with serve(door) as url, aiohttp.ClientSession() as http:
        yield Caller(http, url, request.param)


async def _next_non_heartbeat(it: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    return await asyncio.wait_for(anext(it), 5)


async def test_card_says_streaming(caller: Caller) -> None:
    async with caller.http.get(caller.url + "/.well-known/agent-card.json") as resp:
        card = await resp.json()
    assert card["capabilities"]["streaming"] is True
    methods = card["capabilities"]["extensions"][0]["params"]["methods"]
    assert {"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"} <= set(methods)


async def test_stream_is_the_task_then_updates_as_written(caller: Caller, writer: Writer) -> None:
    d = caller.d
    items = caller.stream("stream", {"message": d.message("write:one,two")})
    first = await _next_non_heartbeat(items)
    assert caller.kind(first) == "task"
    task = caller.body(first)
    task_id, context_id = task["id"], task["contextId"]
    assert task["status"]["state"] in (d.state(TaskState.SUBMITTED), d.state(TaskState.WORKING))
    writer.release(1)
    seen: list[dict[str, Any]] = []
    while not seen or caller.kind(seen[-1]) != "artifact":  # the first chunk arrives while the run waits
        seen.append(await _next_non_heartbeat(items))
    assert [caller.body(i)["status"]["state"] for i in seen[:-1]] in ([], [d.state(TaskState.WORKING)])
    first_chunk = caller.body(seen[-1])
    assert first_chunk["taskId"] == task_id and first_chunk["contextId"] == context_id
    assert first_chunk["artifact"]["artifactId"] == "response"
    assert first_chunk["artifact"]["parts"] == [d.part("one")]
    assert first_chunk["append"] is False and first_chunk["lastChunk"] is False
    assert writer.runs and (await caller.get(task_id))["status"]["state"] == d.state(TaskState.WORKING)
    writer.release(1)
    rest = [item async for item in items]
    kinds = [caller.kind(i) for i in rest]
    assert kinds == ["artifact", "artifact", "status"], rest
    second, closing, final = (caller.body(i) for i in rest)
    assert second["artifact"]["parts"] == [d.part("two")] and second["append"] is True
    assert closing["lastChunk"] is True and closing["append"] is True
    assert final["status"]["state"] == d.state(TaskState.COMPLETED)
    if d.v1:
        assert "final" not in final
    else:
        assert final["final"] is True
    done = await caller.get(task_id)
    assert done["artifacts"][0]["parts"] == [d.part("onetwo")]


async def test_a_run_that_writes_nothing_streams_its_whole_output_once(caller: Caller, writer: Writer) -> None:
    writer.release(1)
    items = [i async for i in caller.stream("stream", {"message": caller.d.message("write:all")})]
    kinds = [caller.kind(i) for i in items]
    assert kinds[0] == "task" and kinds[-1] == "status"
    artifacts = [caller.body(i) for i in items if caller.kind(i) == "artifact"]
    assert "".join(p["text"] for a in artifacts for p in a["artifact"]["parts"]) == "all"


async def test_a_failed_run_ends_the_stream(caller: Caller) -> None:
    items = [i async for i in caller.stream("stream", {"message": caller.d.message("fail")})]
    last = caller.body(items[-1])
    assert caller.kind(items[-1]) == "status" and last["status"]["state"] == caller.d.state(TaskState.FAILED)


async def test_resubscribe_starts_from_the_current_state(caller: Caller, writer: Writer) -> None:
    d = caller.d
    task = await caller.send("write:a,b")
    writer.release(1)
    for _ in range(500):  # the first chunk is in
        if (await caller.get(task["id"])).get("artifacts"):
            break
        await asyncio.sleep(0.01)
    items = caller.stream("subscribe", {"id": task["id"]})
    first = caller.body(await _next_non_heartbeat(items))
    assert first["id"] == task["id"] and first["status"]["state"] == d.state(TaskState.WORKING)
    assert first["artifacts"][0]["parts"] == [d.part("a")]  # what was written before it subscribed
    writer.release(1)
    rest = [caller.body(i) async for i in items]
    assert rest[0]["artifact"]["parts"] == [d.part("b")] and rest[0]["append"] is True
    assert rest[-1]["status"]["state"] == d.state(TaskState.COMPLETED)


async def test_subscribe_refusals(caller: Caller, writer: Writer) -> None:
    assert (await caller.error("subscribe", {"id": "tsk_nope"}))["code"] == -32001
    writer.release(1)
    task = await caller.send("write:x", immediate=False)
    err = await caller.error("subscribe", {"id": task["id"]})
    assert err["code"] == -32004 and "terminal" in err["message"]
    assert (await caller.error("stream", {"message": {"messageId": "m"}}))["code"] == -32602


async def test_a_client_that_goes_away_does_not_cancel_the_task(caller: Caller, writer: Writer) -> None:
    d = caller.d
    items = caller.stream("stream", {"message": d.message("write:p,q")})
    task = caller.body(await _next_non_heartbeat(items))
    await items.aclose()  # the connection is closed mid-stream
    writer.release(2)
    done = await caller.wait(task["id"], TaskState.COMPLETED)
    assert done["artifacts"][0]["parts"] == [d.part("pq")]


async def test_heartbeats_keep_an_idle_stream_talking(caller: Caller, writer: Writer) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": caller.d.method("stream"),
        "params": {"message": caller.d.message("write:z")},
    }
    async with caller.http.post(caller.url + "/", data=json.dumps(body), headers=caller.d.headers()) as resp:
        beats = 0
        async for line in resp.content:
            if line.startswith(b": heartbeat"):
                beats += 1
                if beats == 3:
                    writer.release(1)
    assert beats >= 3


async def test_a_stream_in_a_batch_is_refused_and_does_nothing(caller: Caller, writer: Writer) -> None:
    batch = [
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": caller.d.method("stream"),
            "params": {"message": caller.d.message("write:b")},
        }
    ]
    async with caller.http.post(caller.url + "/", data=json.dumps(batch), headers=caller.d.headers()) as resp:
        (answer,) = await resp.json()
    assert answer["error"]["code"] == -32004 and "batch" in answer["error"]["message"]
    await asyncio.sleep(0.05)
    assert writer.runs == []
