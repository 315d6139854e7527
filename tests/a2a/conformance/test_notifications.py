"""JSON-RPC 2.0 §4.1 and §6: a notification (no ``id``) is carried out and never answered, whatever is
wrong with it, and never held open; a batch answers its requests only, and nothing at all when it
holds notifications only."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from a2a.door import Door
from a2a.protocol.jsonrpc import MAX_BATCH
from a2a.protocol.models import TaskState
from tests.a2a.conformance.harness import Caller, Script


async def _post(caller: Caller, body: Any) -> tuple[int, bytes]:
    async with caller.http.post(caller.url + "/", data=json.dumps(body), headers=caller.d.headers()) as resp:
        return resp.status, await resp.read()


def _note(caller: Caller, op: str, params: Any) -> dict[str, Any]:
    method = caller.d.method(op) if op in ("send", "get", "list", "cancel") else op
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        body["params"] = params
    return body


@pytest.mark.parametrize("op", ["send", "get", "cancel", "list"])
async def test_notifications_get_no_response(caller: Caller, door: Door, script: Script, op: str) -> None:
    params = caller.d.send_params("from a notification") if op == "send" else {"id": "tsk_nope"}
    assert await _post(caller, _note(caller, op, params)) == (204, b"")
    if op == "send":  # carried out all the same
        await asyncio.wait_for(door.queue.wait_idle(), 5)
        assert [t.text for t in script.seen] == ["from a notification"]


def _bad_send(caller: Caller) -> dict[str, Any]:
    params = caller.d.send_params("x")
    params["message"]["parts"] = []
    return params


@pytest.mark.parametrize(
    ("op", "params"),
    [
        ("send", []),  # params not an object
        ("send", "x"),
        ("send", 5),
        ("get", []),
        ("send", "bad-send"),  # params an object, the message in it invalid
        ("get", {}),  # no id
        ("cancel", {"id": 5}),
        ("list", {"pageSize": -1}),
        ("tasks/frobnicate", {}),  # unknown method
        ("message/stream", {}),  # a capability the card declares false
    ],
)
async def test_a_broken_notification_is_not_answered(
    caller: Caller, door: Door, script: Script, op: str, params: Any
) -> None:
    if params == "bad-send":
        params = _bad_send(caller)
    assert await _post(caller, _note(caller, op, params)) == (204, b"")
    assert script.seen == [] and not door.queue.records()


async def test_the_same_broken_requests_are_answered(caller: Caller) -> None:
    """The twin of the test above: with an id, each of those gets its error."""
    for op, params, code in (("send", [], -32602), ("send", _bad_send(caller), -32602), ("get", {}, -32602)):
        status, body = await _post(caller, {**_note(caller, op, params), "id": 7})
        assert status == 200 and json.loads(body)["error"]["code"] == code


async def test_a_blocking_send_notification_returns_at_once(caller: Caller, door: Door, script: Script) -> None:
    """Nobody waits for a notification's answer: a send that would block is answered (204) at admission."""
    door.blocking_cap_secs = 3600.0
    params = caller.d.send_params("hold", immediate=False)  # blocking in both dialects
    status, body = await asyncio.wait_for(_post(caller, _note(caller, "send", params)), 30)
    assert (status, body) == (204, b"")
    (rec,) = door.queue.records()
    assert rec.state in (TaskState.SUBMITTED, TaskState.WORKING)  # still held by the runner
    script.release.set()
    await asyncio.wait_for(door.queue.wait_idle(), 5)
    assert rec.state is TaskState.COMPLETED


async def test_a_batch_of_notifications_gets_nothing_back(caller: Caller, door: Door, script: Script) -> None:
    batch = [_note(caller, "send", caller.d.send_params(f"n{i}", message_id=f"m{i}")) for i in range(3)]
    batch.append(_note(caller, "get", {"id": "tsk_nope"}))
    batch.append(_note(caller, "send", []))  # broken, and still a notification
    assert await _post(caller, batch) == (204, b"")
    await asyncio.wait_for(door.queue.wait_idle(), 5)
    assert sorted(t.text for t in script.seen) == ["n0", "n1", "n2"]


async def test_a_mixed_batch_answers_its_requests(caller: Caller, door: Door) -> None:
    batch = [
        {**_note(caller, "send", caller.d.send_params("a", message_id="ma")), "id": "r-send"},
        _note(caller, "send", caller.d.send_params("b", message_id="mb")),
        {**_note(caller, "get", {"id": "tsk_nope"}), "id": 2},
        {"jsonrpc": "2.0", "method": 1},  # not a request: answered with id null
        "not an object",
        {**_note(caller, "send", []), "id": "r-bad"},
    ]
    status, body = await _post(caller, batch)
    assert status == 200
    answers = json.loads(body)
    assert [a["id"] for a in answers] == ["r-send", 2, None, None, "r-bad"]
    assert "result" in answers[0]
    assert [a["error"]["code"] for a in answers[1:]] == [-32001, -32600, -32600, -32602]
    await asyncio.wait_for(door.queue.wait_idle(), 5)
    assert len(door.queue.records()) == 2


@pytest.mark.parametrize(
    ("body", "detail"),
    [([], "an empty batch"), ([{"jsonrpc": "2.0", "method": "x"}] * (MAX_BATCH + 1), f"at most {MAX_BATCH}")],
)
async def test_a_batch_the_door_will_not_take_is_one_error(
    caller: Caller, script: Script, body: list[Any], detail: str
) -> None:
    status, raw = await _post(caller, body)
    answer = json.loads(raw)
    assert status == 200 and answer["id"] is None
    assert answer["error"]["code"] == -32600 and detail in answer["error"]["message"]
    assert script.seen == []


async def test_null_id_is_a_request_not_a_notification(caller: Caller) -> None:
    r = await caller.call(caller.d.method("get"), {"id": "tsk_nope"}, rid=None)
    assert r["id"] is None and r["error"]["code"] == -32001
