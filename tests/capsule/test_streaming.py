"""``roost-capsule run`` streams what its entrypoint writes, caps it, and runs follow-up turns.

A real capsule host process with a real entrypoint: the entrypoint writes a line, then waits for
a file the test creates, so the test sees the line arrive on an SSE stream while the entrypoint
is still running.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.support.capsules import Capsules, base_env
from tests.support.registry import RegistryBuilder
from tests.support.webserve import serve_app
from tests.trace_checks import assert_trace_guarantees

SLOW = """
import json, os, pathlib, sys, time
text = sys.stdin.read()
work = pathlib.Path.cwd()
if text.startswith("flood"):
    sys.stdout.write("x" * 5000)
    sys.exit(0)
print("first line for " + text, flush=True)
while not (work / "go").exists():
    time.sleep(0.01)
history = pathlib.Path(os.environ["MURMUR_TASK_HISTORY"])
earlier = [json.loads(l) for l in history.read_text().splitlines()] if history.exists() else []
print("turn", os.environ["MURMUR_TASK_TURN"], "saw", json.dumps(earlier), flush=True)
"""


def _stream_body(text: str, mid: str, task_id: str | None = None) -> str:
    message: dict[str, Any] = {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id is not None:
        message["taskId"] = task_id
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": message}})


async def _items(resp: aiohttp.ClientResponse) -> Any:
    async for line in resp.content:
        if line.startswith(b"data:"):
            yield json.loads(line[5:])["result"]


async def test_entrypoint_output_streams_as_written_and_turns_see_history(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    registry.add("slow", script=SLOW, extra={"lifecycle": {"after_task": "sleep"}})
    work = tmp_path / "w"
    work.mkdir()
    cp = await capsules.start(
        "slow@0.1.0", work, registry=registry.root, env=base_env(MURMUR_A2A_OUTPUT_CAP_BYTES="1000")
    )
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    async with aiohttp.ClientSession() as http:
        async with http.post(cp.url + "/", data=_stream_body("one", "m1"), headers=headers) as resp:
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            items = _items(resp)
            task = (await asyncio.wait_for(anext(items), 10))["task"]
            while True:
                item = await asyncio.wait_for(anext(items), 10)
                if "artifactUpdate" in item:
                    break
            chunk = item["artifactUpdate"]
            assert chunk["artifact"]["parts"] == [{"text": "first line for one\n"}] and chunk["append"] is False
            assert not (work / "go").exists()  # the entrypoint is still running, waiting for it
            # a follow-up while the first turn runs is queued as turn 2
            follow = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": "m2",
                        "role": "ROLE_USER",
                        "parts": [{"text": "two"}],
                        "taskId": task["id"],
                    },
                    "configuration": {"returnImmediately": True},
                },
            }
            async with http.post(cp.url + "/", data=json.dumps(follow), headers=headers) as r2:
                assert (await r2.json())["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"
            (work / "go").write_text("")
            rest = [i async for i in items]
        assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        get = {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": task["id"]}}
        async with http.post(cp.url + "/", data=json.dumps(get), headers=headers) as r3:
            done = (await r3.json())["result"]
        texts = {a["artifactId"]: a["parts"][0]["text"] for a in done["artifacts"]}
        assert texts["response"].startswith("first line for one\nturn 1 saw []")
        second = texts["response-2"]
        assert second.startswith("first line for two\nturn 2 saw ")
        saw = json.loads(second.split(" saw ", 1)[1])
        assert [(e["turn"], e["role"]) for e in saw] == [(1, "user"), (1, "agent")]
        assert saw[0]["text"] == "one" and saw[1]["text"] == texts["response"]

        # the per-task output cap: 1000 bytes kept, a sentence in the task says so
        flood = {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "SendMessage",
            "params": {"message": {"messageId": "m4", "role": "ROLE_USER", "parts": [{"text": "flood"}]}},
        }
        async with http.post(cp.url + "/", data=json.dumps(flood), headers=headers) as r4:
            capped = (await r4.json())["result"]["task"]
        assert capped["status"]["state"] == "TASK_STATE_COMPLETED"
        assert capped["artifacts"][0]["parts"][0]["text"] == "x" * 1000
        note = capped["status"]["message"]["parts"][0]["text"]
        assert "more than 1000 bytes" in note and "MURMUR_A2A_OUTPUT_CAP_BYTES" in note
    assert await cp.terminate() == 143
    assert not (work / ".murmur" / cp.session_id / "turns" / f"{task['id']}.jsonl").exists()
    # Each entrypoint run has its shell line, a follow-up turn's too, counted in its task's end;
    # stdout_bytes is what the entrypoint wrote, not the part the output cap kept.
    lines = assert_trace_guarantees(cp.trace)
    shells = [ln for ln in lines if ln["event_type"] == "shell"]
    ends = {ln["task_id"]: ln for ln in lines if ln["event_type"] == "task_end"}
    assert [ln["turn"] for ln in shells if ln["task_id"] == task["id"]] == [0, 1]
    assert ends[task["id"]]["shell_calls"] == 2
    (flooded,) = [ln for ln in shells if ln["task_id"] == capped["id"]]
    assert flooded["stdout_bytes"] == 5000 and flooded["exit_code"] == 0
    assert ends[capped["id"]]["shell_calls"] == 1


async def test_push_notifications_obey_the_sessions_egress_rule(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    registry.add(
        "pushy",
        script='import sys; print("done: " + sys.stdin.read())',
        capabilities={"network": {"allow": ["127.0.0.1"]}},
        extra={"lifecycle": {"after_task": "sleep"}},
    )
    posts: list[dict[str, Any]] = []
    arrived = asyncio.Event()

    async def hook(request: web.Request) -> web.Response:
        posts.append({"token": request.headers.get("X-A2A-Notification-Token"), "body": await request.json()})
        arrived.set()
        return web.Response()

    app = web.Application()
    app.router.add_post("/hook", hook)
    work = tmp_path / "p"
    work.mkdir()
    cp = await capsules.start("pushy@0.1.0", work, registry=registry.root)
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}

    def send(config: dict[str, Any], mid: str) -> str:
        return json.dumps(
            {
                "jsonrpc": "2.0",
                "id": mid,
                "method": "SendMessage",
                "params": {
                    "message": {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": mid}]},
                    "configuration": {"returnImmediately": True, "taskPushNotificationConfig": config},
                },
            }
        )

    async with serve_app(app) as base, aiohttp.ClientSession() as http:
        hook_url = base + "/hook"
        async with http.post(cp.url + "/", data=send({"url": hook_url, "token": "tk"}, "m1"), headers=headers) as r:
            assert "result" in await r.json()
        while not any(
            p["body"].get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED" for p in posts
        ):
            await asyncio.wait_for(arrived.wait(), 10)
            arrived.clear()
        assert all(p["token"] == "tk" for p in posts)
        for url, needle in (
            (cp.url + "/", "own mur-roost or door"),
            ("http://localhost:9/hook", "not in capabilities.network.allow"),
        ):
            async with http.post(cp.url + "/", data=send({"url": url}, "m2"), headers=headers) as r:
                err = (await r.json())["error"]
            assert err["code"] == -32602 and needle in err["message"], err
    assert await cp.terminate() == 143
