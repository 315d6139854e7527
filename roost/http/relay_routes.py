"""HTTP routes of the A2A relay; handlers stay thin and call :class:`roost.services.relay.Relay`.

Each handler parses its body into a typed request (:mod:`roost.http.bodies.relay`; a malformed
one is counted as a refused relay call). Only the session credential header and the capsule
host's ``x-roost-task-trust`` (which can only lower the trust stamped) are read from the
request; every other header (notably any ``x-murmur-task-*`` a caller adds) is ignored, because
the relay stamps those itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from aiohttp import web

from a2a.sse import DEFAULT_HEARTBEAT_SECS, HEARTBEAT, SSE_HEADERS, accepts_event_stream
from roost.core.errors import BadRequest
from roost.core.fields import Body
from roost.core.requests import SendRequest
from roost.core.wire import CREDENTIAL_HEADER, TASK_TRUST_HEADER
from roost.http.bodies.relay import parse_send, parse_task_call
from roost.http.context import METRICS, RELAY
from roost.http.middleware import json_ok, read_json

__all__ = ["routes"]

T = TypeVar("T")

routes = web.RouteTableDef()


def _parsed(request: web.Request, method: str, parse: Callable[[Body], T], body: Body) -> T:
    """The body's typed request; a malformed one counts as a refused relay call, as the relay counts its own."""
    try:
        return parse(body)
    except BadRequest:
        request.app[METRICS].relay_requests.labels(method, "refused").inc()
        raise


@routes.post("/a2a/send")
async def a2a_send(request: web.Request) -> web.StreamResponse:
    req: SendRequest = _parsed(request, "send", parse_send, await read_json(request))
    if accepts_event_stream(request.headers.get("Accept")):
        return await _send_stream(request, req)
    relay = request.app[RELAY]
    return json_ok(
        await relay.send(request.headers.get(CREDENTIAL_HEADER), req, request.headers.get(TASK_TRUST_HEADER))
    )


async def _send_stream(request: web.Request, req: SendRequest) -> web.StreamResponse:
    """The streamed send: refusals before the peer's Task are the usual JSON answers (raised to the
    middleware); then one SSE event per item (the items that arrived together in one write), and
    a heartbeat comment whenever nothing was written for a while. One timer per stream watches for
    that, not a task: it is re-armed only when it fires (at the last write's time plus the
    interval), and a task writes a heartbeat only when one is due, so a stream that ends before
    the interval costs no task at all."""
    headers = request.headers
    items = request.app[RELAY].send_stream(headers.get(CREDENTIAL_HEADER), req, headers.get(TASK_TRUST_HEADER))
    first = await anext(items)  # the peer's Task arrived (and whatever came with it)
    response = _SseResponse(status=200, headers=SSE_HEADERS)
    loop = asyncio.get_running_loop()
    last_write = loop.time()
    timer: asyncio.TimerHandle | None = None
    beating: asyncio.Task[None] | None = None

    async def heartbeat() -> None:
        with contextlib.suppress(ConnectionError):
            await response.write(HEARTBEAT)

    def due() -> None:
        nonlocal last_write, timer, beating
        now = loop.time()
        if now - last_write >= DEFAULT_HEARTBEAT_SECS:
            last_write = now  # a heartbeat still being written (a slow reader) counts as this one
            if beating is None or beating.done():
                beating = loop.create_task(heartbeat())
        timer = loop.call_at(last_write + DEFAULT_HEARTBEAT_SECS, due)

    try:
        await response.prepare(request)
        await response.write(_events(first))
        last_write = loop.time()
        timer = loop.call_at(last_write + DEFAULT_HEARTBEAT_SECS, due)
        async for batch in items:  # what arrived together is written together, as the door writes it
            last_write = loop.time()
            await response.write(_events(batch))
        timer.cancel()
        timer = None
        if beating is not None:
            await beating  # a heartbeat being written finishes before the end of the stream
        await response.write_eof()
    except ConnectionError:
        pass  # the sender went away: the peer's task goes on
    finally:
        if timer is not None:
            timer.cancel()
        if beating is not None and not beating.done():
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await beating
        await items.aclose()
    return response


class _SseResponse(web.StreamResponse):
    """The stream's response, whose head goes out with its first event in one write: aiohttp's
    opt-in for buffering the head (its ``Response`` opts in too). The first event is written right
    after :meth:`prepare`, so nothing waits on it."""

    _send_headers_immediately = False


def _events(items: list[dict[str, Any]]) -> bytes:
    """SSE events, one per item."""
    return b"".join(map(_event, items)) if len(items) > 1 else _event(items[0])


def _event(item: dict[str, Any]) -> bytes:
    """One SSE event, its JSON compact as a plain send's answer (:func:`json_ok`) is; the stdlib
    writes what orjson cannot (a lone surrogate a peer's text may carry)."""
    try:
        data = orjson.dumps(item)
    except orjson.JSONEncodeError:
        data = json.dumps(item, separators=(",", ":")).encode()
    return b"data: " + data + b"\n\n"


@routes.post("/a2a/tasks/get")
async def a2a_tasks_get(request: web.Request) -> web.Response:
    req = _parsed(request, "get", parse_task_call, await read_json(request))
    relay = request.app[RELAY]
    return json_ok(await relay.get(request.headers.get(CREDENTIAL_HEADER), req, request.headers.get(TASK_TRUST_HEADER)))


@routes.post("/a2a/tasks/cancel")
async def a2a_tasks_cancel(request: web.Request) -> web.Response:
    req = _parsed(request, "cancel", parse_task_call, await read_json(request))
    relay = request.app[RELAY]
    trust = request.headers.get(TASK_TRUST_HEADER)
    return json_ok(await relay.cancel(request.headers.get(CREDENTIAL_HEADER), req, trust))
