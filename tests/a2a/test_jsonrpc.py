"""JSON-RPC envelope parsing and error objects."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a.protocol import errors, jsonrpc


def test_parse_request_ok() -> None:
    r = jsonrpc.parse_body(b'{"jsonrpc":"2.0","id":"a","method":"tasks/get","params":{"id":"t"}}')
    assert r == jsonrpc.Request("a", "tasks/get", {"id": "t"})
    assert jsonrpc.parse_body(b'{"jsonrpc":"2.0","id":3,"method":"m"}') == jsonrpc.Request(3, "m", {})
    assert jsonrpc.parse_body(b'{"jsonrpc":"2.0","method":"m"}') == jsonrpc.Request(None, "m", {}, True)
    assert jsonrpc.parse_body(b'{"jsonrpc":"2.0","id":null,"method":"m"}') == jsonrpc.Request(None, "m", {})


def test_batches() -> None:
    members = jsonrpc.parse_body(
        b'[{"jsonrpc":"2.0","id":1,"method":"m"},{"jsonrpc":"2.0","method":"n","params":[]},3]'
    )
    assert isinstance(members, list) and members[0] == jsonrpc.Request(1, "m", {})
    note, bad = members[1], members[2]
    assert isinstance(note, jsonrpc.RequestError) and note.notification and note.error.code == -32602
    assert isinstance(bad, jsonrpc.RequestError) and not bad.notification and bad.error.code == -32600


@pytest.mark.parametrize(
    ("body", "code", "rid"),
    [
        (b"", -32700, None),
        (b"{", -32700, None),
        (b"\xff\xfe", -32700, None),
        (b"[]", -32600, None),
        (b"[" + b",".join([b"{}"] * (jsonrpc.MAX_BATCH + 1)) + b"]", -32600, None),
        (b"1", -32600, None),
        (b'{"jsonrpc":"2.0","id":true,"method":"m"}', -32600, None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', -32600, None),
        (b'{"id":1,"method":"m"}', -32600, 1),
        (b'{"jsonrpc":"2.0","id":1}', -32600, 1),
        (b'{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}', -32602, 1),
        (b'{"jsonrpc":"2.0","method":1,"params":"bar"}', -32600, None),  # not a request: not a notification
    ],
)
def test_parse_request_errors(body: bytes, code: int, rid: object) -> None:
    with pytest.raises(jsonrpc.RequestError) as info:
        jsonrpc.parse_body(body)
    assert info.value.error.code == code and info.value.request_id == rid
    assert not info.value.notification


@pytest.mark.parametrize("params", [b"[]", b'"x"', b"5", b"true"])
def test_a_notification_with_bad_params_stays_a_notification(params: bytes) -> None:
    with pytest.raises(jsonrpc.RequestError) as info:
        jsonrpc.parse_body(b'{"jsonrpc":"2.0","method":"m","params":' + params + b"}")
    assert info.value.notification and info.value.error.code == -32602


def test_error_objects_exact() -> None:
    assert errors.parse_error().to_object() == {"code": -32700, "message": "Parse error"}
    assert errors.method_not_found().to_object() == {"code": -32601, "message": "Method not found"}
    assert errors.invalid_params("x").to_object() == {"code": -32602, "message": "Invalid params: x"}
    assert errors.internal_error().to_object() == {"code": -32603, "message": "internal error"}
    assert errors.task_not_found().to_object() == {"code": -32001, "message": "Task not found"}
    assert errors.JsonRpcError(1, "m", {"k": 1}).to_object() == {"code": 1, "message": "m", "data": {"k": 1}}
    assert errors.completion_misaddressed(None).message == (
        "completion is addressed to session <unaddressed>, which is not the session running here"
    )


def test_bodies() -> None:
    assert jsonrpc.result_body(1, {"a": "é"}) == '{"jsonrpc":"2.0","id":1,"result":{"a":"é"}}'.encode()
    assert jsonrpc.error_body(None, errors.parse_error()) == (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'
    )
    req = jsonrpc.build_request("message/send", {})
    assert req["id"].startswith("req_") and req["jsonrpc"] == "2.0"


def test_read_result() -> None:
    u = "http://h:1"
    assert jsonrpc.read_result(b'{"jsonrpc":"2.0","id":1,"result":{"x":1}}', u) == {"x": 1}
    with pytest.raises(errors.JsonRpcError) as info:
        jsonrpc.read_result(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found"}}', u)
    assert str(info.value) == "A2A error from http://h:1: -32001 Task not found"
    with pytest.raises(errors.NoResult) as nr:
        jsonrpc.read_result(b'{"jsonrpc":"2.0","id":1}', u)
    assert str(nr.value) == "no result in A2A response from http://h:1"
    with pytest.raises(errors.InvalidResponse, match="failed to parse response from http://h:1"):
        jsonrpc.read_result(b"<html>", u)
    with pytest.raises(errors.InvalidResponse):
        jsonrpc.read_result(b'{"error":"nope"}', u)


@given(st.binary(max_size=64) | st.text(alphabet='0123456789 ,[]-.e"', max_size=64).map(str.encode))
def test_long_digit_runs_go_to_the_stdlib(body: bytes) -> None:
    """The C-speed digit-run check agrees with the regex it replaced."""
    assert jsonrpc.has_long_digit_run(body) == (re.search(rb"[0-9]{19}", body) is not None)
