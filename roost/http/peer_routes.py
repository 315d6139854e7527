"""HTTP routes of the peer plane; handlers stay thin and call :class:`roost.services.peer.plane.PeerPlane`.

``/resources/peer`` and everything below it is routed to one handler for *every* method, so the
405 (``allow: GET``) is decided by the plane before anything else, identically for every path,
and aiohttp's own method handling (which would also answer HEAD) never sees these paths.
``PeerError`` becomes the daemon's ``{"error": code, "message": sentence}`` body here (a redeem's
answer is rendered by :mod:`roost.http.peer_redeem`).
"""

from __future__ import annotations

from aiohttp import web

from roost.core.wire import CREDENTIAL_HEADER
from roost.http.bodies.peer import parse_fetch, parse_mint
from roost.http.context import PEER_PLANE, REFEREE
from roost.http.middleware import read_json
from roost.http.peer_redeem import read_redeem, render
from roost.services.peer.errors import PeerError

__all__ = ["routes"]

routes = web.RouteTableDef()


@routes.post("/handles")
async def mint_handle(request: web.Request) -> web.Response:
    rec = request.app[REFEREE].authenticate(request.headers.get(CREDENTIAL_HEADER))
    body = await read_json(request)
    try:
        answer = await request.app[PEER_PLANE].mint(rec, parse_mint(body))
    except PeerError as err:
        raise err.coded() from None
    return web.json_response(answer)


@routes.post("/peer-fetch")
async def peer_fetch(request: web.Request) -> web.Response:
    rec = request.app[REFEREE].authenticate(request.headers.get(CREDENTIAL_HEADER))
    body = await read_json(request)
    try:
        answer = await request.app[PEER_PLANE].fetch(rec, parse_fetch(body))
    except PeerError as err:
        raise err.coded() from None
    return web.json_response(answer)


@routes.route("*", "/resources/peer")
@routes.route("*", r"/resources/peer/{tail:[\s\S]*}")  # any characters, a newline too
async def redeem_handle(request: web.Request) -> web.StreamResponse:
    # A capsule's door passing a redeem on presents its session's credential: that session's
    # handles only, and its trace (roost/capsule/peerdoor.py). Anyone else presents none.
    credential = request.headers.get(CREDENTIAL_HEADER)
    door = request.app[REFEREE].authenticate(credential) if credential is not None else None
    return await render(request, await request.app[PEER_PLANE].redeem(read_redeem(request, door)))
