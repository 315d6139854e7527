"""Interop with the official A2A SDK (a2a-sdk 1.x) as a client of our door, in both dialects.

The SDK's import name ``a2a`` clashes with ours, so it lives in its own virtualenv created under
pytest's tmp dir; a small script drives it in a subprocess against a real Door on an ephemeral
port. If the package index cannot be reached the fixture raises and the test FAILS (never skips):
interop is part of the contract.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from a2a.door import Door, DoorTask, TaskOutcome

SDK_SPEC = "a2a-sdk[http-server]>=1.3,<2"

CLIENT_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys

    import httpx
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState


    async def main(url: str, dialect: str) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
            if dialect == "0.3":
                keep = [i for i in card.supported_interfaces if i.protocol_version.startswith("0.3")]
                del card.supported_interfaces[:]
                card.supported_interfaces.extend(keep)
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
            request = SendMessageRequest(
                message=Message(message_id="sdk-msg-1", role=Role.ROLE_USER, parts=[Part(text="hello from sdk")])
            )
            sent = None
            async for event in client.send_message(request):
                sent = event.task
            assert sent is not None and sent.id, "no task in the send answer"
            task = sent
            for _ in range(200):
                task = await client.get_task(GetTaskRequest(id=sent.id))
                if task.status.state == TaskState.TASK_STATE_COMPLETED:
                    break
                await asyncio.sleep(0.05)
            print(json.dumps({
                "id": task.id,
                "context_id": task.context_id,
                "submitted_state": TaskState.Name(sent.status.state),
                "state": TaskState.Name(task.status.state),
                "artifact_text": task.artifacts[0].parts[0].text if task.artifacts else None,
                "interfaces": [i.protocol_version for i in card.supported_interfaces],
            }))


    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


@pytest.fixture(scope="session")
def sdk_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("a2a-sdk-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", SDK_SPEC],
        capture_output=True,
        text=True,
        timeout=280,
    )
    if proc.returncode != 0:
        pytest.fail(f"could not install {SDK_SPEC} (is the package index reachable?):\n{proc.stderr[-2000:]}")
    return python


@contextlib.asynccontextmanager
async def serve(door: Door) -> AsyncIterator[str]:
    runner = web.AppRunner(door.app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    door.url = url
    try:
        yield url
    finally:
        await runner.cleanup()


async def echo(task: DoorTask) -> TaskOutcome:
    return TaskOutcome.completed(f"echo: {task.text}")


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("dialect", "state"), [("1.0", "TASK_STATE_COMPLETED"), ("0.3", "TASK_STATE_COMPLETED")])
async def test_official_sdk_client(sdk_python: Path, tmp_path: Path, dialect: str, state: str) -> None:
    script = tmp_path / "sdk_client.py"
    script.write_text(CLIENT_SCRIPT)
    seen: list[DoorTask] = []

    async def runner(task: DoorTask) -> TaskOutcome:
        seen.append(task)
        return await echo(task)

    door = Door(name="echo", version="1.0.0", session_id="ses_sdk", runner=runner)
    async with serve(door) as url:
        proc = await asyncio.create_subprocess_exec(
            str(sdk_python),
            str(script),
            url,
            dialect,
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
    assert result["state"] == state
    assert result["artifact_text"] == "echo: hello from sdk"
    assert seen[0].dialect == dialect
    assert seen[0].message_id == "sdk-msg-1"
