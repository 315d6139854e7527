"""a2a.http1.Http1Pool against real sockets: framing, keep-alive, limits, retries and failures.

The peers here are raw asyncio servers that write the exact bytes a test needs (a chunked body,
a body ended by closing, an interim answer, a connection dropped at the worst moment), because
a well-behaved HTTP server never sends most of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

import httptools
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from yarl import URL

from a2a import http1
from a2a.client import A2AClient
from a2a.http1 import Http1Pool
from a2a.protocol import errors
from a2a.protocol.models import Message, Part

OK_BODY = b'{"ok": true}'


def answer(body: bytes = OK_BODY, *, status: str = "200 OK", extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode()
        + body
    )


@dataclass
class Seen:
    """What the peer received: one list of raw requests per connection, in order."""

    connections: list[list[bytes]] = field(default_factory=list)

    @property
    def requests(self) -> list[bytes]:
        return [r for c in self.connections for r in c]


# A reply function gets (connection number, request number on that connection, raw request) and
# returns the bytes to write, with None meaning "close the connection without answering".
Reply = Callable[[int, int, bytes], bytes | None]


@contextlib.asynccontextmanager
async def peer(reply: Reply, *, close_after_reply: bool = False) -> AsyncIterator[tuple[URL, Seen]]:
    seen = Seen()
    handlers: list[asyncio.Task[None]] = []
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        writers.append(writer)
        conn_no = len(seen.connections)
        mine: list[bytes] = []
        seen.connections.append(mine)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                raw = head + await reader.readexactly(length)
                mine.append(raw)
                out = reply(conn_no, len(mine) - 1, raw)
                if out is None:
                    break
                writer.write(out)
                await writer.drain()
                if close_after_reply:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield URL(f"http://127.0.0.1:{port}/a2a?x=1"), seen
    finally:
        for w in writers:
            w.close()  # ends every handler still reading
        await asyncio.gather(*handlers, return_exceptions=True)
        server.close()
        await server.wait_closed()


def always(data: bytes) -> Reply:
    return lambda _c, _n, _raw: data


def pool(total: float = 5.0) -> Http1Pool:
    return Http1Pool(connect_timeout=2.0, total_timeout=total)


async def until(check: Callable[[], bool]) -> None:
    for _ in range(200):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never became true")


POST_HEADERS = {"Content-Type": "application/json", "traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}


async def test_keep_alive_reuses_one_connection_and_frames_the_request() -> None:
    async with peer(always(answer())) as (url, seen):
        p = pool()
        for i in range(5):
            status, body, location = await p("POST", url, b'{"n": %d}' % i, POST_HEADERS)
            assert (status, body, location) == (200, OK_BODY, None)
        assert len(seen.connections) == 1 and len(seen.requests) == 5
        assert (p.open_count, p.idle_count) == (1, 1)
        first = seen.requests[0]
        assert first.startswith(b"POST /a2a?x=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % url.port)
        assert b"\r\nContent-Length: 8\r\n" in first and first.endswith(b'\r\n\r\n{"n": 0}')
        assert b"\r\nAccept-Encoding: identity\r\n" in first and b"\r\ntraceparent: 00-" in first
        await p.close()
        await until(lambda: p.open_count == 0)


async def test_get_sends_no_body_and_no_length() -> None:
    async with peer(always(answer())) as (url, seen):
        p = pool()
        assert (await p("GET", url.with_path("/.well-known/agent-card.json"), None, {}))[0] == 200
        raw = seen.requests[0]
        assert raw.startswith(b"GET /.well-known/agent-card.json HTTP/1.1\r\n")
        assert b"Content-Length" not in raw and raw.endswith(b"\r\n\r\n")
        await p.close()


async def test_chunked_body_is_joined() -> None:
    chunked = b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"ok"\r\n7\r\n: true}\r\n0\r\n\r\n'
    async with peer(always(chunked)) as (url, seen):
        p = pool()
        assert await p("POST", url, b"{}", POST_HEADERS) == (200, OK_BODY, None)
        assert await p("POST", url, b"{}", POST_HEADERS) == (200, OK_BODY, None)
        assert len(seen.connections) == 1  # a chunked answer keeps the connection usable
        await p.close()


async def test_body_ended_by_closing_is_whole_and_not_reused() -> None:
    close_delimited = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + OK_BODY
    async with peer(always(close_delimited), close_after_reply=True) as (url, seen):
        p = pool()
        assert await p("POST", url, b"{}", POST_HEADERS) == (200, OK_BODY, None)
        assert await p("POST", url, b"{}", POST_HEADERS) == (200, OK_BODY, None)
        assert len(seen.connections) == 2 and p.idle_count == 0
        await p.close()


async def test_connection_close_answer_is_not_kept() -> None:
    async with peer(always(answer(extra="Connection: close\r\n"))) as (url, seen):
        p = pool()
        await p("POST", url, b"{}", POST_HEADERS)
        await p("POST", url, b"{}", POST_HEADERS)
        assert len(seen.connections) == 2 and p.idle_count == 0
        await p.close()


async def test_interim_answers_are_skipped() -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + answer(b"[1]")
    async with peer(always(interim)) as (url, _seen):
        p = pool()
        assert await p("POST", url, b"{}", POST_HEADERS) == (200, b"[1]", None)
        await p.close()


async def test_redirect_location_is_returned() -> None:
    moved = answer(b"", status="307 Temporary Redirect", extra="Location: http://elsewhere.example/\r\n")
    async with peer(always(moved)) as (url, _seen):
        p = pool()
        assert await p("POST", url, b"{}", POST_HEADERS) == (307, b"", "http://elsewhere.example/")
        await p.close()


async def test_idle_connection_closed_by_the_peer_is_replaced() -> None:
    async with peer(always(answer()), close_after_reply=True) as (url, seen):
        p = pool()
        await p("POST", url, b"{}", POST_HEADERS)
        await until(lambda: p.open_count == 0)  # the peer's close was noticed while idle
        assert await p("POST", url, b"{}", POST_HEADERS) == (200, OK_BODY, None)
        assert len(seen.connections) == 2 and len(seen.requests) == 2
        await p.close()


def drop_second_request(conn: int, n: int, _raw: bytes) -> bytes | None:
    """Answer the first request of the first connection, then drop it unanswered on the second."""
    return None if (conn, n) == (0, 1) else answer()


async def test_get_on_a_reused_connection_dropped_unanswered_is_retried_once() -> None:
    async with peer(drop_second_request) as (url, seen):
        p = pool()
        await p("GET", url, None, {})
        assert await p("GET", url, None, {}) == (200, OK_BODY, None)
        assert [len(c) for c in seen.connections] == [2, 1]
        await p.close()


async def test_post_on_a_reused_connection_dropped_unanswered_is_not_retried() -> None:
    async with peer(drop_second_request) as (url, seen):
        p = pool()
        await p("POST", url, b"{}", POST_HEADERS)
        with pytest.raises(ConnectionError, match=r"^the peer closed the connection before answering$"):
            await p("POST", url, b"{}", POST_HEADERS)
        assert [len(c) for c in seen.connections] == [2]  # the peer got it once, and no second copy
        await p.close()


async def test_a_fresh_connection_dropped_unanswered_is_not_retried() -> None:
    async with peer(lambda _c, _n, _r: None) as (url, seen):
        p = pool()
        with pytest.raises(ConnectionError, match="before answering"):
            await p("GET", url, None, {})
        assert len(seen.requests) == 1
        await p.close()


async def test_closed_in_the_middle_of_an_answer() -> None:
    partial = b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"partial'
    async with peer(always(partial), close_after_reply=True) as (url, _seen):
        p = pool()
        with pytest.raises(ConnectionError, match=r"^the peer closed the connection in the middle of its answer$"):
            await p("POST", url, b"{}", POST_HEADERS)
        await p.close()


@pytest.mark.parametrize(
    ("reply", "sentence"),
    [
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (http1.MAX_BODY_BYTES + 1) + b"x" * 70_000,
            "the peer's answer is larger than 16 MiB",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % (http1.MAX_BODY_BYTES + 1)
            + b"x" * (http1.MAX_BODY_BYTES + 1),
            "the peer's answer is larger than 16 MiB",
        ),
        (
            b"HTTP/1.1 200 OK\r\nX-Big: " + b"y" * (http1.MAX_HEAD_BYTES + 1) + b"\r\n\r\n",
            "the peer's answer head is larger than 64 KiB",
        ),
        (
            b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(http1.MAX_HEADERS + 1)) + b"\r\n",
            "the peer's answer has more than 128 headers",
        ),
        (b"SMTP ready\r\n\r\n", "the peer's answer is not valid HTTP/1.1 ("),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
            "the peer switched protocols",
        ),
    ],
)
async def test_answers_over_a_limit_or_not_http_fail_with_a_sentence(reply: bytes, sentence: str) -> None:
    async with peer(always(reply)) as (url, _seen):
        p = pool()
        with pytest.raises(ConnectionError) as info:
            await p("POST", url, b"{}", POST_HEADERS)
        assert str(info.value).startswith(sentence)
        await until(lambda: p.open_count == 0)


async def test_a_second_unasked_answer_poisons_the_connection() -> None:
    async with peer(always(answer() + answer(b"[2]"))) as (url, seen):
        p = pool()
        assert await p("POST", url, b"{}", POST_HEADERS) == (200, OK_BODY, None)
        assert await p("POST", url, b"{}", POST_HEADERS) == (200, OK_BODY, None)
        assert len(seen.connections) == 2  # never "[2]": the first connection was not reused
        await p.close()


async def test_unasked_bytes_on_an_idle_connection_close_it() -> None:
    connections = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await reader.readuntil(b"\r\n\r\n{}")
        writer.write(answer())
        await asyncio.sleep(0.05)
        writer.write(b"HTTP/1.1 200 OK\r\n")  # speaks again, unasked, while the connection is idle
        await reader.read()  # until the client closes
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = URL(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/")
    try:
        p = pool()
        assert await p("POST", url, b"{}", POST_HEADERS) == (200, OK_BODY, None)
        assert p.idle_count == 1
        await until(lambda: p.open_count == 0 and p.idle_count == 0)
        await p("POST", url, b"{}", POST_HEADERS)
        assert connections == 2
        await p.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_total_timeout_closes_the_connection() -> None:
    async with peer(always(b"")) as (url, _seen):  # reads the request, never answers
        p = pool(total=0.3)
        with pytest.raises(TimeoutError):
            await p("POST", url, b"{}", POST_HEADERS)
        await until(lambda: p.open_count == 0)
        await p.close()


async def test_cancelled_request_does_not_leave_a_connection_to_reuse() -> None:
    async with peer(always(b"")) as (url, seen):
        p = pool()
        task = asyncio.ensure_future(p("POST", url, b"{}", POST_HEADERS))
        await until(lambda: len(seen.requests) == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await until(lambda: p.open_count == 0)
        assert p.idle_count == 0
        await p.close()


async def test_idle_connections_expire_and_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    async with peer(always(answer())) as (url, seen):
        p = pool()
        n = http1.IDLE_PER_ORIGIN + 3
        # n requests at once need n connections; only IDLE_PER_ORIGIN of them are kept afterwards.
        await asyncio.gather(*(p("POST", url, b"{}", POST_HEADERS) for _ in range(n)))
        assert len(seen.connections) == n
        await until(lambda: p.open_count == http1.IDLE_PER_ORIGIN)
        assert p.idle_count == http1.IDLE_PER_ORIGIN
        await p.close()
        await until(lambda: p.open_count == 0)

        monkeypatch.setattr(http1, "IDLE_SECS", 0.05)
        p = pool()
        await p("POST", url, b"{}", POST_HEADERS)
        assert p.idle_count == 1
        await until(lambda: p.open_count == 0 and p.idle_count == 0)
        await p.close()


async def test_connection_refused_is_a_sentence() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = pool()
    with pytest.raises(ConnectionRefusedError) as info:
        await p("GET", URL(f"http://127.0.0.1:{port}/"), None, {})
    assert str(info.value) == "[Errno 111] connection refused" and info.value.strerror == "connection refused"
    async with A2AClient() as client:
        msg = Message(message_id="m1", role="user", parts=[Part(kind="text", text="hi")])
        with pytest.raises(errors.PeerUnreachable) as unreachable:
            await client.send_message(f"127.0.0.1:{port}", msg, dialect="1.0")
    assert str(unreachable.value) == f"could not reach 127.0.0.1:{port}: connection refused"


@pytest.mark.parametrize(
    "headers",
    [
        {"x-trace": "a\r\nX-Injected: 1"},
        {"x-trace": "a\nb"},
        {"x-trace": "a\0b"},
        {"bad name": "v"},
        {"x:y": "v"},
    ],
)
async def test_headers_that_could_split_the_request_are_refused_before_dialling(headers: dict[str, str]) -> None:
    async with peer(always(answer())) as (url, seen):
        p = pool()
        with pytest.raises(ValueError, match=r"cannot be sent in HTTP/1\.1"):
            await p("POST", url, b"{}", headers)
        assert seen.connections == [] and p.open_count == 0


async def test_methods_other_than_get_and_post_are_refused() -> None:
    with pytest.raises(ValueError, match="GET and POST only"):
        await pool()("HEAD", URL("http://127.0.0.1:9/"), None, {})


async def test_ipv6_host_header_is_bracketed() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(answer())
        await writer.drain()
        writer.close()

    try:
        server = await asyncio.start_server(handle, "::1", 0)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    port = server.sockets[0].getsockname()[1]
    try:
        p = pool()
        assert (await p("GET", URL(f"http://[::1]:{port}/"), None, {}))[0] == 200
        assert b"\r\nHost: [::1]:%d\r\n" % port in seen[0]
        await p.close()
    finally:
        server.close()
        await server.wait_closed()


# -- the request head, pure ------------------------------------------------------------------------

_NAMES = st.from_regex(r"\A[A-Za-z][A-Za-z0-9\-]{0,20}\Z").filter(
    lambda n: n.lower() not in {"host", "content-length", "accept-encoding", "transfer-encoding"}
)
_VALUES = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40).map(str.strip)


class _Request:
    def __init__(self) -> None:
        self.headers: list[tuple[str, str]] = []
        self.url = b""
        self.body = b""
        self.done = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode(), value.decode()))

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.done = True


@given(
    headers=st.dictionaries(_NAMES.map(str.lower), _VALUES, max_size=8),
    body=st.one_of(st.none(), st.binary(max_size=64)),
)
def test_head_parses_back_to_what_was_given(headers: dict[str, str], body: bytes | None) -> None:
    url = URL("http://127.0.0.1:8080/a2a/jsonrpc?q=1")
    raw = http1._head("POST" if body is not None else "GET", url, headers, body) + (body or b"")
    parsed = _Request()
    httptools.HttpRequestParser(parsed).feed_data(raw)
    assert parsed.done and parsed.url == b"/a2a/jsonrpc?q=1"
    got = dict(parsed.headers)
    assert len(got) == len(parsed.headers)  # nothing sent twice
    assert got["Host"] == "127.0.0.1:8080" and got["Accept-Encoding"] == "identity"
    assert {k: v for k, v in got.items() if k in headers} == headers
    assert parsed.body == (body or b"")
    assert ("Content-Length" in got) == (body is not None)


@given(value=st.text(max_size=20), bad=st.sampled_from(["\r", "\n", "\0"]), at=st.integers(0, 20))
def test_any_line_break_or_nul_in_a_value_is_refused(value: str, bad: str, at: int) -> None:
    poisoned = value[:at] + bad + value[at:]
    with pytest.raises(ValueError, match="cannot be sent"):
        http1._head("GET", URL("http://127.0.0.1:1/"), {"x-v": poisoned}, None)


def test_default_port_is_left_out_of_host() -> None:
    assert http1._request_line("GET", URL("http://door.example/")) == "GET / HTTP/1.1\r\nHost: door.example\r\n"
    assert http1._request_line("GET", URL("http://door.example:8080/a")).endswith("Host: door.example:8080\r\n")
    assert http1._request_line("POST", URL("http://[::1]:9/")).endswith("Host: [::1]:9\r\n")


@contextlib.contextmanager
def full_backlog() -> Iterator[int]:
    """A port whose accept queue is full, so a new connect hangs (its SYN is dropped)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            s = socket.socket()
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                s.connect(("127.0.0.1", port))
            fillers.append(s)
        yield port
    finally:
        for s in fillers:
            s.close()
        listener.close()


