"""Interop with the official A2A SDK (a2a-sdk 1.x) in both dialects, as client and as server.

The SDK's import name ``a2a`` clashes with ours, so it lives in its own virtualenv and runs in
subprocesses: its client against a real Door (blocking and immediate sends, ListTasks,
continuation after input-required, history), and its Starlette server (JSON-RPC at
``/a2a/jsonrpc``, 0.3 compatibility on for the 0.3 run) against our client and the daemon's
relay. The virtualenv holds exactly the packages ``sdk-lock.txt`` pins; ``sdk-env.sh`` builds it
once in the user's cache (``tests/system-deps.sh`` runs it before the suite, so a run installs
nothing). If it cannot be built the fixture FAILS the test (never skips): interop is part of the
contract.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from a2a.client import A2AClient
from a2a.door import Door
from a2a.protocol.models import Message, Part, Task, TaskState
from tests.a2a.conformance.harness import Script
from tests.support.doorserve import serve_door
from tests.support.registry import RegistryBuilder

SDK_ENV = Path(__file__).with_name("sdk-env.sh")
SDK_LOCK = Path(__file__).with_name("sdk-lock.txt")

CLIENT_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys

    import httpx
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.types import (
        GetTaskRequest, ListTasksRequest, Message, Part, Role, SendMessageConfiguration, SendMessageRequest, TaskState,
    )


    async def send(client, message_id, text, immediate=None, **ids):
        config = SendMessageConfiguration(return_immediately=True) if immediate else None
        message = Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)], **ids)
        request = SendMessageRequest(message=message)
        if config is not None:
            request = SendMessageRequest(message=message, configuration=config)
        task = None
        async for event in client.send_message(request):
            task = event.task
        assert task is not None and task.id, "no task in the send answer"
        return task


    async def main(url: str, dialect: str, full: bool) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
            if dialect == "0.3":
                keep = [i for i in card.supported_interfaces if i.protocol_version.startswith("0.3")]
                del card.supported_interfaces[:]
                card.supported_interfaces.extend(keep)
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
            # message ids are unique per message (the door answers a seen one with its task); the SDK
            # does not ask to return at once
            sent = await send(client, f"sdk-{dialect}-msg-1", "hello from sdk")
            task = sent
            for _ in range(200):
                task = await client.get_task(GetTaskRequest(id=sent.id))
                if task.status.state == TaskState.TASK_STATE_COMPLETED:
                    break
                await asyncio.sleep(0.05)
            out = {
                "id": task.id,
                "context_id": task.context_id,
                "submitted_state": TaskState.Name(sent.status.state),
                "state": TaskState.Name(task.status.state),
                "artifact_text": task.artifacts[0].parts[0].text if task.artifacts else None,
                "interfaces": [i.protocol_version for i in card.supported_interfaces],
            }
            if not full:  # the basic run, also used against a real capsule (tests/capsule/test_sdk.py)
                print(json.dumps(out))
                return
            quick = await send(client, f"sdk-{dialect}-msg-2", "quick", immediate=True)
            asked = await send(client, f"sdk-{dialect}-msg-3", "ask:your name?")
            answered = await send(client, f"sdk-{dialect}-msg-4", "Ada", task_id=asked.id, context_id=asked.context_id)
            history = await client.get_task(GetTaskRequest(id=asked.id, history_length=10))
            out |= {
                "quick_state": TaskState.Name(quick.status.state),
                "asked": [TaskState.Name(asked.status.state), asked.status.message.parts[0].text],
                "answered": [answered.id == asked.id, TaskState.Name(answered.status.state)],
                "history": [m.parts[0].text for m in history.history],
            }
            if dialect == "1.0":
                page = await client.list_tasks(ListTasksRequest(page_size=2))
                rest = await client.list_tasks(ListTasksRequest(page_size=2, page_token=page.next_page_token))
                out["list"] = [len(page.tasks), page.total_size, bool(page.next_page_token), len(rest.tasks)]
            print(json.dumps(out))


    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:] == ["full"]))
    """
)

