"""HTTP routes of the A2A relay; handlers stay thin and call :class:`roost.relay.Relay`.

Only the session credential header is read from the request; every other header (notably any
``x-murmur-task-*`` a caller adds) is ignored, because the relay stamps those itself.
"""

from __future__ import annotations

from aiohttp import web

from roost.http.context import RELAY
from roost.http.middleware import json_ok, read_json
from roost.wire import CREDENTIAL_HEADER

__all__ = ["routes"]

routes = web.RouteTableDef()


@routes.post("/a2a/send")
async def a2a_send(request: web.Request) -> web.Response:
    body = await read_json(request)
    return json_ok(await request.app[RELAY].send(request.headers.get(CREDENTIAL_HEADER), body))


@routes.post("/a2a/tasks/get")
async def a2a_tasks_get(request: web.Request) -> web.Response:
    body = await read_json(request)
    return json_ok(await request.app[RELAY].get(request.headers.get(CREDENTIAL_HEADER), body))


@routes.post("/a2a/tasks/cancel")
async def a2a_tasks_cancel(request: web.Request) -> web.Response:
    body = await read_json(request)
    return json_ok(await request.app[RELAY].cancel(request.headers.get(CREDENTIAL_HEADER), body))
