"""The dashboard's server-sent event streams: the daemon's events and state, and a job's log.

``/events`` relays the admin event stream (``roost`` events) and, every :data:`STATUS_SECS`, the
daemon's state when it changed (``status``: serving or draining), so a drain shows at once on an
open page; when the daemon stops the page gets ``gone`` with a sentence saying so, never a socket
error. A reader that goes away is not an error: its stream just ends (and the admin stream it
held is closed), with nothing said on the dashboard's terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

from aiohttp import web

from roost.core.admin_models import StatusAnswer
from roost.dashboard.admin import AdminError, AdminSocket

__all__ = ["KEEP_ALIVE", "STATUS_SECS", "event_stream", "log_stream", "sse"]

# Written whenever the daemon's stream sends its own keep-alive: a reader that left is noticed
# (the write fails) and its admin stream closed, instead of lingering until the next event.
KEEP_ALIVE = b": keep-alive\n\n"
STATUS_SECS = 1.0


def _frame(event: str, data: object) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def sse(request: web.Request, headers: dict[str, str]) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", **headers})
    await resp.prepare(request)
    return resp


async def _status_changes(admin: AdminSocket) -> AsyncIterator[dict[str, object]]:
    """The daemon's state each time it changes (first: as it is now)."""
    shown: object = None
    while True:
        status: StatusAnswer = await admin.get("/status")
        now = {"draining": status["draining"], "version": status["version"]}
        if now != shown:
            shown = now
            yield now
        await asyncio.sleep(STATUS_SECS)


async def _pump(resp: web.StreamResponse, admin: AdminSocket) -> None:
    """Daemon events and state changes onto ``resp`` until either side ends."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=1000)

    async def events() -> None:
        async for ev in admin.lines("/events?follow=1&replay=0"):
            await queue.put(KEEP_ALIVE if ev is None else _frame("roost", ev))
        await queue.put(None)

    async def states() -> None:
        async for state in _status_changes(admin):
            await queue.put(_frame("status", state))

    tasks = [asyncio.ensure_future(events()), asyncio.ensure_future(states())]
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({getter, *tasks}, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                getter.cancel()
                for task in done:
                    task.result()  # an AdminError ends the stream with its sentence
                return
            frame = getter.result()
            if frame is None:
                return
            await resp.write(frame)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, AdminError):
                await task


async def event_stream(request: web.Request, admin: AdminSocket, headers: dict[str, str]) -> web.StreamResponse:
    resp = await sse(request, headers)
    try:
        await resp.write(b"event: hello\ndata: {}\n\n")
        try:
            await _pump(resp, admin)
            gone = admin.stopped_sentence()
        except AdminError as exc:
            gone = exc.message
        await resp.write(_frame("gone", {"message": gone}))
    except ConnectionError:
        pass  # the reader left: nothing to report
    return resp


async def log_stream(
    request: web.Request, admin: AdminSocket, ident: str, headers: dict[str, str]
) -> web.StreamResponse:
    """A job's or session's log lines (``line``), until it ends (``end``)."""
    resp = await sse(request, headers)
    try:
        try:
            async for item in admin.lines(f"/logs/{ident}?follow=1&tail=200"):
                await resp.write(KEEP_ALIVE if item is None else _frame("line", item))
        except AdminError as exc:
            await resp.write(_frame("failed", {"message": exc.message}))
        await resp.write(b"event: end\ndata: {}\n\n")
    except ConnectionError:
        pass
    return resp