SERVER_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, socket, sys

    import uvicorn
    from starlette.applications import Starlette

    from a2a.helpers.proto_helpers import new_task
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes.agent_card_routes import create_agent_card_routes
    from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part, TaskState


    class Echo(AgentExecutor):
        async def execute(self, context, event_queue):
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            if context.current_task is None:
                submitted = TaskState.TASK_STATE_SUBMITTED
                task = new_task(context.task_id, context.context_id, submitted, history=[context.message])
                await event_queue.enqueue_event(task)
            await updater.start_work()
            await updater.add_artifact([Part(text="echo: " + context.get_user_input())], name="response")
            await updater.complete()

        async def cancel(self, context, event_queue):
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


    class Record:
        # Prints {path, version, method, config} for every POST, then hands the body on.
        def __init__(self, app):
            self.app = app

        async def __call__(self, scope, receive, send):
            if scope["type"] != "http" or scope["method"] != "POST":
                return await self.app(scope, receive, send)
            chunks, more = [], True
            while more:
                message = await receive()
                chunks.append(message.get("body", b""))
                more = message.get("more_body", False)
            raw = b"".join(chunks)
            body = json.loads(raw)
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            seen = {"path": scope["path"], "version": headers.get("a2a-version"), "method": body.get("method"),
                    "config": body.get("params", {}).get("configuration")}
            print(json.dumps(seen), flush=True)
            replayed = False

            async def replay():
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": raw, "more_body": False}
                return await receive()

            return await self.app(scope, replay, send)


    async def main(mode):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        port = sock.getsockname()[1]
        card = AgentCard(
            name="sdk-echo", description="a2a-sdk echo", version="1.0.0",
            supported_interfaces=[
                AgentInterface(
                    url=f"http://127.0.0.1:{port}/a2a/jsonrpc", protocol_binding="JSONRPC", protocol_version=mode
                )
            ],
            capabilities=AgentCapabilities(streaming=True, push_notifications=False),
            default_input_modes=["text/plain"], default_output_modes=["text/plain"],
            skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
        )
        handler = DefaultRequestHandler(agent_executor=Echo(), task_store=InMemoryTaskStore(), agent_card=card)
        routes = create_agent_card_routes(card) + create_jsonrpc_routes(
            handler, "/a2a/jsonrpc", enable_v0_3_compat=mode == "0.3"
        )
        server = uvicorn.Server(uvicorn.Config(Record(Starlette(routes=routes)), log_level="warning"))
        print(port, flush=True)
        await server.serve(sockets=[sock])


    asyncio.run(main(sys.argv[1]))
    """
)


@pytest.fixture(scope="session")
def sdk_python() -> Path:
    """The SDK's python, from the pinned, cached virtualenv (built now only if it is missing)."""
    return sdk_env_python(SDK_LOCK)


