"""The capsule host's door as a real process: a script that asks for input, and who sees which task.

An entrypoint asks for input by writing its question to the file named by
``MURMUR_INPUT_REQUEST`` and exiting 0 (docs/a2a.md); the next message naming the task runs
it again with ``MURMUR_TASK_TURN`` one higher. A direct caller sees only the tasks its own uid
created; the attacker is a child that dropped to uid 65534.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from a2a.client import A2AClient
from a2a.protocol.models import Message, Part, TaskState
from tests.support.capsules import Capsules, base_env
from tests.support.registry import RegistryBuilder
from tests.trace_checks import assert_trace_guarantees

ASKER = """
import os, sys
text = sys.stdin.read().strip()
turn = int(os.environ["MURMUR_TASK_TURN"])
state = "asker-" + os.environ["MURMUR_TASK_ID"]
if turn == 1:
    with open(state, "w") as f:
        f.write(text)
    with open(os.environ["MURMUR_INPUT_REQUEST"], "w") as f:
        f.write("Whom should I greet?\\n")
else:
    with open(state) as f:
        first = f.read()
    print(f"{first}, {text}!")
"""

OTHER_UID_CALLER = r"""
import json, sys, urllib.request
url, method, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
req = urllib.request.Request(url + "/", data=body, headers={"Content-Type": "application/json", "A2A-Version": "1.0"})
print(urllib.request.urlopen(req, timeout=10).read().decode())
"""


async def _until(client: A2AClient, url: str, task_id: str, state: TaskState) -> Any:
    for _ in range(300):
        task = await client.get_task(url, task_id, dialect="1.0")
        if task.status.state == state:
            return task
        await asyncio.sleep(0.05)
    raise AssertionError(f"task never reached {state.value}: {task.status}")


async def test_script_asks_for_input_and_is_continued(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    registry.add("asker", script=ASKER, extra={"lifecycle": {"after_task": "sleep"}})
    d = await daemon_factory(registry.root, spawn_allow=("asker",))
    work = tmp_path / "w"
    cp = await capsules.start("asker@0.1.0", work, registry=registry.root, env=base_env(MURMUR_ROOST_URL=d.url))
    async with A2AClient() as client:
        for dialect in ("1.0", "0.3"):
            first = Message(message_id=f"m1-{dialect}", role="user", parts=[Part(kind="text", text="Hello")])
            sent = await client.send_message(cp.url, first, dialect=dialect)
            asked = await _until(client, cp.url, sent.id, TaskState.INPUT_REQUIRED)
            assert asked.status.message is not None and asked.status.message.text == "Whom should I greet?"
            answer = Message(
                message_id=f"m2-{dialect}",
                role="user",
                parts=[Part(kind="text", text="world")],
                task_id=sent.id,
                context_id=sent.context_id,
            )
            again = await client.send_message(cp.url, answer, dialect=dialect)
            assert again.id == sent.id
            done = await _until(client, cp.url, sent.id, TaskState.COMPLETED)
            assert done.artifacts is not None and done.artifacts[0].parts[0].text == "Hello, world!\n"
    assert await cp.terminate() == 143
    recs = assert_trace_guarantees(cp.trace)
    starts = [r for r in recs if r["event_type"] == "task_start"]
    ends = [r for r in recs if r["event_type"] == "task_end"]
    assert len(starts) == 2 and len(ends) == 2  # one per task, not one per run
    assert [e["exit_status"] for e in ends] == ["ok", "ok"]
    received = [r for r in recs if r["event_type"] == "a2a_task_received"]
    assert len(received) == 2  # recorded with each task's first message


async def _as_nobody(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        "/usr/bin/python3",  # stdlib only; our venv is not readable by uid 65534
        "-c",
        OTHER_UID_CALLER,
        url,
        method,
        json.dumps(params),
        user=65534,
        group=65534,
        extra_groups=[],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    answer: dict[str, Any] = json.loads(out)
    return answer


async def test_direct_callers_see_only_their_uids_tasks(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    registry.add("holder", script="import sys\nprint(sys.stdin.read())\n", extra={"lifecycle": {"after_task": "sleep"}})
    work = tmp_path / "w"
    cp = await capsules.start("holder@0.1.0", work, registry=registry.root, env=base_env())
    async with A2AClient() as client:
        mine = await client.send_message(
            cp.url, Message(message_id="m-root", role="user", parts=[Part(kind="text", text="root's")])
        )
        await _until(client, cp.url, mine.id, TaskState.COMPLETED)
        r = await _as_nobody(cp.url, "GetTask", {"id": mine.id})
        assert r["error"] == {"code": -32001, "message": "Task not found"}
        r = await _as_nobody(cp.url, "CancelTask", {"id": mine.id})
        assert r["error"]["code"] == -32001
        r = await _as_nobody(cp.url, "ListTasks", {})
        assert r["result"]["tasks"] == [] and r["result"]["totalSize"] == 0
        msg = {"messageId": "m-nobody", "role": "ROLE_USER", "parts": [{"text": "nobody's"}], "taskId": mine.id}
        r = await _as_nobody(cp.url, "SendMessage", {"message": msg, "configuration": {"returnImmediately": True}})
        assert r["error"]["code"] == -32001  # cannot continue (or even learn of) another uid's task
        del msg["taskId"]
        r = await _as_nobody(cp.url, "SendMessage", {"message": msg, "configuration": {"returnImmediately": True}})
        theirs = r["result"]["task"]["id"]
        r = await _as_nobody(cp.url, "ListTasks", {})
        assert [t["id"] for t in r["result"]["tasks"]] == [theirs]
        with_root = await client.get_task(cp.url, mine.id)
        assert with_root.id == mine.id
    assert await cp.terminate() == 143


def test_blocking_cap_from_the_environment() -> None:
    from roost.capsule.serving import BLOCKING_CAP_ENV, blocking_cap

    assert blocking_cap({BLOCKING_CAP_ENV: "2.5"}) == 2.5
    for bad in ("", "0", "-3", "soon", "inf", "nan"):
        assert blocking_cap({BLOCKING_CAP_ENV: bad}) == 120.0, bad
    assert blocking_cap({}) == 120.0
