"""A keep-alive HTTP/1.1 client for the A2A client's plain-http requests.

Why not aiohttp's ``ClientSession``: a relayed send is one JSON-RPC POST to a door, usually on
loopback, and that POST costs the client less than half the CPU here that it costs through
``ClientSession`` (``bench/bench_transport.py`` measures both in the same run; docs/a2a.md, "The
A2A client's transport"). This module parses nothing itself: answers are parsed by
``httptools`` (llhttp, the parser Node.js uses). It frames a request, keeps idle connections per
origin and enforces limits.

What a caller can rely on:

- One exchange at a time per connection. Idle connections are kept per origin, at most
  :data:`IDLE_PER_ORIGIN` of them. One is closed after :data:`IDLE_SECS` without use, or as soon
  as the peer closes it or sends anything unasked.
- A body may be framed by ``Content-Length``, by chunks, or by the end of the connection; 1xx
  interim answers are skipped. The head is at most :data:`MAX_HEAD_BYTES` and the body at most
  :data:`MAX_BODY_BYTES`. ``Accept-Encoding: identity`` is sent, so bodies come unencoded.
- A reused connection can turn out to have been closed by the peer before it answered. Then a
  GET is retried once on a new connection; a POST never is, because the peer may have acted on
  it, and the caller gets the error.
- Every failure is an ``OSError`` (``TimeoutError`` for the timeouts) whose text is a sentence
  naming the cause, never the request's headers or body. That is the
  :class:`a2a.client.Transport` contract.
- A header name or value that could split the request (CR, LF, NUL, or a name that is not an
  HTTP token) is refused with ``ValueError`` before anything is sent.

Only GET and POST are sent. Nothing here follows redirects or keeps cookies. A ``peer_check``
(optional) is asked about the address each new connection reached; a sentence refuses it
(``PermissionError``, nothing sent): how an egress rule also holds for a name that resolves to
an address it forbids.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import re
from collections.abc import AsyncIterator, Callable, Mapping

import httptools
from yarl import URL

__all__ = ["IDLE_PER_ORIGIN", "IDLE_SECS", "MAX_BODY_BYTES", "MAX_HEAD_BYTES", "Http1Pool", "StreamAnswer"]

IDLE_PER_ORIGIN = 8
IDLE_SECS = 15.0  # aiohttp's keep-alive default; doors keep theirs open for 75 s
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 128
MAX_BODY_BYTES = 16 * 1024 * 1024
STREAM_HIGH = 64  # body pieces a streamed answer holds before it stops reading the socket

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_METHODS = frozenset({"GET", "POST"})


class _Closed(ConnectionError):
    """The peer closed the connection; ``before_answer`` when no byte of an answer had come."""

    def __init__(self, sentence: str, *, before_answer: bool) -> None:
        super().__init__(sentence)
        self.before_answer = before_answer


def _too_large() -> str:
    return f"the peer's answer is larger than {MAX_BODY_BYTES // (1024 * 1024)} MiB"


_LOWERED: dict[str, str] = {}  # header names already checked, and their lower case; a client sends the same few


def _lowered(name: str) -> str:
    lowered = _LOWERED.get(name)
    if lowered is None:
        if not _TOKEN.fullmatch(name):
            raise ValueError(f"header {name[:40]!r} has a character that cannot be sent in HTTP/1.1")
        if len(_LOWERED) >= 512:
            _LOWERED.clear()
        lowered = _LOWERED[name] = name.lower()
    return lowered


@functools.lru_cache(maxsize=512)
def _request_line(method: str, url: URL) -> str:
    """The request line and ``Host`` (a client sends to the same few URLs over and over)."""
    host = url.raw_host or ""
    if ":" in host:
        host = f"[{host}]"
    if url.port not in (None, 80):
        host = f"{host}:{url.port}"
    return f"{method} {url.raw_path_qs or '/'} HTTP/1.1\r\nHost: {host}\r\n"


def _head(method: str, url: URL, headers: Mapping[str, str], body: bytes | None) -> bytes:
    """The request's head; ValueError for a header that could split the request (nothing is sent)."""
    lines = [_request_line(method, url)]
    encoding = length = False
    for name, value in headers.items():
        lowered = _lowered(name)
        if "\r" in value or "\n" in value or "\0" in value:
            raise ValueError(f"header {name!r} has a character that cannot be sent in HTTP/1.1")
        encoding = encoding or lowered == "accept-encoding"
        length = length or lowered == "content-length"
        lines.append(f"{name}: {value}\r\n")
    if not encoding:
        lines.append("Accept-Encoding: identity\r\n")
    if body is not None and not length:
        lines.append(f"Content-Length: {len(body)}\r\n")
    lines.append("\r\n")
    return "".join(lines).encode("latin-1")


