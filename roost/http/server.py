"""The one module that reaches into aiohttp's private internals; nothing else in roost does.

Why any of it: the TCP listener must refuse a connection on accept (the per-uid cap) and close
one whose first request head never arrives (the head deadline), and aiohttp has no public hook
for either. What is used, and why each is needed:

* ``BaseRunner._make_server`` — the only place a runner builds its :class:`~aiohttp.web_server.Server`
  (the protocol factory); overriding it is how our handler class gets in.
* ``Server._loop`` and ``Server._kwargs`` — what the stock ``Server.__call__`` passes to each
  new :class:`~aiohttp.web_protocol.RequestHandler`; ours must pass the same.
* ``RequestHandler._request_count`` — whether a connection has sent a complete request head yet;
  no public attribute says so.
* ``BaseSite._server`` — the listening sockets of one site, to read the port the kernel chose
  for port 0 (``runner.addresses`` mixes every site of a runner, and the TLS listener is a second one).

Checked against aiohttp 3.10, 3.11, 3.12, 3.13 and 3.14 (``pyproject.toml`` allows ``>=3.10,<4``);
the connection-limit tests (``tests/trust/test_connection_limits.py``) fail if any of it changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_server import Server

__all__ = ["ConnectionPolicy", "PolicedRunner", "bound_port"]


class ConnectionPolicy(Protocol):
    """What the listener asks about each connection (:class:`roost.http.guard.ConnectionGuard`)."""

    @property
    def header_timeout_secs(self) -> float: ...

    def admit(self, transport: asyncio.BaseTransport) -> Callable[[], None] | None:
        """On accept: None to close the connection at once, else what to call when it closes."""

    def head_missed(self) -> None:
        """The connection sent no complete request head in time and is being closed."""


class _PolicedHandler(RequestHandler):
    """aiohttp's per-connection protocol, with the policy's accept check and head deadline."""

    def __init__(self, manager: Server, *, policy: ConnectionPolicy, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._policy = policy
        self._release: Callable[[], None] | None = None
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        release = self._policy.admit(transport)
        if release is None:
            transport.close()
            return
        self._release = release
        super().connection_made(transport)
        self._head_timer = asyncio.get_running_loop().call_later(self._policy.header_timeout_secs, self._head_deadline)

    def _head_deadline(self) -> None:
        self._head_timer = None
        if self._request_count == 0 and self.transport is not None:
            self._policy.head_missed()
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
        if self._release is not None:
            release, self._release = self._release, None
            release()
            super().connection_lost(exc)


class _PolicedServer(Server):
    policy: ConnectionPolicy

    def __call__(self) -> RequestHandler:
        return _PolicedHandler(self, policy=self.policy, loop=self._loop, **self._kwargs)


class PolicedRunner(web.AppRunner):
    """An :class:`aiohttp.web.AppRunner` whose connections go through a :class:`ConnectionPolicy`."""

    def __init__(self, app: web.Application, *, policy: ConnectionPolicy, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.policy = policy

    async def _make_server(self) -> Server:
        server = await super()._make_server()
        server.__class__ = _PolicedServer
        server.policy = self.policy  # type: ignore[attr-defined]
        return server


def bound_port(site: web.BaseSite) -> int | None:
    """The port a started site listens on (the one the kernel chose when 0 was asked), or None."""
    sockets = getattr(site._server, "sockets", None) or []
    return int(sockets[0].getsockname()[1]) if sockets else None
