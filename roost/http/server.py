"""The one module that reaches into aiohttp's private internals; nothing else in roost does.

Why any of it: the TCP listener must refuse a connection on accept (the per-uid cap) and close
one whose first request head never arrives (the head deadline), and aiohttp has no public hook
for either. And a request aiohttp cannot parse is answered by aiohttp itself, with a text body
that quotes the offending bytes (a header line can hold most of a credential) and a log line
with a traceback: every roost listener (the daemon's, the capsule door's, the host socket's,
the admin socket's) answers it instead with a short JSON sentence and logs one line with the
status and the error's class (:meth:`_QuietHandler.handle_error`, a public method of the
handler; :class:`QuietRunner` is how that handler gets in). What is used, and why each is needed:

* ``BaseRunner._make_server`` — the only place a runner builds its :class:`~aiohttp.web_server.Server`
  (the protocol factory); overriding it is how our handler class gets in. A runner of a plain
  handler (:class:`QuietHandlerRunner`) also implements ``_cleanup_server`` (the runner's last
  step, where an Application runs its cleanup hooks) and reads ``BaseRunner._kwargs`` (what the
  runner was given for the server, e.g. ``access_log``).
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
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog
from aiohttp import http_exceptions, web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server

__all__ = [
    "ConnectionPolicy",
    "ErrorNote",
    "PolicedRunner",
    "QuietHandlerRunner",
    "QuietRunner",
    "bound_port",
    "log_low_level",
    "low_level_sentence",
]

log = structlog.get_logger("roost.http")

# What a low-level refusal says: fixed sentences, never the request's own bytes.
_MALFORMED = "malformed HTTP request: it could not be read as HTTP/1.1"
_SENTENCES: tuple[tuple[type[BaseException], str], ...] = (
    (
        http_exceptions.LineTooLong,
        "malformed HTTP request: a request or header line is longer than this server accepts",
    ),
    (http_exceptions.BadStatusLine, "malformed HTTP request: the request line is not an HTTP/1.1 request line"),
    (http_exceptions.InvalidHeader, "malformed HTTP request: a header line is not valid"),
    (http_exceptions.InvalidURLError, "malformed HTTP request: the request target is not a valid path"),
    (
        http_exceptions.PayloadEncodingError,
        "malformed HTTP request: the body's framing (Content-Length, Transfer-Encoding) is not valid",
    ),
)


def low_level_sentence(status: int, exc: BaseException | None) -> str:
    """The answer to a request aiohttp refused before any handler ran (or a handler's escape)."""
    if status == 504:
        return "the request took too long and was abandoned"
    if status >= 500:
        return "internal error: the server could not complete this request; its log has the details"
    for kind, sentence in _SENTENCES:
        if isinstance(exc, kind):
            return sentence
    return _MALFORMED


ErrorNote = Callable[[int, str], None]
"""Told of each low-level error answer: its status and the error's class name (never its text)."""


def log_low_level(status: int, error: str) -> None:
    """The daemon's note of a low-level error answer: one structlog line."""
    if status >= 500:
        log.error("http_request_failed", status=status, error=error)
    else:
        log.info("http_request_malformed", status=status, error=error)


class _QuietHandler(RequestHandler):
    """aiohttp's per-connection protocol, whose own error answers echo nothing of the request."""

    def __init__(self, manager: Server, *, note: ErrorNote, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._note = note

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        # ``message`` (and the exception's text) quote the request's bytes: neither is used.
        # A client that went away mid-answer (a browser leaving a page) is no server error.
        if not isinstance(exc, ConnectionError):
            self._note(status, type(exc).__name__ if exc is not None else "none")
        if request.writer.output_size > 0:
            # Some of the answer went out already: the connection is broken, as aiohttp has it.
            raise ConnectionError("an answer was partly sent; the connection is closed")
        resp = web.json_response({"error": low_level_sentence(status, exc)}, status=status)
        resp.force_close()
        return resp


class _QuietServer(Server):
    note: ErrorNote

    def __call__(self) -> RequestHandler:
        return _QuietHandler(self, note=self.note, loop=self._loop, **self._kwargs)


class QuietRunner(web.AppRunner):
    """An :class:`aiohttp.web.AppRunner` whose low-level error answers are short sentences;
    ``note`` hears of each (the daemon logs it; a capsule says it on its stderr)."""

    def __init__(self, app: web.Application, *, note: ErrorNote = log_low_level, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.note = note

    async def _make_server(self) -> Server:
        server = await super()._make_server()
        server.__class__ = _QuietServer
        server.note = self.note  # type: ignore[attr-defined]
        return server


class QuietHandlerRunner(web.BaseRunner):
    """:class:`QuietRunner` for a plain request handler instead of an Application (the capsule
    door routes its own three paths: no router or middleware chain per request); with ``policy``
    its connections go through a :class:`ConnectionPolicy` as :class:`PolicedRunner`'s do.

    ``on_cleanup`` runs once the listener has stopped, as an Application's cleanup hooks would.
    """

    def __init__(
        self,
        handler: Callable[[BaseRequest], Awaitable[web.StreamResponse]],
        *,
        note: ErrorNote = log_low_level,
        on_cleanup: Callable[[], Awaitable[None]] | None = None,
        policy: ConnectionPolicy | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.handler = handler
        self.note = note
        self.on_cleanup = on_cleanup
        self.policy = policy

    async def shutdown(self) -> None:
        """Nothing to shut down before the connections close: the handler owns no Application."""

    async def _make_server(self) -> Server:
        loop = asyncio.get_running_loop()
        if self.policy is not None:
            policed = _PolicedServer(self.handler, loop=loop, **self._kwargs)
            policed.note, policed.policy = self.note, self.policy
            return policed
        server = _QuietServer(self.handler, loop=loop, **self._kwargs)
        server.note = self.note
        return server

    async def _cleanup_server(self) -> None:
        if self.on_cleanup is not None:
            await self.on_cleanup()


class ConnectionPolicy(Protocol):
    """What the listener asks about each connection (:class:`roost.http.guard.ConnectionGuard`)."""

    @property
    def header_timeout_secs(self) -> float: ...

    def admit(self, transport: asyncio.BaseTransport) -> Callable[[], None] | None:
        """On accept: None to close the connection at once, else what to call when it closes."""

    def head_missed(self) -> None:
        """The connection sent no complete request head in time and is being closed."""


class _PolicedHandler(_QuietHandler):
    """aiohttp's per-connection protocol, with the policy's accept check and head deadline."""

    def __init__(self, manager: Server, *, policy: ConnectionPolicy, note: ErrorNote, **kwargs: Any) -> None:
        super().__init__(manager, note=note, **kwargs)
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


class _PolicedServer(_QuietServer):
    policy: ConnectionPolicy

    def __call__(self) -> RequestHandler:
        return _PolicedHandler(self, policy=self.policy, note=self.note, loop=self._loop, **self._kwargs)


class PolicedRunner(QuietRunner):
    """A :class:`QuietRunner` whose connections go through a :class:`ConnectionPolicy`."""

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
