"""Validation the spec requires (-32602 with a sentence) and JSON-RPC 2.0 §4.1 notifications."""

from __future__ import annotations

import asyncio
import json

import pytest

from a2a.door import Door
from tests.a2a.conformance.harness import Caller, Dialect, Script


async def test_empty_parts(caller: Caller) -> None:
    params = caller.d.send_params("x")
    params["message"]["parts"] = []
    err = await caller.error("send", params)
    assert err == {"code": -32602, "message": "Invalid params: a message needs at least one part"}


async def test_03_part_needs_kind(caller: Caller) -> None:
    params = caller.d.send_params("x")
    params["message"]["parts"] = [{"text": "no kind"}]
    if caller.d.v1:
        assert (await caller.ok("send", params))["task"]["id"]  # 1.0 parts have no kind
    else:
        err = await caller.error("send", params)
        assert err["code"] == -32602 and "part 0 has no kind" in err["message"]


async def test_03_without_version_header_stays_lenient(caller: Caller) -> None:
    """murmur era-B peers send 0.3 without A2A-Version and without kind (docs/a2a.md)."""
    if caller.d.v1:
        pytest.skip("0.3 only")
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": Dialect("0.3").send_params("x")}
    body["params"]["message"]["parts"] = [{"text": "no kind"}]
    async with caller.http.post(
        caller.url + "/", data=json.dumps(body), headers={"Content-Type": "application/json"}
    ) as resp:
        assert "result" in await resp.json()


@pytest.mark.parametrize("op", ["send", "get", "cancel", "list"])
async def test_notifications_get_no_response(caller: Caller, door: Door, script: Script, op: str) -> None:
    params = caller.d.send_params("from a notification") if op == "send" else {"id": "tsk_nope"}
    body = {"jsonrpc": "2.0", "method": caller.d.method(op), "params": params}
    async with caller.http.post(caller.url + "/", data=json.dumps(body), headers=caller.d.headers()) as resp:
        assert resp.status == 204
        assert await resp.read() == b""
    if op == "send":  # carried out all the same
        await asyncio.wait_for(door.wait_idle(), 5)
        assert [t.text for t in script.seen] == ["from a notification"]


async def test_null_id_is_a_request_not_a_notification(caller: Caller) -> None:
    r = await caller.call(caller.d.method("get"), {"id": "tsk_nope"}, rid=None)
    assert r["id"] is None and r["error"]["code"] == -32001


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda p: p["message"].pop("messageId"), "messageId"),
        (lambda p: p["message"].pop("role"), "role"),
        (lambda p: p["message"].update(parts="x"), "parts"),
        (lambda p: p["message"].update(taskId=5), "taskId"),
        (lambda p: p.update(configuration={"historyLength": -1}), "historyLength"),
        (lambda p: p.pop("message"), "message"),
    ],
)
async def test_message_fields(caller: Caller, mutate: object, needle: str) -> None:
    params = caller.d.send_params("x")
    mutate(params)  # type: ignore[operator]
    err = await caller.error("send", params)
    assert err["code"] == -32602 and needle in err["message"], err
