"""Interop with the official A2A Python SDK's 0.3 line (a2a-sdk 0.3.x): streaming, subscribing, push.

Its client streams a send from a real Door (0.3 ``message/stream``), resubscribes to a running
task and sets a push-notification callback whose webhook (ours) receives the door's posts; our
client streams from its server. Its own virtualenv, from ``sdk-lock-0.3.txt`` (built by
``sdk-env.sh sdk-lock-0.3.txt``; tests/system-deps.sh runs it): the 0.3 and 1.x SDKs share the
import name ``a2a``. If it cannot be built the fixture FAILS the test (never skips).
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from a2a.client import A2AClient
from a2a.protocol.models import Message, Part, Task, TaskState
from a2a.protocol.streamevents import ArtifactUpdate, StatusUpdate
from tests.a2a.test_sdk_interop import _pinned, sdk_env_python
from tests.a2a.test_sdk_streaming import run_client_with_webhook

SDK_ENV = Path(__file__).with_name("sdk-env.sh")
LOCK = "sdk-lock-0.3.txt"

CLIENT = textwrap.dedent(
    """
    import asyncio, json, sys

    import httpx
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.types import (
        Message, Part, PushNotificationConfig, Role, TaskIdParams, TaskPushNotificationConfig, TaskQueryParams,
        TextPart,
    )


    def shown(event):
        if isinstance(event, Message):
            return ["message"]
        task, update = event
        if update is None:
            return ["task", task.status.state.value]
        if update.kind == "status-update":
            return ["status", update.status.state.value, update.final]
        text = "".join(p.root.text for p in update.artifact.parts)
        return ["artifact", update.artifact.artifact_id, text, bool(update.append), bool(update.last_chunk)]


    def message(mid, text):
        return Message(message_id=mid, role=Role.user, parts=[Part(root=TextPart(text=text))])


    async def main(url, hook):
        async with httpx.AsyncClient(timeout=20) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
            out = {"streaming": card.capabilities.streaming, "push": card.capabilities.push_notifications}
            client = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
            out["stream"] = [shown(e) async for e in client.send_message(message("s03-1", "one two three"))]
            task = None
            async for event in client.send_message(message("s03-2", "slow a b c")):
                task = event[0]
                break
            config = PushNotificationConfig(id="hook", url=hook, token="sdk03-token")
            await client.set_task_callback(TaskPushNotificationConfig(task_id=task.id, push_notification_config=config))
            out["subscribe"] = [shown(e) async for e in client.resubscribe(TaskIdParams(id=task.id))]
            done = await client.get_task(TaskQueryParams(id=task.id))
            out["done"] = done.status.state.value
            print(json.dumps(out))


    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)

SERVER = textwrap.dedent(
    """
    import asyncio, socket, sys

    import uvicorn
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.apps import A2AStarletteApplication
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import AgentCapabilities, AgentCard, AgentSkill, Part, TextPart
    from a2a.utils import new_task


    class Echo(AgentExecutor):
        async def execute(self, context, event_queue):
            task = context.current_task or new_task(context.message)
            await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.start_work()
            await updater.add_artifact([Part(root=TextPart(text="echo: " + context.get_user_input()))], name="response")
            await updater.complete()

        async def cancel(self, context, event_queue):
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


    async def main():
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        port = sock.getsockname()[1]
        card = AgentCard(
            name="sdk03-echo", description="a2a-sdk 0.3 echo", version="1.0.0", url=f"http://127.0.0.1:{port}/",
            capabilities=AgentCapabilities(streaming=True, push_notifications=False),
            default_input_modes=["text/plain"], default_output_modes=["text/plain"],
            skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
        )
        handler = DefaultRequestHandler(agent_executor=Echo(), task_store=InMemoryTaskStore())
        app = A2AStarletteApplication(agent_card=card, http_handler=handler).build()
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        print(port, flush=True)
        await server.serve(sockets=[sock])


    asyncio.run(main())
    """
)


@pytest.fixture(scope="session")
def sdk03_python() -> Path:
    """The 0.3 SDK's python, from its pinned, cached virtualenv (built now only if it is missing)."""
    python = sdk_env_python(Path(__file__).with_name(LOCK))
    assert _pinned(Path(__file__).with_name(LOCK))["a2a-sdk"].startswith("0.3.")
    return python


@pytest.mark.timeout(300)
async def test_sdk03_client_streams_resubscribes_and_gets_pushes(sdk03_python: Path, tmp_path: Path) -> None:
    script = tmp_path / "sdk03_client.py"
    script.write_text(CLIENT)
    result, posts = await run_client_with_webhook([str(sdk03_python), str(script)], [], tmp_path, "0.3")
    assert result["streaming"] is True and result["push"] is True
    stream = result["stream"]
    assert stream[0][0] == "task" and stream[-1] == ["status", "completed", True]
    chunks = [e for e in stream if e[0] == "artifact"]
    assert "".join(e[2] for e in chunks) == "one\ntwo\nthree\n"
    sub = result["subscribe"]
    assert sub[0][0] == "task" and sub[-1] == ["status", "completed", True]
    assert result["done"] == "completed"
    assert posts and all(token == "sdk03-token" and body["kind"] == "task" for token, body in posts)
    assert any(b["status"]["state"] == "completed" for _, b in posts)


@pytest.mark.timeout(300)
async def test_our_client_streams_from_the_sdk03_server(sdk03_python: Path, tmp_path: Path) -> None:
    path = tmp_path / "sdk03_server.py"
    path.write_text(SERVER)
    proc = await asyncio.create_subprocess_exec(
        str(sdk03_python), str(path), cwd=str(tmp_path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.strip().isdigit(), line
        url = f"http://127.0.0.1:{int(line)}"
        async with A2AClient() as client:
            assert (await client.resolve(url)).dialect == "0.3"
            message = Message(message_id="st03-1", role="user", parts=[Part(kind="text", text="hi")])
            items = [i async for i in client.stream_message(url, message)]
    finally:
        proc.terminate()
        await proc.wait()
    assert isinstance(items[0], Task)
    assert isinstance(items[-1], StatusUpdate) and items[-1].status.state is TaskState.COMPLETED and items[-1].final
    assert [p.text for i in items if isinstance(i, ArtifactUpdate) for p in i.artifact.parts] == ["echo: hi"]
