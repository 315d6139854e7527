"""Connection limits on the TCP listener: a deadline for the first request head, an idle
keep-alive timeout, and a cap on open connections per uid.

Why here and not in a proxy: every local user can reach the loopback port, so one user's
thousands of silent or trickling connections must not use up the daemon's descriptors or its
loop. Each accepted connection is identified at once (the uid behind it, by the exact
sock_diag lookup of :mod:`roost.http.caller`, cached for the connection's requests):

* over ``max_connections_per_uid`` open connections from that uid → closed on accept;
* no complete request head within ``header_timeout_secs`` → closed (aiohttp's own keep-alive
  timer, set to ``keepalive_timeout_secs``, then bounds idle time and slow heads between the
  requests of a kept-alive connection).

``/health`` and every other user keep being served. docs/security.md (D2).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_server import Server

from roost.http.caller import remember

__all__ = ["ConnectionGuard", "GuardedRunner"]

log = structlog.get_logger("roost.http")


@dataclass
class ConnectionGuard:
    """Limits and the live count of connections per uid (None: a caller of unknown uid)."""

    header_timeout_secs: float = 10.0
    max_per_uid: int = 1024
    open: Counter[int | None] = field(default_factory=Counter)
    refused: int = 0
    timed_out: int = 0


class _GuardedHandler(RequestHandler):
    """aiohttp's per-connection protocol, with the guard's accept check and head deadline."""

    def __init__(self, manager: Server, *, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._guard = guard
        self._uid: int | None = None
        self._counted = False
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        guard = self._guard
        caller = remember(transport)
        self._uid = caller.uid
        if guard.open[caller.uid] >= guard.max_per_uid:
            guard.refused += 1
            if guard.refused in (1, 100, 10_000) or guard.refused % 100_000 == 0:
                log.warning("connection_cap_reached", uid=caller.uid, cap=guard.max_per_uid, refused=guard.refused)
            transport.close()
            return
        guard.open[caller.uid] += 1
        self._counted = True
        super().connection_made(transport)
        self._head_timer = self._loop.call_later(guard.header_timeout_secs, self._head_deadline)

    def _head_deadline(self) -> None:
        self._head_timer = None
        if self._request_count == 0 and self.transport is not None:
            self._guard.timed_out += 1
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._head_timer is not None and self._request_count:
            self._head_timer.cancel()
            self._head_timer = None

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        if self._counted:
            self._counted = False
            guard = self._guard
            guard.open[self._uid] -= 1
            if guard.open[self._uid] <= 0:
                del guard.open[self._uid]
            super().connection_lost(exc)


class _GuardedServer(Server):
    guard: ConnectionGuard

    def __call__(self) -> RequestHandler:
        return _GuardedHandler(self, guard=self.guard, loop=self._loop, **self._kwargs)


class GuardedRunner(web.AppRunner):
    """An :class:`aiohttp.web.AppRunner` whose connections go through a :class:`ConnectionGuard`."""

    def __init__(self, app: web.Application, *, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.guard = guard

    async def _make_server(self) -> Server:
        server = await super()._make_server()
        server.__class__ = _GuardedServer
        server.guard = self.guard  # type: ignore[attr-defined]
        return server
