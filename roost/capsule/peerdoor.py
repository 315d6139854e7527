"""``GET /resources/peer/<handle>`` at a capsule's own door, streamed through the daemon.

Why: in seed 000 the minting capsule's listener serves its peer handles (and writes
``peer_handle_redeem``), so an upstream runtime fetching a file dials the door of the capsule that
shared it. Here the daemon mints and checks handles (docs/peer-plane.md), so the door does not
check anything itself: it passes the request on to the daemon's ``GET /resources/peer/<handle>``
with this session's credential, which tells the daemon the redeem arrived at this session's
door — it then serves this session's handles only, and records every answer in this session's
trace — and streams the answer back unchanged: the same status, body, ``etag``,
``x-murmur-handle-id`` and refusal bodies as the daemon's own URL, so both URLs work for any
fetcher.

A body the daemon cuts short (its file changed while it was sent, say) is cut short here too:
the client's connection is aborted, never completed with a wrong etag.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import aiohttp
from aiohttp import web
from yarl import URL

from roost.core.wire import AUDIENCE_HEADER, CREDENTIAL_HEADER

__all__ = ["PEER_PREFIX", "ROUTE_KEYS", "PeerDoor"]

PEER_PREFIX = "/resources/peer"
ROUTE_KEYS = (("*", PEER_PREFIX), ("*", PEER_PREFIX + "/{tail}"))
"""The routes served in front of the door, as the authorization table names them (any method:
the daemon answers what it does not serve)."""
CHUNK = 64 * 1024
TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=60)
# What the daemon's answer carries that a fetcher reads; hop-by-hop headers stay behind.
_PASSED = ("content-type", "etag", "allow", "x-murmur-handle-id", "x-murmur-generation", "x-murmur-mtime-ms")

Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


class PeerDoor:
    """Routes ``/resources/peer`` and below to the daemon; everything else to the door."""

    def __init__(
        self,
        daemon_url: str | None,
        *,
        credential: Callable[[], str | None],
        http: Callable[[], aiohttp.ClientSession | None],
    ) -> None:
        self._url = daemon_url
        self._credential = credential
        self._http = http

    def wrap(self, door: Handler) -> Handler:
        """The door's handler with the peer routes in front of it."""

        async def handle(request: web.BaseRequest) -> web.StreamResponse:
            path = request.path
            if path == PEER_PREFIX or path.startswith(PEER_PREFIX + "/"):
                return await self.handle(request)
            return await door(request)

        return handle

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        credential, http = self._credential(), self._http()
        if self._url is None or credential is None or http is None:
            body = {
                "error": "io_error",
                "message": "this capsule is not registered with mur-roost, which serves its peer files",
            }
            return web.Response(status=503, body=json.dumps(body).encode(), content_type="application/json")
        headers = [(AUDIENCE_HEADER, v) for v in request.headers.getall(AUDIENCE_HEADER, [])]
        headers.append((CREDENTIAL_HEADER, credential))
        target = URL(self._url + request.rel_url.raw_path, encoded=True)
        try:
            async with http.request(
                request.method, target, headers=headers, allow_redirects=False, timeout=TIMEOUT
            ) as answer:
                return await self._relay(request, answer)
        except (aiohttp.ClientError, TimeoutError, OSError):
            if request.transport is not None and _started(request):
                request.transport.abort()
                return web.Response(status=500)
            return _coded(502, "mur-roost, which serves this capsule's peer files, did not answer")

    @staticmethod
    async def _relay(request: web.BaseRequest, answer: aiohttp.ClientResponse) -> web.StreamResponse:
        out = web.StreamResponse(status=answer.status)
        for name in _PASSED:
            value = answer.headers.get(name)
            if value is not None:
                out.headers[name] = value
        if answer.content_length is not None:
            out.content_length = answer.content_length
        request["peer_door_started"] = True
        await out.prepare(request)
        async for chunk in answer.content.iter_chunked(CHUNK):
            await out.write(chunk)
        await out.write_eof()
        return out


def _coded(status: int, message: str) -> web.Response:
    """An ``io_error`` in the peer plane's body shape (docs/peer-plane.md)."""
    body = json.dumps({"error": "io_error", "message": message}).encode()
    return web.Response(status=status, body=body, content_type="application/json")


def _started(request: web.BaseRequest) -> bool:
    try:
        return bool(request.get("peer_door_started"))
    except (KeyError, TypeError):
        return False
