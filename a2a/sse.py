"""Serving one task's updates as a Server-Sent Events stream (the door's streaming methods).

Why its own module: a stream outlives the request handler's usual shape (one JSON answer), and
its rules are few but easy to get wrong. What it does (docs/a2a.md, "Streaming"):

* The stream is ``text/event-stream``; each event is one ``data:`` line holding a JSON-RPC
  response whose ``result`` is a stream item (:mod:`a2a.protocol.streamevents`). The first item
  is the Task as it stands; then every update, in order; the stream closes after the update
  that ends it (terminal or interrupted).
* The subscription is taken before the Task is written, with no await between: nothing that
  happens meanwhile is missed. It is bounded (:data:`MAX_BUFFERED` updates): a subscriber that
  stops reading is dropped, and its stream closed, rather than let the door's memory grow; a
  resubscribe starts again from the task's current state.
* A comment line (``: heartbeat``) is written whenever nothing was sent for ``heartbeat_secs``,
  so an idle stream stays alive through proxies and idle-connection guards.
* A client that goes away ends its subscription only; the task runs on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

from aiohttp import web

from a2a.protocol import jsonrpc
from a2a.protocol.models import Dialect
from a2a.protocol.streamevents import StatusUpdate, TaskEvent, dump_event, wrap_task
from a2a.taskrecord import TaskRecord

__all__ = ["DEFAULT_HEARTBEAT_SECS", "MAX_BUFFERED", "Subscription", "accepts_event_stream", "stream_task"]

DEFAULT_HEARTBEAT_SECS = 15.0
MAX_BUFFERED = 1024
HEARTBEAT = b": heartbeat\n\n"
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def accepts_event_stream(accept: str | None) -> bool:
    """Whether an ``Accept`` header asks for ``text/event-stream`` (a streamed answer)."""
    return accept is not None and "text/event-stream" in accept.lower()


class Subscription:
    """A listener on one record that buffers its updates for one consumer (bounded)."""

    __slots__ = ("_buffer", "_rec", "_waiter", "overflowed")

    def __init__(self, rec: TaskRecord) -> None:
        self._rec = rec
        self._buffer: deque[TaskEvent] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.overflowed = False
        rec.listen(self)

    def __call__(self, event: TaskEvent) -> None:
        if self.overflowed:
            return
        if len(self._buffer) >= MAX_BUFFERED:
            self.overflowed = True
            self._rec.unlisten(self)
        else:
            self._buffer.append(event)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        self._rec.unlisten(self)

    def drain(self) -> list[TaskEvent]:
        """Every buffered update, oldest first (the buffer is emptied)."""
        items = list(self._buffer)
        self._buffer.clear()
        return items

    async def wait(self, within: float) -> bool:
        """Wait up to ``within`` s for an update (or the overflow); False when none came."""
        if self._buffer or self.overflowed:
            return True
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(within):
                await self._waiter
        except TimeoutError:
            return False
        finally:
            self._waiter = None
        return True


def _event_bytes(request_id: Any, result: dict[str, Any]) -> bytes:
    return b"data: " + jsonrpc.result_body(request_id, result) + b"\n\n"


async def stream_task(
    request: web.BaseRequest,
    rec: TaskRecord,
    dialect: Dialect,
    request_id: Any,
    *,
    history_length: int | None = 0,
    heartbeat_secs: float = DEFAULT_HEARTBEAT_SECS,
) -> web.StreamResponse:
    """Answer ``request`` with the task's stream: the Task first, then its updates until one ends it."""
    sub = Subscription(rec)  # before anything is written or awaited: no update can be missed
    first = _event_bytes(request_id, wrap_task(rec.wire(dialect, history_length), dialect))
    settled = rec.settled
    response = web.StreamResponse(status=200, headers=SSE_HEADERS)
    try:
        await response.prepare(request)
        await response.write(first)
        while not settled:
            if not await sub.wait(heartbeat_secs):
                await response.write(HEARTBEAT)
                continue
            if sub.overflowed:  # too slow a reader: the client resubscribes from the current state
                break
            chunks = []
            for event in sub.drain():
                chunks.append(_event_bytes(request_id, dump_event(event, dialect)))
                if isinstance(event, StatusUpdate) and event.final:
                    settled = True
                    break
            await response.write(b"".join(chunks))
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
    except ConnectionError:
        pass  # the client went away: its subscription ends, the task goes on
    finally:
        sub.close()
    return response
