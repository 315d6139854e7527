"""Interop with the official A2A JS SDK (``@a2a-js/sdk`` 1.3.0) as a real peer, under Node.js.

Its client drives our door (send blocking and immediate, cancel, input-required continued by
the next message, get with history, ListTasks paging in 1.0, not-found); our client and the
daemon's relay drive its express server, whose JSON-RPC interface is at ``/a2a/jsonrpc`` (not
the card's origin), in 1.0 and with its 0.3 compatibility layer on. The package is installed
from the npm registry into ``tests/a2a/js`` (``tests/system-deps.sh`` does ``npm ci``; this module does it
too when ``node_modules`` is missing) and the test FAILS, never skips, when it cannot be.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from a2a.client import A2AClient
from a2a.door import Door
from a2a.protocol.models import Message, Part, Task, TaskState
from tests.a2a.conformance.harness import SESSION, Script, serve
from tests.a2a.test_sdk_streaming import _completed, run_client_with_webhook
from tests.support.registry import RegistryBuilder

JS_DIR = Path(__file__).parent / "js"
CRED = "x-murmur-spawn-credential"


@pytest.fixture(scope="session")
def node() -> str:
    path = shutil.which("node")
    if path is None:
        pytest.fail("Node.js is required for the JS SDK interop tests (tests/system-deps.sh installs it)")
    if not (JS_DIR / "node_modules" / "@a2a-js" / "sdk").is_dir():
        proc = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, capture_output=True, text=True, timeout=300
        )
        if proc.returncode != 0:
            pytest.fail(f"npm ci in {JS_DIR} failed (is the npm registry reachable?):\n{proc.stderr[-2000:]}")
    return path


@pytest.mark.timeout(120)
@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
async def test_js_client_against_our_door(node: str, dialect: str) -> None:
    script = Script()
    door = Door(name="door", version="1", session_id=SESSION, runner=script)
    async with serve(door) as url:
        proc = await asyncio.create_subprocess_exec(
            node,
            "client.mjs",
            url,
            dialect,
            cwd=JS_DIR,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, err.decode()[-3000:]
    seen: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    assert seen["blocking"]["state"] == "TASK_STATE_COMPLETED"  # the JS client blocks by default
    assert seen["blocking"]["artifact"] == "echo: hello from js"
    assert seen["immediate"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    assert seen["canceled"] == "TASK_STATE_CANCELED"
    assert seen["asked"] == {"state": "TASK_STATE_INPUT_REQUIRED", "question": "your name?"}
    assert seen["answered"] == {"same": True, "state": "TASK_STATE_COMPLETED", "artifact": "echo: Ada"}
    assert seen["history"] == ["ask:your name?", "your name?", "Ada", "echo: Ada"]
    assert seen["notFound"] == "JsonRpcTaskNotFoundError"
    if dialect == "1.0":
        assert seen["list"] == {"first": 2, "total": 3, "next": True, "rest": 1, "last": ""}
    assert {t.dialect for t in script.seen} == {dialect}
    assert [t.turn for t in script.seen if t.text == "Ada"] == [2]


@contextlib.asynccontextmanager
async def js_server(node: str, mode: str) -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    proc = await asyncio.create_subprocess_exec(
        node, "server.mjs", mode, cwd=JS_DIR, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    seen: list[dict[str, Any]] = []
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line.strip().isdigit(), line
        url = f"http://127.0.0.1:{int(line)}"

        async def pump() -> None:
            assert proc.stdout is not None
            async for raw in proc.stdout:
                seen.append(json.loads(raw))

        pumping = asyncio.create_task(pump())
        yield url, seen
        await asyncio.sleep(0.1)
        pumping.cancel()
    finally:
        proc.terminate()
        await proc.wait()


def _msg(text: str) -> Message:
    return Message(message_id=f"m-{text}", role="user", parts=[Part(kind="text", text=text)])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["1.0", "0.3"])
async def test_our_client_against_js_server(node: str, mode: str) -> None:
    async with js_server(node, mode) as (url, seen), A2AClient() as client:
        endpoint = await client.resolve(url)
        assert (endpoint.url, endpoint.dialect) == (url + "/a2a/jsonrpc", mode)
        sent = await client.send_message(url, _msg("hi"))
        got = await client.get_task(url, sent.id)
        assert got.status.state == TaskState.COMPLETED
        assert got.artifacts is not None and got.artifacts[0].parts[0].text == "echo: hi"
    names = ("SendMessage", "GetTask") if mode == "1.0" else ("message/send", "tasks/get")
    assert seen == [{"path": "/a2a/jsonrpc", "version": mode, "method": m} for m in names]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["1.0", "0.3"])
async def test_relay_against_js_server(
    node: str, mode: str, daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    registry.add("sender", capabilities={"network": {"allow": ["127.0.0.1"]}})
    d = await daemon_factory(registry.root, spawn_allow=("sender",))
    work = tmp_path / "s"
    await asyncio.to_thread(work.mkdir)
    status, reg, _, _ = await d.call(
        "POST", "/register", json={"session_id": "ses_js", "name": "sender", "version": "0.1.0", "workdir": str(work)}
    )
    assert status == 200, reg
    async with js_server(node, mode) as (url, seen):
        status, body, _, _ = await d.call(
            "POST", "/a2a/send", json={"peer_url": url, "text": "relayed"}, headers={CRED: reg["credential"]}
        )
        assert status == 200, body
        status, task, _, _ = await d.call(
            "POST",
            "/a2a/tasks/get",
            json={"peer_url": url, "task_id": body["task_id"]},
            headers={CRED: reg["credential"]},
        )
        assert status == 200, task
    assert task["state"] == "completed" and task["artifacts"] == [{"name": "response", "text": "echo: relayed"}]
    names = ("SendMessage", "GetTask") if mode == "1.0" else ("message/send", "tasks/get")
    assert seen == [{"path": "/a2a/jsonrpc", "version": mode, "method": m} for m in names]
    trace = [json.loads(x) for x in (work / ".murmur" / "ses_js" / "trace.jsonl").read_text().splitlines()]
    assert [r["event_type"] for r in trace] == ["a2a_send"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
async def test_js_client_streams_subscribes_and_gets_pushes(node: str, dialect: str) -> None:
    seen, posts = await run_client_with_webhook([node, "client.mjs"], [dialect], JS_DIR, dialect)
    stream = seen["stream"]
    assert stream[0][0] == "task" and stream[-1] == ["status", "TASK_STATE_COMPLETED"]
    assert "".join(e[1] for e in stream if e[0] == "artifact") == "one\ntwo\nthree\n"
    assert seen["subscribe"][0][0] == "task" and seen["subscribe"][-1] == ["status", "TASK_STATE_COMPLETED"]
    assert posts and all(token == "js-token" for token, _ in posts) and any(_completed(b) for _, b in posts)
    if dialect == "1.0":
        assert seen["unfiltered"] >= 2  # listTasks({}) with the SDK's UNRECOGNIZED status: no filter


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["1.0", "0.3"])
async def test_our_client_streams_from_js_server(node: str, mode: str) -> None:
    async with js_server(node, mode) as (url, seen), A2AClient() as client:
        items = [i async for i in client.stream_message(url, _msg("streamed"))]
        for _ in range(250):  # its log line may come after its answer, on a loaded box
            if seen:
                break
            await asyncio.sleep(0.02)
    task = items[0]
    assert isinstance(task, Task) and task.status.state is TaskState.COMPLETED
    assert task.artifacts is not None and task.artifacts[0].parts[0].text == "echo: streamed"
    assert seen == [
        {
            "path": "/a2a/jsonrpc",
            "version": mode,
            "method": "SendStreamingMessage" if mode == "1.0" else "message/stream",
        }
    ]
