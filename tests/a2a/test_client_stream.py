"""``A2AClient.stream_message`` / ``subscribe`` against a real door, in both dialects."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from a2a.client import A2AClient
from a2a.door import Door, DoorTask, TaskOutcome
from a2a.protocol import errors
from a2a.protocol.models import Message, Task, TaskState, text_part
from a2a.protocol.streamevents import ArtifactUpdate, StatusUpdate
from tests.support.doorserve import serve_door
from tests.support.webserve import serve_app


def _message(text: str, mid: str, task_id: str | None = None) -> Message:
    return Message(message_id=mid, role="user", parts=[text_part(text)], task_id=task_id)


@pytest.mark.parametrize("dialect", ["1.0", "0.3", None])
async def test_stream_and_subscribe(dialect: str | None) -> None:
    go = asyncio.Event()
    door: Door

    async def runner(task: DoorTask) -> TaskOutcome:
        door.queue.write_output(task.id, "part one\n")
        await go.wait()
        door.queue.write_output(task.id, "part two\n")
        return TaskOutcome.completed("part one\npart two\n")

    door = Door(name="s", version="1", session_id="ses_s", runner=runner)
    async with serve_door(door) as url, A2AClient() as client:
        items = client.stream_message(url, _message("go", "m1"), dialect=dialect)  # type: ignore[arg-type]
        first = await anext(items)
        assert isinstance(first, Task) and first.status.state in (TaskState.SUBMITTED, TaskState.WORKING)
        seen = []
        while not seen or not isinstance(seen[-1], ArtifactUpdate):
            seen.append(await asyncio.wait_for(anext(items), 5))
        assert seen[-1].artifact.parts[0].text == "part one\n" and not seen[-1].append
        resub = client.subscribe(url, first.id, dialect=dialect)  # type: ignore[arg-type]
        now = await anext(resub)
        assert isinstance(now, Task) and now.artifacts and now.artifacts[0].parts[0].text == "part one\n"
        go.set()
        rest = [i async for i in items]
        final = rest[-1]
        assert isinstance(final, StatusUpdate) and final.status.state is TaskState.COMPLETED and final.final
        assert [i.artifact.parts[0].text for i in rest if isinstance(i, ArtifactUpdate)] == ["part two\n", ""]
        again = [i async for i in resub]
        assert isinstance(again[-1], StatusUpdate) and again[-1].status.state is TaskState.COMPLETED


async def test_stream_errors_are_sentences() -> None:
    async def runner(task: DoorTask) -> TaskOutcome:
        return TaskOutcome.completed("x")

    door = Door(name="s", version="1", session_id="ses_s", runner=runner)
    async with serve_door(door) as url, A2AClient() as client:
        with pytest.raises(errors.JsonRpcError) as caught:
            async for _ in client.subscribe(url, "tsk_missing", dialect="1.0"):
                pass
        assert caught.value.code == -32001

        async def redirect(request: web.Request) -> web.Response:
            return web.Response(status=307, headers={"Location": url})

        app = web.Application()
        app.router.add_post("/", redirect)
        async with serve_app(app) as other:
            with pytest.raises(errors.PeerHTTPError, match="never redirected"):
                async for _ in client.stream_message(other + "/", _message("x", "m"), dialect="1.0"):
                    pass


async def test_a_stream_read_to_its_end_leaves_its_connection_for_the_next() -> None:
    async def runner(task: DoorTask) -> TaskOutcome:
        return TaskOutcome.completed("x")

    door = Door(name="s", version="1", session_id="ses_s", runner=runner)
    async with serve_door(door) as url, A2AClient() as client:
        pool = client._pool
        for n in range(3):
            items = [i async for i in client.stream_message(url, _message("x", f"k{n}"), dialect="1.0")]
            assert isinstance(items[-1], StatusUpdate) and items[-1].final
            assert (pool.open_count, pool.idle_count) == (1, 1)  # the same connection, idle again
        stopped = client.stream_message(url, _message("y", "k-stop"), dialect="1.0")
        await anext(stopped)
        await stopped.aclose()  # a consumer that stops early: that connection is closed
        await asyncio.sleep(0.05)
        assert pool.idle_count == 0


async def test_items_that_came_together_come_in_order_before_a_bad_one() -> None:
    """A peer that writes a Task, an update and a bad item in one write: ``stream_message`` gives
    the two good ones, then raises for the bad one; ``stream_message_batches`` gives the good ones
    as one list first (what came together), then raises."""
    task = {"task": {"id": "tsk_1", "contextId": "ctx_1", "status": {"state": "TASK_STATE_WORKING"}}}
    update = {"statusUpdate": {"taskId": "tsk_1", "contextId": "ctx_1", "status": {"state": "TASK_STATE_WORKING"}}}
    events = [{"jsonrpc": "2.0", "id": 1, "result": r} for r in (task, update, {"statusUpdate": {"taskId": 3}})]
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(body)  # one write: the client reads it as one piece
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/", stream)
    async with serve_app(app) as url, A2AClient() as client:
        got: list[object] = []
        with pytest.raises(errors.InvalidResponse, match="a stream item is not valid"):
            async for item in client.stream_message(url + "/", _message("x", "m1"), dialect="1.0"):
                got.append(item)
        assert [type(i) for i in got] == [Task, StatusUpdate]
        batches: list[list[object]] = []
        with pytest.raises(errors.InvalidResponse, match="a stream item is not valid"):
            async for batch in client.stream_message_batches(url + "/", _message("x", "m2"), dialect="1.0"):
                batches.append(batch)
        assert [[type(i) for i in b] for b in batches] == [[Task, StatusUpdate]]