class _Connection(asyncio.Protocol):
    """One TCP connection and its answer parser; owned by :class:`Http1Pool`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, pool: Http1Pool, key: tuple[str, int]) -> None:
        self._loop = loop
        self._pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[tuple[int, bytes, str | None]] | None = None
        self._reset()

    def _reset(self) -> None:
        self._started = False
        self._headers_done = False
        self._status = 0
        self._location: str | None = None
        self._framed = False  # Content-Length or chunked: the body does not end with the connection
        self._head_bytes = 0
        self._header_count = 0
        self._body = bytearray()
        self._overflow: str | None = None
        self.reusable = False

    # -- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():  # nothing was asked: not a connection to reuse
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(ConnectionError("the peer switched protocols, which an A2A request never asks for"))
        except httptools.HttpParserError as exc:
            if self._overflow is not None:
                self._fail(ConnectionError(self._overflow))
            else:
                reason = str(exc).strip() or type(exc).__name__
                self._fail(ConnectionError(f"the peer's answer is not valid HTTP/1.1 ({reason[:120]})"))

    def eof_received(self) -> bool:
        return False  # close our side too; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pool.forget(self)
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._headers_done and not self._framed:  # a body that ends with the connection
            waiter.set_result((self._status, bytes(self._body), self._location))
        elif self._started:
            midway = "the peer closed the connection in the middle of its answer"
            waiter.set_exception(_Closed(midway, before_answer=False))
        else:
            waiter.set_exception(_Closed("the peer closed the connection before answering", before_answer=True))

    # -- httptools callbacks ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._waiter is None or self._waiter.done():
            raise ConnectionError("an answer nobody asked for")
        self._started = True

    def on_status(self, status: bytes) -> None:
        self._count(len(status))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value))
        self._header_count += 1
        if self._header_count > MAX_HEADERS:
            self._overflow = f"the peer's answer has more than {MAX_HEADERS} headers"
            raise ConnectionError(self._overflow)
        lowered = name.lower()
        if lowered == b"location":
            self._location = value.decode("latin-1")
        elif lowered == b"content-length":
            self._framed = True
            if value.strip().isdigit() and int(value) > MAX_BODY_BYTES:
                self._overflow = _too_large()
                raise ConnectionError(self._overflow)
        elif lowered == b"transfer-encoding":
            self._framed = True

    def on_headers_complete(self) -> None:
        self._headers_done = True
        self._status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        if len(self._body) + len(body) > MAX_BODY_BYTES:
            self._overflow = _too_large()
            raise ConnectionError(self._overflow)
        self._body += body

    def on_message_complete(self) -> None:
        if 100 <= self._status < 200:  # an interim answer; the real one follows
            self._reset()
            return
        waiter = self._waiter
        self.reusable = self._parser.should_keep_alive() and self._framed
        if waiter is not None and not waiter.done():
            waiter.set_result((self._status, bytes(self._body), self._location))

    def _count(self, n: int) -> None:
        self._head_bytes += n
        if self._head_bytes > MAX_HEAD_BYTES:
            self._overflow = f"the peer's answer head is larger than {MAX_HEAD_BYTES // 1024} KiB"
            raise ConnectionError(self._overflow)

    # -- the pool's side -------------------------------------------------------------------------

    async def exchange(self, request: bytes, deadline: float) -> tuple[int, bytes, str | None]:
        """Send one request and wait for its whole answer, until ``deadline`` (the loop's clock)."""
        assert self.transport is not None
        self._reset()
        waiter: asyncio.Future[tuple[int, bytes, str | None]] = self._loop.create_future()
        self._waiter = waiter
        timer = self._loop.call_at(deadline, self._fail, TimeoutError())
        self.transport.write(request)
        try:
            return await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def _fail(self, exc: Exception) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.close()

    def close(self) -> None:
        self.closed = True
        self.reusable = False
        if self.transport is not None:
            self.transport.close()


PeerCheck = Callable[[str, int], str | None]
"""The address a new connection reached (host, port) → a refusal sentence, or None."""


class _StreamConnection(_Connection):
    """A connection whose answer's body is handed on as it arrives, for one streamed exchange:
    :meth:`exchange` returns at the end of the head; the body's pieces then wait in ``pieces``
    until :meth:`StreamAnswer.chunks` takes them (every piece waiting, joined, at once), and
    ``ended`` says how the body ended (None at its end, an exception if the connection broke
    first). Reading pauses while :data:`STREAM_HIGH` pieces wait, so a slow reader holds the peer
    back instead of memory."""

    pieces: list[bytes]
    ended: BaseException | bool | None
    """False while the body goes on; then None (read to its end) or the exception that ended it."""
    content_type: str | None
    ready: asyncio.Future[None] | None
    """Set by a reader waiting for a piece or the end; resolved when one comes."""
    _streaming: bool
    paused: bool

    def _reset(self) -> None:
        super()._reset()
        self.pieces = []
        self.ended = False
        self.ready = None
        self.content_type = None
        self._streaming = False
        self.paused = False

    def _wake(self) -> None:
        ready = self.ready
        if ready is not None and not ready.done():
            ready.set_result(None)

    def data_received(self, data: bytes) -> None:
        if not self._streaming:
            super().data_received(data)
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            reason = str(exc).strip() or type(exc).__name__
            self._end(ConnectionError(f"the peer's stream is not valid HTTP/1.1 ({reason[:120]})"))

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"content-type":
            self.content_type = value.decode("latin-1")
        if name.lower() == b"content-length":  # a streamed body has no size limit of its own
            self._framed = True
            return
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        if 100 <= self._status < 200:
            return
        self._streaming = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result((self._status, b"", self._location))

    def on_body(self, body: bytes) -> None:
        if not self._streaming:
            super().on_body(body)
            return
        self.pieces.append(bytes(body))
        self._wake()
        if len(self.pieces) >= STREAM_HIGH and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        if not self._streaming:
            super().on_message_complete()
            return
        self._streaming = False
        self.reusable = self._parser.should_keep_alive() and self._framed  # for the next stream
        self.ended = None
        self._wake()
        if not self.reusable:
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._streaming:
            self._end(
                None if self._headers_done and not self._framed else ConnectionError("the peer closed the stream")
            )
        super().connection_lost(exc)

    def _end(self, item: BaseException | None) -> None:
        if self._streaming:
            self._streaming = False
            self.ended = item
            self._wake()
        self.close()

    def take(self) -> bytes:
        """Every piece waiting, joined; reading resumes if it was paused."""
        pieces = self.pieces
        self.pieces = []
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _time_out(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_exception(TimeoutError())


class StreamAnswer:
    """A streamed answer: status, ``Location``, ``Content-Type``, and its body as it comes."""

    def __init__(
        self, status: int, location: str | None, content_type: str | None, conn: _StreamConnection, idle: float
    ) -> None:
        self.status = status
        self.location = location
        self.content_type = content_type
        self._conn = conn
        self._idle = idle
        self._released = False

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's pieces in order (whatever arrived together comes as one piece); TimeoutError
        when none came for the idle timeout, an OSError when the connection broke before the
        body's end."""
        conn = self._conn
        whole = False
        loop = asyncio.get_running_loop()
        try:
            while True:
                if conn.pieces:
                    yield conn.take()
                    continue
                ended = conn.ended
                if ended is None:
                    whole = True
                    return
                if ended is not False:
                    assert isinstance(ended, BaseException)
                    raise ended
                ready = conn.ready = loop.create_future()
                timer = loop.call_later(self._idle, _time_out, ready)
                try:
                    await ready
                except TimeoutError:
                    raise TimeoutError(f"the peer sent nothing for {self._idle:g} s") from None
                finally:
                    timer.cancel()
                    conn.ready = None
        finally:
            if whole and conn.reusable and not conn.closed:  # read to its end: kept for the next stream
                self._released = True
                conn._pool.keep_stream(conn)
            else:
                conn.close()

    async def read(self, limit: int = MAX_BODY_BYTES) -> bytes:
        """The whole body (an answer that is not a stream, e.g. a JSON error), at most ``limit`` bytes."""
        out = bytearray()
        async for chunk in self.chunks():
            out += chunk
            if len(out) > limit:
                raise ConnectionError(_too_large())
        return bytes(out)

    def close(self) -> None:
        if not self._released:
            self._conn.close()


class Http1Pool:
    """A :class:`a2a.client.Transport` over plain TCP with keep-alive, one pool per client."""

    def __init__(self, *, connect_timeout: float, total_timeout: float, peer_check: PeerCheck | None = None) -> None:
        self.peer_check = peer_check
        self._connect_timeout = connect_timeout
        self._total_timeout = total_timeout
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._sweeper: asyncio.TimerHandle | None = None

    async def __call__(
        self, method: str, url: URL, body: bytes | None, headers: Mapping[str, str]
    ) -> tuple[int, bytes, str | None]:
        request, key, deadline = self._prepare(method, url, body, headers)
        conn, reused = self._reuse(key) or (await self._connect(key, deadline), False)
        try:
            answer = await self._exchange(conn, request, deadline)
        except _Closed as exc:
            if not (reused and exc.before_answer and method == "GET"):
                raise
            conn = await self._connect(key, deadline)
            answer = await self._exchange(conn, request, deadline)
        self._release(conn)
        return answer

    def _prepare(
        self, method: str, url: URL, body: bytes | None, headers: Mapping[str, str]
    ) -> tuple[bytes, tuple[str, int], float]:
        """The request's bytes, its origin's key, and its deadline on the loop's clock."""
        if method not in _METHODS:
            raise ValueError(f"this client sends GET and POST only, not {method}")
        request = _head(method, url, headers, body)
        if body:
            request += body
        return request, (url.raw_host or "", url.port or 80), asyncio.get_running_loop().time() + self._total_timeout

    @staticmethod
    async def _exchange(conn: _Connection, request: bytes, deadline: float) -> tuple[int, bytes, str | None]:
        try:
            return await conn.exchange(request, deadline)
        except BaseException:  # cancelled, timed out or failed: the connection's state is unknown
            conn.close()
            raise

    def _reuse(self, key: tuple[str, int]) -> tuple[_Connection, bool] | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn, True
        return None

    async def _connect(
        self, key: tuple[str, int], deadline: float, kind: type[_Connection] | None = None
    ) -> _Connection:
        loop = asyncio.get_running_loop()
        host, port = key
        connect_by = loop.time() + self._connect_timeout
        factory = kind or _Connection
        try:
            async with asyncio.timeout_at(min(deadline, connect_by)):
                _, conn = await loop.create_connection(lambda: factory(loop, self, key), host, port)
        except TimeoutError:
            if deadline <= connect_by:
                raise TimeoutError from None  # the whole request's time ran out
            raise TimeoutError(f"connecting timed out after {self._connect_timeout:g} s") from None
        except OSError as exc:
            if exc.errno == errno.ECONNREFUSED:
                raise ConnectionRefusedError(errno.ECONNREFUSED, "connection refused") from None
            raise OSError(exc.errno, exc.strerror or str(exc) or type(exc).__name__) from None
        check = self.peer_check
        if check is not None:
            assert conn.transport is not None
            peer = conn.transport.get_extra_info("peername")
            refusal = check(str(peer[0]), int(peer[1])) if peer else None
            if refusal is not None:
                conn.close()
                raise PermissionError(errno.EACCES, refusal)
        self._open.add(conn)
        return conn

    async def stream(
        self, method: str, url: URL, body: bytes | None, headers: Mapping[str, str], *, idle_timeout: float
    ) -> StreamAnswer:
        """Send one request and return once the answer's head is in; its body is then read as it
        comes (:meth:`StreamAnswer.chunks`), each piece within ``idle_timeout`` of the last. The
        head must arrive within the pool's total timeout. Streams have connections of their own:
        one read to its end on a keep-alive connection leaves it idle for the next stream to the
        same origin, never for a plain exchange; any other end closes it."""
        request, key, deadline = self._prepare(method, url, body, headers)
        kept = self._reuse(("stream:" + key[0], key[1]))
        conn = kept[0] if kept is not None else await self._connect(key, deadline, _StreamConnection)
        conn.key = ("stream:" + key[0], key[1])  # kept apart from plain exchanges' connections
        assert isinstance(conn, _StreamConnection)
        try:
            status, _, location = await conn.exchange(request, deadline)
        except BaseException:
            conn.close()
            raise
        return StreamAnswer(status, location, conn.content_type, conn, idle_timeout)

    def keep_stream(self, conn: _Connection) -> None:
        """A streamed answer was read to its end on a keep-alive connection: keep it for the next stream."""
        self._release(conn)

    def _release(self, conn: _Connection) -> None:
        if conn.closed or not conn.reusable:
            conn.close()
            return
        idle = self._idle.setdefault(conn.key, [])
        if len(idle) >= IDLE_PER_ORIGIN:
            conn.close()
            return
        loop = asyncio.get_running_loop()
        conn.idle_since = loop.time()
        idle.append(conn)
        if self._sweeper is None:
            self._sweeper = loop.call_later(IDLE_SECS, self._sweep)

    def _sweep(self) -> None:
        """Close connections idle for IDLE_SECS; come back when the next one will have been."""
        self._sweeper = None
        loop = asyncio.get_running_loop()
        now, limit = loop.time(), IDLE_SECS
        next_due: float | None = None
        for idle in list(self._idle.values()):
            for conn in list(idle):
                if now - conn.idle_since >= limit:
                    conn.close()
                elif next_due is None or conn.idle_since + limit < next_due:
                    next_due = conn.idle_since + limit
        if next_due is not None:
            self._sweeper = loop.call_at(next_due, self._sweep)

    def forget(self, conn: _Connection) -> None:
        """A connection closed: drop it (and its origin's entry once nothing is idle there)."""
        self._open.discard(conn)
        idle = self._idle.get(conn.key)
        if idle is not None:
            if conn in idle:
                idle.remove(conn)
            if not idle:
                del self._idle[conn.key]

    @property
    def idle_count(self) -> int:
        """Idle connections kept, over every origin."""
        return sum(len(v) for v in self._idle.values())

    @property
    def open_count(self) -> int:
        """Connections open now, idle or busy."""
        return len(self._open)

    async def close(self) -> None:
        """Close every connection, idle or busy, and wait until the transports are gone."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        conns = list(self._open)
        for conn in conns:
            conn.close()
        if conns:
            await asyncio.sleep(0)
