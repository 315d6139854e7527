"""Who sees a task at a real capsule's door: the relayed session that created it, nobody else.

Session A sends through the daemon's relay (sealed) to a registered capsule that asks for input.
Then, as others would try: session B through the same relay gets -32001 for A's task whether it
gets, cancels or continues it, and B's list does not show it; a direct loopback caller of
another uid (65534) and of the capsule's own uid, unsealed, do not see it either. A sees and
continues its task all along, so every refusal is one that could have been an answer.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from a2a.protocol import seal
from tests.capsule.test_door_conformance import ASKER
from tests.support.capsules import Capsules, base_env, capsules
from tests.support.registry import RegistryBuilder
from tests.trust.attacker import NOBODY, request_as

__all__ = ["capsules"]  # the fixture, re-exported for this module

CRED = "x-murmur-spawn-credential"


async def test_a_relayed_sessions_task_is_its_own(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    registry.add("asker", script=ASKER, extra={"lifecycle": {"after_task": "sleep"}})
    registry.add("sender", capabilities={"network": {"allow": ["127.0.0.1"]}})
    d = await daemon_factory(registry.root, spawn_allow=("asker", "sender"))
    door = await capsules.start(
        "asker@0.1.0", tmp_path / "w", registry=registry.root, env=base_env(MURMUR_ROOST_URL=d.url)
    )
    a_sid, a_cred = await d.register_top("sender")
    b_sid, b_cred = await d.register_top("sender")

    async def relay(cred: str, path: str, **body: Any) -> tuple[int, Any]:
        status, answer, _, _ = await d.call("POST", path, json={"peer_url": door.url, **body}, headers={CRED: cred})
        return status, answer

    status, sent = await relay(a_cred, "/a2a/send", text="Hello")
    assert status == 200 and sent["trust"] == "trusted", sent
    tid, ctx = sent["task_id"], sent["context_id"]

    async def a_sees(state: str) -> None:
        for _ in range(600):
            status, got = await relay(a_cred, "/a2a/tasks/get", task_id=tid)
            assert status == 200, got
            if got["state"] == state:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"task {tid} never reached {state}: {got}")

    await a_sees("input-required")

    # Session B, through the same relay: the task does not exist for it.
    for path, body in (
        ("/a2a/tasks/get", {"task_id": tid}),
        ("/a2a/tasks/cancel", {"task_id": tid}),
        ("/a2a/send", {"text": "world", "task_id": tid, "context_id": ctx}),
    ):
        status, err = await relay(b_cred, path, **body)
        assert status == 502 and "-32001 Task not found" in err["error"], (path, err)

    # Listing is not a relay route; what the relay would send for B, sealed as it seals, lists nothing.
    key = d.roost.key_holder.door_key_for(door.session_id)

    async def listed_for(sid: str) -> list[str]:
        stamp = seal.seal(
            key, sender=sid, receiver=door.session_id, origin="peer", trust="trusted", traceparent="", subject=""
        )
        headers = {
            "Content-Type": "application/json",
            "A2A-Version": "1.0",
            "x-murmur-task-origin": "peer",
            "x-murmur-task-trust": "trusted",
            seal.SEAL_HEADER: stamp,
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        async with aiohttp.ClientSession() as http, http.post(door.url + "/", json=body, headers=headers) as resp:
            answer = await resp.json()
        return [t["id"] for t in answer["result"]["tasks"]]

    assert await listed_for(b_sid) == []
    assert await listed_for(a_sid) == [tid]

    # Direct loopback callers, unsealed: uid 65534, and the capsule's own uid (the test's).
    async def as_nobody(method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        status, answer = await request_as(NOBODY, door.url, "POST", "/", body, {"A2A-Version": "1.0"})
        assert status == 200, answer
        out: dict[str, Any] = answer
        return out

    msg = {"messageId": "m-direct", "role": "ROLE_USER", "parts": [{"text": "world"}], "taskId": tid}
    for call in (
        ("GetTask", {"id": tid}),
        ("CancelTask", {"id": tid}),
        ("SendMessage", {"message": msg, "configuration": {"returnImmediately": True}}),
    ):
        r = await as_nobody(*call)
        assert r["error"] == {"code": -32001, "message": "Task not found"}, (call, r)
    r = await as_nobody("ListTasks", {})
    assert r["result"]["tasks"] == [] and r["result"]["totalSize"] == 0
    own_uid = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    async with aiohttp.ClientSession() as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": tid}}
        async with http.post(door.url + "/", json=body, headers=own_uid) as resp:
            assert (await resp.json())["error"]["code"] == -32001
        body = {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}}
        async with http.post(door.url + "/", json=body, headers=own_uid) as resp:
            assert tid not in [t["id"] for t in (await resp.json())["result"]["tasks"]]

    # Session A still holds it: it continues the task, which completes with both messages.
    status, again = await relay(a_cred, "/a2a/send", text="world", task_id=tid, context_id=ctx)
    assert status == 200 and again["task_id"] == tid, again

    await a_sees("completed")
    assert (tmp_path / "w" / "out" / "result.txt").read_text() == "Hello, world!\n"
    assert await door.terminate() == 143
