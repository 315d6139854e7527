"""Streaming, subscribing and push notifications with the official Python SDK (a2a-sdk 1.x), both dialects.

Its client streams a send from a real Door, subscribes to a running task and sets a
push-notification config whose webhook (ours, on loopback) receives the door's posts; our
client streams from the SDK's own server. The SDK runs in its own virtualenv
(tests/a2a/test_sdk_interop.py says why and how).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from a2a.client import A2AClient
from a2a.door import Door, DoorTask, TaskOutcome
from a2a.http1 import Http1Pool
from a2a.protocol.models import Message, Part, Task, TaskState
from a2a.protocol.streamevents import ArtifactUpdate, StatusUpdate
from a2a.push import PushDelivery
from tests.a2a.test_sdk_interop import sdk_python, sdk_server
from tests.support.doorserve import serve_door
from tests.support.webserve import serve_app

__all__ = ["sdk_python"]  # the fixture, re-exported for this module

STREAM_CLIENT = textwrap.dedent(
    """
    import asyncio, json, sys

    import httpx
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.types import (
        GetTaskRequest, Message, Part, Role, SendMessageConfiguration, SendMessageRequest, SubscribeToTaskRequest,
        TaskPushNotificationConfig, TaskState,
    )


    def shown(event):
        kind = event.WhichOneof("payload")
        if kind == "task":
            return ["task", TaskState.Name(event.task.status.state)]
        if kind == "status_update":
            return ["status", TaskState.Name(event.status_update.status.state)]
        if kind == "artifact_update":
            a = event.artifact_update
            text = "".join(p.text for p in a.artifact.parts)
            return ["artifact", a.artifact.artifact_id, text, a.append, a.last_chunk]
        return [kind]


    async def main(url, dialect, hook):
        async with httpx.AsyncClient(timeout=20) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
            keep = [i for i in card.supported_interfaces if i.protocol_version.startswith(dialect)]
            del card.supported_interfaces[:]
            card.supported_interfaces.extend(keep)
            out = {"streaming": card.capabilities.streaming, "push": card.capabilities.push_notifications}
            client = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
            msg = Message(message_id=f"s-{dialect}-1", role=Role.ROLE_USER, parts=[Part(text="one two three")])
            out["stream"] = [shown(e) async for e in client.send_message(SendMessageRequest(message=msg))]
            slow = Message(message_id=f"s-{dialect}-2", role=Role.ROLE_USER, parts=[Part(text="slow a b c")])
            config = SendMessageConfiguration(return_immediately=True)
            task = None
            async for e in client.send_message(SendMessageRequest(message=slow, configuration=config)):
                task = task or e.task
                break
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, id="hook", url=hook, token="sdk-token")
            )
            out["subscribe"] = [shown(e) async for e in client.subscribe(SubscribeToTaskRequest(id=task.id))]
            done = await client.get_task(GetTaskRequest(id=task.id))
            out["done"] = TaskState.Name(done.status.state)
            print(json.dumps(out))


    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
    """
)


@contextlib.asynccontextmanager
async def webhook() -> AsyncIterator[tuple[str, list[tuple[str | None, Any]]]]:
    """A webhook on loopback: its URL, and each post's (notification token, JSON body)."""
    posts: list[tuple[str | None, Any]] = []

    async def hook(request: web.Request) -> web.Response:
        posts.append((request.headers.get("X-A2A-Notification-Token"), await request.json()))
        return web.Response()

    app = web.Application()
    app.router.add_post("/hook", hook)
    async with serve_app(app) as base:
        yield base + "/hook", posts


def _door() -> Door:
    door: Door

    async def runner(task: DoorTask) -> TaskOutcome:
        words = task.text.split()
        pause = 0.15 if words[0] == "slow" else 0.02
        for word in words:
            await asyncio.sleep(pause)
            door.queue.write_output(task.id, word + "\n")
        return TaskOutcome.completed("".join(w + "\n" for w in words))

    pool = Http1Pool(connect_timeout=2, total_timeout=5)
    door = Door(
        name="sdk-stream",
        version="1",
        session_id="ses_sdkstream",
        runner=runner,
        push=PushDelivery(pool, lambda _u: None),
    )
    return door


@pytest.mark.timeout(300)
@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
async def test_sdk_client_streams_subscribes_and_gets_pushes(sdk_python: Path, tmp_path: Path, dialect: str) -> None:
    script = tmp_path / "sdk_stream_client.py"
    script.write_text(STREAM_CLIENT)
    result, posts = await run_client_with_webhook([str(sdk_python), str(script)], [dialect], tmp_path, dialect)
    assert result["streaming"] is True and result["push"] is True
    stream = result["stream"]
    assert stream[0][0] == "task" and stream[-1] == ["status", "TASK_STATE_COMPLETED"]
    chunks = [e for e in stream if e[0] == "artifact"]
    assert "".join(e[2] for e in chunks) == "one\ntwo\nthree\n"
    assert chunks[0][3] is False and chunks[-1][4] is True
    sub = result["subscribe"]
    assert sub[0][0] == "task" and sub[-1] == ["status", "TASK_STATE_COMPLETED"]
    assert any(e[0] == "artifact" for e in sub) and result["done"] == "TASK_STATE_COMPLETED"
    assert posts and all(token == "sdk-token" for token, _ in posts)
    assert any(_completed(body, dialect) for _, body in posts)


def _completed(body: Any, _dialect: str = "") -> bool:
    """A push body saying the task completed: a 1.0 status update, or a 0.3 whole Task."""
    if "statusUpdate" in body:
        return bool(body["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")
    return bool(body.get("kind") == "task" and body["status"]["state"] == "completed")


async def run_client_with_webhook(
    argv: list[str], args: list[str], cwd: Path, dialect: str
) -> tuple[dict[str, Any], list[tuple[str | None, Any]]]:
    """Run an official SDK client as ``argv <door url> *args <webhook url>`` against a streaming door
    with push delivery; its last stdout line (JSON) and the posts the webhook got (once the task's
    completion was posted, or after 5 s)."""
    async with webhook() as (hook_url, posts), serve_door(_door()) as url:
        proc = await asyncio.create_subprocess_exec(
            *argv, url, *args, hook_url, cwd=str(cwd), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        for _ in range(100):
            if any(_completed(body) for _, body in posts):
                break
            await asyncio.sleep(0.05)
    assert proc.returncode == 0, err.decode()[-3000:]
    return json.loads(out.decode().strip().splitlines()[-1]), posts


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["1.0", "0.3"])
async def test_our_client_streams_from_the_sdk_server(sdk_python: Path, tmp_path: Path, mode: str) -> None:
    async with sdk_server(sdk_python, tmp_path, mode) as (url, seen), A2AClient() as client:
        message = Message(message_id="st-1", role="user", parts=[Part(kind="text", text="hi")])
        items = [i async for i in client.stream_message(url, message)]
        assert isinstance(items[0], Task)
    assert isinstance(items[-1], StatusUpdate) and items[-1].status.state is TaskState.COMPLETED
    texts = [p.text for i in items if isinstance(i, ArtifactUpdate) for p in i.artifact.parts]
    assert texts == ["echo: hi"]
    assert seen[0]["method"] == ("SendStreamingMessage" if mode == "1.0" else "message/stream")
