"""Validation the spec requires: -32602 with a sentence (notifications: test_notifications.py)."""

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


async def _send_without_version_header(caller: Caller, params: dict[str, object]) -> dict[str, object]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params}
    async with caller.http.post(
        caller.url + "/", data=json.dumps(body), headers={"Content-Type": "application/json"}
    ) as resp:
        out: dict[str, object] = await resp.json()
        return out


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda p: p["message"].update(parts=[{"text": "no kind"}]), "part 0 has no kind"),
        (lambda p: p["message"].pop("kind"), 'kind "message"'),
        (lambda p: p.update(p.pop("message")), "message must be an object"),  # the fields straight in params
    ],
    ids=["part-kind", "message-kind", "message-in-params"],
)
async def test_03_without_version_header_is_03(caller: Caller, mutate: object, needle: str) -> None:
    """An absent A2A-Version header means 0.3, with all of 0.3's requirements (A2A 1.0 §3.6.2)."""
    if caller.d.v1:
        pytest.skip("0.3 only")
    good = Dialect("0.3").send_params("x")
    assert "result" in await _send_without_version_header(caller, good)
    bad = Dialect("0.3").send_params("x")
    mutate(bad)  # type: ignore[operator]
    r = await _send_without_version_header(caller, bad)
    err = r["error"]
    assert isinstance(err, dict) and err["code"] == -32602 and needle in err["message"], r


@pytest.mark.parametrize("role", ["ROLE_BOGUS", "", "bogus", "USER", 5, None, ["user"], "other-dialect"])
async def test_role_must_be_known(caller: Caller, role: object) -> None:
    params = caller.d.send_params("x")
    if role == "other-dialect":  # each dialect spells its roles its own way
        role = "user" if caller.d.v1 else "ROLE_USER"
    params["message"]["role"] = role
    err = await caller.error("send", params)
    want = "role must be ROLE_USER or ROLE_AGENT" if caller.d.v1 else 'role must be "user" or "agent"'
    assert err == {"code": -32602, "message": f"Invalid params: {want}"}


async def test_agent_role_is_known(caller: Caller) -> None:
    params = caller.d.send_params("x")
    params["message"]["role"] = "ROLE_AGENT" if caller.d.v1 else "agent"
    assert await caller.ok("send", params)


async def test_message_id_must_not_be_empty(caller: Caller) -> None:
    err = await caller.error("send", caller.d.send_params("x", message_id=""))
    assert err == {"code": -32602, "message": "Invalid params: messageId must be a non-empty string"}


V1_BAD_PARTS = [
    ({"text": "a", "data": {"k": 1}}, "part 0 carries text and data; a part carries exactly one of them"),
    ({"url": "file:///x", "raw": "aGk="}, "part 0 carries raw and url; a part carries exactly one of them"),
    ({"text": "a", "url": "file:///x"}, "part 0 carries text and url"),
    ({}, "part 0 has no text, raw, url or data"),
    ({"metadata": {}}, "part 0 has no text, raw, url or data"),
    ({"file": {"uri": "file:///x"}}, "file is the A2A 0.3 shape"),
    ({"url": 5}, "part 0 url must be a string"),
    ({"url": "file:///x", "mediaType": 5}, "part 0 mediaType must be a string"),
]
V03_BAD_PARTS = [
    ({"kind": "text"}, "part 0 of kind text needs a text string"),
    ({"kind": "text", "text": 3}, "part 0 of kind text needs a text string"),
    ({"kind": "file", "file": {}}, "part 0 file carries exactly one of uri or bytes"),
    ({"kind": "file", "file": {"uri": "file:///x", "bytes": "aGk="}}, "exactly one of uri or bytes"),
    ({"kind": "file", "file": "file:///x"}, "part 0 of kind file needs a file object"),
    ({"kind": "file", "url": "file:///x"}, "part 0 of kind file needs a file object"),
    ({"kind": "data"}, "part 0 of kind data needs data"),
    ({"kind": "image", "text": "x"}, "part 0 has unknown kind 'image'"),
]


@pytest.mark.parametrize("index", range(8))
async def test_part_shape(caller: Caller, index: int) -> None:
    """1.0: exactly one of text/raw/url/data; 0.3: a known kind carrying its field."""
    part, needle = (V1_BAD_PARTS if caller.d.v1 else V03_BAD_PARTS)[index]
    params = caller.d.send_params("x")
    params["message"]["parts"] = [part]
    err = await caller.error("send", params)
    assert err["code"] == -32602 and needle in err["message"], err


@pytest.mark.parametrize("kind", [None, "task", "Message"])
async def test_03_message_needs_kind_message(caller: Caller, kind: str | None) -> None:
    params = caller.d.send_params("x")
    if kind is None:
        params["message"].pop("kind", None)
    else:
        params["message"]["kind"] = kind
    if caller.d.v1:  # kind is not a 1.0 field: ignored
        assert await caller.ok("send", params)
        return
    err = await caller.error("send", params)
    assert err == {"code": -32602, "message": 'Invalid params: an A2A 0.3 message needs kind "message"'}


async def test_good_parts_of_every_kind(caller: Caller, door: Door, script: Script) -> None:
    if caller.d.v1:
        parts = [{"text": "a"}, {"data": {"k": [1]}}, {"url": "file:///x", "mediaType": "text/plain"}, {"text": "b"}]
    else:
        parts = [
            {"kind": "text", "text": "a"},
            {"kind": "data", "data": {"k": [1]}},
            {"kind": "file", "file": {"uri": "file:///x", "mimeType": "text/plain"}},
            {"kind": "text", "text": "b", "metadata": {"m": 1}},
        ]
    params = caller.d.send_params("x")
    params["message"]["parts"] = parts
    await caller.ok("send", params)
    await asyncio.wait_for(door.queue.wait_idle(), 5)
    (task,) = script.seen
    assert task.text == "a\nb"
    assert [p.kind for p in task.parts] == ["text", "data", "file", "text"]
    file = task.parts[2].file
    assert file is not None and (file.uri, file.mime_type) == ("file:///x", "text/plain")


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