def sdk_env_python(lock: Path) -> Path:
    """The python of the virtualenv ``sdk-env.sh`` builds from ``lock``, checked to hold exactly the
    pinned a2a-sdk and uvicorn; the test FAILS (never skips) when it cannot be built."""
    proc = subprocess.run(["bash", str(SDK_ENV), lock.name], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"could not build the a2a-sdk environment ({lock.name}):\n{proc.stderr[-2000:]}")
    python = Path(proc.stdout.strip().splitlines()[-1])
    versions = subprocess.run(
        [str(python), "-I", "-c", "import importlib.metadata as m; print(m.version('a2a-sdk'), m.version('uvicorn'))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    pinned = _pinned(lock)
    assert versions == [pinned["a2a-sdk"], pinned["uvicorn"]], versions
    return python


def _pinned(lock: Path = SDK_LOCK) -> dict[str, str]:
    lines = [ln.strip() for ln in lock.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    return dict(ln.lower().replace("_", "-").split("==", 1) for ln in lines)


def test_every_sdk_package_is_pinned() -> None:
    """A line without an exact version would let the interop environment drift between runs."""
    lines = [ln.strip() for ln in SDK_LOCK.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines and all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][A-Za-z0-9_.+-]*", ln) for ln in lines), lines
    names = {ln.split("==")[0].lower().replace("_", "-") for ln in lines}
    assert {"a2a-sdk", "uvicorn", "starlette", "sse-starlette", "httpx"} <= names


serve = serve_door  # as the capsule host serves it


@pytest.mark.timeout(300)
@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
async def test_official_sdk_client(sdk_python: Path, tmp_path: Path, dialect: str) -> None:
    script_path = tmp_path / "sdk_client.py"
    script_path.write_text(CLIENT_SCRIPT)
    script = Script()
    door = Door(name="echo", version="1.0.0", session_id="ses_sdk", runner=script)
    async with serve(door) as url:
        proc = await asyncio.create_subprocess_exec(
            str(sdk_python),
            str(script_path),
            url,
            dialect,
            "full",
            cwd=str(tmp_path),  # keep our own a2a package off the SDK's sys.path
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-3000:]
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["id"].startswith("tsk_")
    # The SDK does not ask for an immediate answer, so the send blocks until the task is done.
    assert result["submitted_state"] == "TASK_STATE_COMPLETED"
    assert result["state"] == "TASK_STATE_COMPLETED"
    assert result["artifact_text"] == "echo: hello from sdk"
    assert result["quick_state"] == "TASK_STATE_SUBMITTED"  # answered at once, before it ran
    assert result["asked"] == ["TASK_STATE_INPUT_REQUIRED", "your name?"]
    assert result["answered"] == [True, "TASK_STATE_COMPLETED"]
    assert result["history"] == ["ask:your name?", "your name?", "Ada", "echo: Ada"]
    if dialect == "1.0":
        assert result["list"] == [2, 3, True, 1]
    assert {t.dialect for t in script.seen} == {dialect}
    assert script.seen[0].message_id == f"sdk-{dialect}-msg-1"


@contextlib.asynccontextmanager
async def sdk_server(python: Path, tmp_path: Path, mode: str) -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    path = tmp_path / f"sdk_server_{mode}.py"
    path.write_text(SERVER_SCRIPT)
    proc = await asyncio.create_subprocess_exec(
        str(python), str(path), mode, cwd=str(tmp_path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    seen: list[dict[str, Any]] = []
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.strip().isdigit(), line

        async def pump() -> None:
            assert proc.stdout is not None
            async for raw in proc.stdout:
                seen.append(json.loads(raw))

        pumping = asyncio.create_task(pump())
        yield f"http://127.0.0.1:{int(line)}", seen
        await asyncio.sleep(0.2)
        pumping.cancel()
    finally:
        proc.terminate()
        await proc.wait()


IMMEDIATE = {"1.0": {"returnImmediately": True}, "0.3": {"blocking": False}}


async def _completed(client: A2AClient, url: str, task_id: str) -> Task:
    for _ in range(100):
        task = await client.get_task(url, task_id)
        if task.status.state.terminal:
            return task
        await asyncio.sleep(0.05)
    raise AssertionError("the SDK server's task did not finish")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["1.0", "0.3"])
async def test_our_client_against_sdk_server(sdk_python: Path, tmp_path: Path, mode: str) -> None:
    async with sdk_server(sdk_python, tmp_path, mode) as (url, seen), A2AClient() as client:
        endpoint = await client.resolve(url)
        assert (endpoint.url, endpoint.dialect) == (url + "/a2a/jsonrpc", mode)
        sent = await client.send_message(
            url, Message(message_id="m1", role="user", parts=[Part(kind="text", text="hi")])
        )
        done = await _completed(client, url, sent.id)
    assert done.status.state == TaskState.COMPLETED
    assert done.artifacts is not None and done.artifacts[0].parts[0].text == "echo: hi"
    assert seen[0] == {"path": "/a2a/jsonrpc", "version": mode, "method": _SEND[mode], "config": IMMEDIATE[mode]}
    assert all(s["path"] == "/a2a/jsonrpc" and s["version"] == mode for s in seen)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["1.0", "0.3"])
async def test_relay_against_sdk_server(
    sdk_python: Path, tmp_path: Path, mode: str, daemon_factory: Any, registry: RegistryBuilder
) -> None:
    registry.add("sender", capabilities={"network": {"allow": ["127.0.0.1"]}})
    d = await daemon_factory(registry.root, spawn_allow=("sender",))
    work = tmp_path / "s"
    await asyncio.to_thread(work.mkdir)
    status, reg, _, _ = await d.call(
        "POST", "/register", json={"session_id": "ses_sdk", "name": "sender", "version": "0.1.0", "workdir": str(work)}
    )
    assert status == 200, reg
    cred = {"x-murmur-spawn-credential": reg["credential"]}
    async with sdk_server(sdk_python, tmp_path, mode) as (url, seen):
        status, body, _, _ = await d.call("POST", "/a2a/send", json={"peer_url": url, "text": "relayed"}, headers=cred)
        assert status == 200, body
        for _ in range(100):
            status, task, _, _ = await d.call(
                "POST", "/a2a/tasks/get", json={"peer_url": url, "task_id": body["task_id"]}, headers=cred
            )
            assert status == 200, task
            if task["state"] == "completed":
                break
            await asyncio.sleep(0.05)
    assert task["artifacts"] == [{"name": "response", "text": "echo: relayed"}]
    assert seen[0] == {"path": "/a2a/jsonrpc", "version": mode, "method": _SEND[mode], "config": IMMEDIATE[mode]}


_SEND = {"1.0": "SendMessage", "0.3": "message/send"}
