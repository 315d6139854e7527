"""JSON-RPC 2.0 envelopes: parse a request on the door, build requests and read answers on the client.

Why hand-written and not pydantic: the door parses one envelope per request on its hot path and
must turn every malformed body into the exact JSON-RPC error (-32700 / -32600), never a
validation traceback. orjson and a few type checks do that in microseconds; wherever orjson and
the stdlib would disagree (integers wider than 64 bits, NaN, lone surrogates, values orjson
cannot write) the stdlib decides, so answers do not depend on which one ran.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import orjson

from a2a.protocol import errors
from a2a.protocol.ids import prefixed

JsonId = str | int | None
# orjson reads an integer past 64 bits as a float; the stdlib keeps it exact. A run of 19 digits
# anywhere sends the body to the stdlib. Found by mapping digits to "0" and the rest to " " and
# searching the run (both in C: a regex scan costs several times more on a small body).
_DIGITS_ONLY = bytes(ord("0") if chr(b).isdigit() and b < 128 else ord(" ") for b in range(256))
_LONG_RUN = b"0" * 19


def has_long_digit_run(body: bytes) -> bool:
    """Whether ``body`` has 19 ASCII digits in a row, where orjson and the stdlib part ways."""
    return _LONG_RUN in body.translate(_DIGITS_ONLY)


def loads(body: bytes) -> Any:
    """``json.loads(body)``, by orjson when it would give the same value."""
    if not has_long_digit_run(body):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    return json.loads(body)


class Request(NamedTuple):
    """One JSON-RPC request as the door sees it. ``params`` is always an object (absent → ``{}``).

    Immutable; a named tuple rather than a frozen dataclass because one is built per request on
    the door's hot path, and a frozen dataclass pays an ``object.__setattr__`` call per field.
    """

    id: JsonId
    method: str
    params: dict[str, object]
    notification: bool = False


_make = tuple.__new__


class RequestError(Exception):
    """A request that cannot be carried out: the id (if one could be read), the error to answer,
    and whether it was a notification (then the error is not answered, JSON-RPC 2.0 §4.1)."""

    def __init__(self, error: errors.JsonRpcError, request_id: JsonId = None, *, notification: bool = False) -> None:
        super().__init__(error.message)
        self.error = error
        self.request_id = request_id
        self.notification = notification


MAX_BATCH = 100
"""Members of one batch at most; a larger batch is one -32600 (the door's work per body stays bounded)."""

Member = Request | RequestError
"""One member of a batch: a request to carry out, or the error it gets (its own, per member)."""


def _valid_id(value: object) -> bool:
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse_body(body: bytes) -> Request | list[Member]:
    """Parse a request body: one request, or a batch (JSON-RPC 2.0 §6) as a list of members.

    Raises :class:`RequestError` when the body as a whole is answered with one error: not JSON,
    not an object or array, an empty batch, a batch over :data:`MAX_BATCH`, or a single request
    that is broken (see :func:`parse_envelope`).
    """
    try:
        obj = loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise RequestError(errors.parse_error()) from None
    if type(obj) is dict:
        return parse_envelope(obj)
    if type(obj) is not list:
        raise RequestError(errors.invalid_request("not a request object"))
    if not obj:
        raise RequestError(errors.invalid_request("an empty batch"))
    if len(obj) > MAX_BATCH:
        raise RequestError(errors.invalid_request(f"a batch holds at most {MAX_BATCH} requests"))
    members: list[Member] = []
    for item in obj:
        try:
            members.append(parse_envelope(item))
        except RequestError as exc:
            members.append(exc)
    return members


def parse_envelope(obj: object) -> Request:
    """One request object; raise :class:`RequestError` with the JSON-RPC error to answer.

    A request without an ``id`` member is a notification (JSON-RPC 2.0 §4.1): it is carried out
    and never answered, whatever goes wrong once it is known to be one (e.g. bad ``params``).
    An object that is not a request at all (bad ``jsonrpc``, ``method`` or ``id``) is answered
    -32600, with ``id`` null when it could not be read (§5, and the examples of §7).
    """
    if type(obj) is not dict:
        raise RequestError(errors.invalid_request("not a request object"))
    request_id = obj.get("id")
    if type(request_id) is not str and not _valid_id(request_id):  # a string id is the usual one
        raise RequestError(errors.invalid_request("id must be a string, an integer or null"))
    if obj.get("jsonrpc") != "2.0":
        raise RequestError(errors.invalid_request('jsonrpc must be "2.0"'), request_id)
    method = obj.get("method")
    if type(method) is not str:
        raise RequestError(errors.invalid_request("method must be a string"), request_id)
    notification = "id" not in obj
    params = obj.get("params")
    if params is None:
        params = {}
    elif type(params) is not dict:
        raise RequestError(errors.invalid_params("params must be an object"), request_id, notification=notification)
    return _make(Request, (request_id, method, params, notification))  # past the generated __new__


def dumps(obj: object) -> bytes:
    """Compact UTF-8 JSON, the form every answer and request is sent in."""
    try:
        return orjson.dumps(obj)
    except (orjson.JSONEncodeError, TypeError):  # e.g. an integer wider than 64 bits in part data
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def result_body(request_id: JsonId, result: object) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


def error_body(request_id: JsonId, error: errors.JsonRpcError) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": request_id, "error": error.to_object()})


def build_request(method: str, params: dict[str, object], request_id: str | None = None) -> dict[str, object]:
    """A client request envelope; ids are ``req_<uuid7>`` as murmur mints them."""
    return {"jsonrpc": "2.0", "id": request_id or prefixed("req"), "method": method, "params": params}


def read_result(body: bytes, url: str) -> Any:
    """Return ``result`` from a response body, or raise the matching client-side error."""
    try:
        obj = loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise errors.InvalidResponse(url, f"body is not JSON ({exc.__class__.__name__})") from None
    if not isinstance(obj, dict):
        raise errors.InvalidResponse(url, "body is not a JSON-RPC response object")
    err = obj.get("error")
    if err is not None:
        if not isinstance(err, dict) or not isinstance(err.get("code"), int):
            raise errors.InvalidResponse(url, "malformed JSON-RPC error object")
        message = err.get("message")
        raise errors.JsonRpcError(err["code"], message if isinstance(message, str) else "", err.get("data"), url=url)
    if "result" not in obj:
        raise errors.NoResult(url)
    return obj["result"]
