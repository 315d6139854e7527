"""HTTP routes of the A2A relay; handlers stay thin and call :class:`roost.relay.Relay`.

Only the session credential header is read from the request; every other header (notably any
``x-murmur-task-*`` a caller adds) is ignored, because the relay stamps those itself.
"""

from __future__ import annotations

from aiohttp import web

from roost.http.context import ROOST
from roost.http.middleware import json_ok, read_json
from roost.wire import CREDENTIAL_HEADER

__all__ = ["routes"]

routes = web.RouteTableDef()


@routes.post("/a2a/send")
async def a2a_send(request: web.Request) -> web.Response:
    roost = request.app[ROOST]
    body = await read_json(request)
    return json_ok(await roost.relay.send(request.headers.get(CREDENTIAL_HEADER), body))


@routes.post("/a2a/tasks/get")
async def a2a_tasks_get(request: web.Request) -> web.Response:
    roost = request.app[ROOST]
    body = await read_json(request)
    return json_ok(await roost.relay.get(request.headers.get(CREDENTIAL_HEADER), body))


@routes.post("/a2a/tasks/cancel")
async def a2a_tasks_cancel(request: web.Request) -> web.Response:
    roost = request.app[ROOST]
    body = await read_json(request)
    return json_ok(await roost.relay.cancel(request.headers.get(CREDENTIAL_HEADER), body))