async def test_connect_timeout_and_total_timeout_say_which() -> None:
    with full_backlog() as port:
        url = URL(f"http://127.0.0.1:{port}/")
        p = Http1Pool(connect_timeout=0.2, total_timeout=5.0)
        with pytest.raises(TimeoutError) as info:
            await p("GET", url, None, {})
        assert str(info.value) == "connecting timed out after 0.2 s"
        async with A2AClient(connect_timeout=5.0, total_timeout=0.3) as client:
            with pytest.raises(errors.PeerUnreachable) as unreachable:
                await client.get_task(str(url), "t", dialect="1.0")
        assert str(unreachable.value) == f"could not reach {url}: timed out after 0.3 s"
        assert p.open_count == 0


# -- a hostile peer: whatever it writes, the caller gets an answer or an OSError ------------------

_PIECES = st.sampled_from(
    [
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.0 404 Not Found\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\n",
        b"HTTP/9.9 999 ?\r\n",
        b"Content-Length: 5\r\n",
        b"Content-Length: -1\r\n",
        b"Content-Length: 99999999999999999999\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"Connection: close\r\n",
        b"Location: /elsewhere\r\n",
        b"X-A: \xff\xfe\r\n",
        b"\r\n",
        b"5\r\nhello\r\n",
        b"zz\r\n",
        b"0\r\n\r\n",
        b"hello",
        b"\x00\x01\x02",
    ]
)
_HOSTILE = st.one_of(
    st.binary(max_size=200),
    st.lists(_PIECES, max_size=12).map(b"".join),
    st.lists(_PIECES, max_size=8).map(lambda pieces: b"HTTP/1.1 200 OK\r\n" + b"".join(pieces)),
    st.tuples(
        st.sampled_from([b"", b"Connection: close\r\n", b"Transfer-Encoding: chunked\r\n"]), st.binary(max_size=40)
    ).map(lambda t: b"HTTP/1.1 200 OK\r\n" + t[0] + b"\r\n" + t[1]),
)


@given(reply=_HOSTILE)
@settings(max_examples=80, deadline=None)
def test_whatever_a_peer_writes_the_caller_gets_an_answer_or_an_oserror(reply: bytes) -> None:
    async def one() -> None:
        async with peer(always(reply), close_after_reply=True) as (url, _seen):
            p = pool(total=2.0)
            try:
                status, body, location = await p("POST", url, b"{}", POST_HEADERS)
            except OSError as exc:  # TimeoutError included
                assert isinstance(exc, TimeoutError) or str(exc)
                assert "traceparent" not in str(exc)
            else:
                assert isinstance(status, int) and isinstance(body, bytes)
                assert location is None or isinstance(location, str)
            await p.close()
            await until(lambda: p.open_count == 0)

    asyncio.run(one())
