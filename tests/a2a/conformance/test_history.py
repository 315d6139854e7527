"""A2A 1.0 §3.2.4: per-task history, bounded, returned per ``historyLength`` (both dialects)."""

from __future__ import annotations

import aiohttp

from a2a.door import Door
from tests.a2a.conformance.harness import DIALECTS, SESSION, Caller, Script, serve


async def test_get_task_history_length(caller: Caller) -> None:
    first = await caller.send("ask:a?", immediate=False, message_id="m1")
    tid = first["id"]
    await caller.send("b", immediate=False, taskId=tid, message_id="m2")
    full = await caller.get(tid)
    assert len(full["history"]) == 4
    assert full["history"][0]["messageId"] == "m1"
    two = await caller.get(tid, historyLength=2)
    assert [m["parts"][0]["text"] for m in two["history"]] == ["b", "echo: b"]
    zero = await caller.get(tid, historyLength=0)
    assert zero.get("history", []) == []
    err = await caller.error("get", {"id": tid, "historyLength": -1})
    assert err["code"] == -32602 and "historyLength" in err["message"]
    err = await caller.error("get", {"id": tid, "historyLength": "2"})
    assert err["code"] == -32602


async def test_send_history_length(caller: Caller) -> None:
    plain = await caller.send("x", immediate=False)
    assert "history" not in plain  # a send answers without history unless asked
    task = await caller.send("y", immediate=False, history_length=1)
    assert [m["parts"][0]["text"] for m in task["history"]] == ["echo: y"]
    roles = {m["role"] for m in (await caller.send("z", immediate=False, history_length=5))["history"]}
    assert roles == ({"ROLE_USER", "ROLE_AGENT"} if caller.d.v1 else {"user", "agent"})
    err = await caller.error("send", caller.d.send_params("w", history_length=-3))
    assert err["code"] == -32602 and "historyLength" in err["message"]


async def test_history_is_bounded() -> None:
    for dialect in DIALECTS:
        door = Door(name="short", version="1", session_id=SESSION, runner=Script(), max_history=3)
        async with serve(door) as url, aiohttp.ClientSession() as http:
            c = Caller(http, url, dialect)
            tid = (await c.send("ask:1", immediate=False))["id"]
            for i in range(2, 5):
                await c.send(f"ask:{i}", immediate=False, taskId=tid, message_id=f"m{i}")
            kept = (await c.get(tid))["history"]
            assert [m["parts"][0]["text"] for m in kept] == ["3", "ask:4", "4"]
