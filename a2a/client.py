"""An A2A client that speaks both dialects and fails with sentences an operator can act on.

Why this shape: the roost relay sends many short requests to a handful of peers, so one
connection pool (:class:`a2a.http1.Http1Pool`, keep-alive HTTP/1.1) is reused for the client's
life. The dialect is read once per peer from its card and cached as an :class:`Endpoint` (at most
:data:`ENDPOINT_CACHE` peers): the JSON-RPC interface the card lists (1.0 preferred, else 0.3)
and that interface's own URL, which may differ from the card's origin (A2A 1.0 §8.3.2). Errors
never echo the request's headers or body, because the relay's headers may carry credentials.

Redirects are never followed: a 3xx is a :class:`~a2a.protocol.errors.PeerHTTPError`. Following one would
send the request (and whatever the caller stamped on it) to a URL the caller never checked, so
a relay's network rule would only hold for the first hop.

Peer URLs: ``host:port`` or ``http://host:port[/path]``. ``https://`` is refused with
:class:`~a2a.protocol.errors.UnsupportedPeerURL`: murmur doors are plain HTTP on loopback/LAN, and
silently downgrading an https URL to clear text (what murmur does) would leak whatever the
caller meant to protect. The card is read from the origin root; a peer without a usable card is
spoken to in 0.3 at the given URL.

A ``route`` (optional) lets the embedding application carry some requests another way: given a
request's URL and headers it returns a :class:`Transport` that makes the exchange (roost's Ray
backend carries a request to a door on another machine's loopback through that machine's node
keeper), or None for a plain HTTP request from here. Every rule above holds for a routed request.

Our sends always ask for an immediate answer (1.0 ``returnImmediately: true``, 0.3
``blocking: false``): a delivery must never be held open by a blocking peer, nor time out and be
retried into a second delivery.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, TypedDict, Unpack
from urllib.parse import urljoin

from multidict import CIMultiDict
from yarl import URL

from a2a.http1 import Http1Pool, PeerCheck, StreamAnswer
from a2a.protocol import errors, jsonrpc
from a2a.protocol.card import CARD_PATH, interface_candidates, security_kinds
from a2a.protocol.models import AgentCard, Dialect, Message, Task, dump_message, parse_send_result, parse_task
from a2a.protocol.rpcmethods import VERSION_HEADER
from a2a.protocol.sseframes import SseParser
from a2a.protocol.streamevents import TaskEvent, parse_event

_METHODS: dict[Dialect, dict[str, str]] = {
    "0.3": {
        "send": "message/send",
        "get": "tasks/get",
        "cancel": "tasks/cancel",
        "stream": "message/stream",
        "subscribe": "tasks/resubscribe",
    },
    "1.0": {
        "send": "SendMessage",
        "get": "GetTask",
        "cancel": "CancelTask",
        "stream": "SendStreamingMessage",
        "subscribe": "SubscribeToTask",
    },
}
STREAM_IDLE_SECS = 60.0  # a stream that sends nothing (not even a heartbeat) for this long has failed


class StreamOptions(TypedDict, total=False):
    """The keyword options of a streamed request (:meth:`A2AClient.stream_message`)."""

    dialect: Dialect | None
    headers: Mapping[str, str] | None
    idle_timeout: float


ENDPOINT_CACHE = 4096  # peers whose selected interface is remembered; past it, all are read afresh
IMMEDIATE: dict[Dialect, dict[str, bool]] = {"1.0": {"returnImmediately": True}, "0.3": {"blocking": False}}


class Transport(Protocol):
    """One HTTP exchange made somewhere else: the answer's status, body and ``Location`` (or
    None). A transport that cannot reach the peer raises ``OSError`` (or ``TimeoutError``) with
    a sentence saying why."""

    async def __call__(
        self, method: str, url: URL, body: bytes | None, headers: Mapping[str, str]
    ) -> tuple[int, bytes, str | None]: ...


Route = Callable[[URL, Mapping[str, str]], Transport | None]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where and how to speak to a peer: the selected interface's URL, its dialect, and the
    security schemes its card declares (:func:`a2a.protocol.card.security_kinds`)."""

    url: str
    dialect: Dialect
    schemes: frozenset[str] = frozenset()


_SNIPPET = 200


@functools.lru_cache(maxsize=1024)
def normalize_peer_url(peer_url: str) -> URL:
    """``host:port`` → ``http://host:port/``; keep http URLs; refuse https and other schemes.

    Cached: a relay dials the same few peers over and over, and parsing is most of a send's
    own cost. A refusal is an exception, which the cache never keeps.
    """
    raw = peer_url.strip()
    if "://" not in raw:
        raw = "http://" + raw
    try:
        url = URL(raw)
    except ValueError as exc:
        raise errors.UnsupportedPeerURL(f"peer URL {peer_url!r} is not a valid URL: {exc}") from None
    if url.scheme == "https":
        raise errors.UnsupportedPeerURL(
            f"peer URL {peer_url!r} uses https, which this A2A client does not dial: there is no TLS "
            "here; give the door's plain http://host:port address"
        )
    if url.scheme != "http":
        raise errors.UnsupportedPeerURL(f"peer URL {peer_url!r} has scheme {url.scheme!r}; only http is supported")
    if not url.host:
        raise errors.UnsupportedPeerURL(f"peer URL {peer_url!r} has no host")
    if not url.path:
        url = url.with_path("/")
    return url.with_fragment(None)


def select_endpoint(card: AgentCard, base: str) -> Endpoint:
    """The first interface of the card this client can dial; a relative URL is read against ``base``."""
    for url, dialect in interface_candidates(card):
        target = urljoin(base, url) if url else base
        try:
            return Endpoint(str(normalize_peer_url(target)), dialect, security_kinds(card))
        except errors.UnsupportedPeerURL:
            continue
    raise errors.UnsupportedPeerURL(
        f"the agent card at {base} lists no JSON-RPC interface this client can dial (plain http://host:port)"
    )


def _reason(exc: OSError, timeout: float | None) -> str:
    """The sentence after "could not reach URL:" (the transports raise OSErrors that are sentences)."""
    if isinstance(exc, TimeoutError) and not str(exc):
        return f"timed out after {timeout:g} s" if timeout else "timed out"
    return exc.strerror or str(exc) or type(exc).__name__


class A2AClient:
    """One reusable A2A client. Use ``async with A2AClient() as c:`` or call :meth:`close`."""

    def __init__(
        self, *, connect_timeout: float = 5.0, total_timeout: float = 30.0, route: Route | None = None
    ) -> None:
        self._pool = Http1Pool(connect_timeout=connect_timeout, total_timeout=total_timeout)
        self._total = total_timeout
        self._endpoints: dict[str, Endpoint] = {}
        self.route = route

    @property
    def peer_check(self) -> PeerCheck | None:
        """Asked about the address each new plain-HTTP connection reached (:class:`Http1Pool`)."""
        return self._pool.peer_check

    @peer_check.setter
    def peer_check(self, check: PeerCheck | None) -> None:
        self._pool.peer_check = check

    async def __aenter__(self) -> A2AClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._pool.close()

    # -- card and dialect ------------------------------------------------------------------------

    async def fetch_card(self, base_url: str) -> AgentCard:
        """GET ``/.well-known/agent-card.json`` at the peer's origin and validate it."""
        url = normalize_peer_url(base_url)
        card_url = url.with_path(CARD_PATH).with_query(None)
        status, body = await self._request("GET", card_url, base_url, None, {})
        if not 200 <= status < 300:
            raise self._http_error(base_url, status, body)
        try:
            obj = json.loads(body)
            card = AgentCard.model_validate(obj)
        except ValueError as exc:
            raise errors.InvalidResponse(base_url, f"agent card is not valid ({_first_line(exc)})") from None
        return card

    async def resolve(self, peer_url: str) -> Endpoint:
        """The interface to speak to ``peer_url``, from its card (cached per peer URL).

        Unreachable peers raise :class:`~a2a.protocol.errors.PeerUnreachable`; a missing or broken card
        means 0.3 at the given URL (murmur era-B doors speak it), not cached. A card whose only
        JSON-RPC interfaces are at URLs this client does not dial raises
        :class:`~a2a.protocol.errors.UnsupportedPeerURL`.
        """
        key = str(normalize_peer_url(peer_url))
        cached = self._endpoints.get(key)
        if cached is not None:
            return cached
        try:
            card = await self.fetch_card(peer_url)
        except (errors.PeerHTTPError, errors.InvalidResponse):
            return Endpoint(key, "0.3")
        endpoint = select_endpoint(card, key)
        if len(self._endpoints) >= ENDPOINT_CACHE:  # doors come and go on new ports: stay bounded
            self._endpoints.clear()
        self._endpoints[key] = endpoint
        return endpoint

    async def dialect_for(self, peer_url: str) -> Dialect:
        """The dialect :meth:`resolve` selects for ``peer_url``."""
        return (await self.resolve(peer_url)).dialect

    def forget(self, peer_url: str) -> None:
        """Drop the cached endpoint for a peer (e.g. after it restarted with another card)."""
        self._endpoints.pop(str(normalize_peer_url(peer_url)), None)

    # -- methods ---------------------------------------------------------------------------------

    async def send_message(
        self,
        url: str,
        message: Message,
        *,
        dialect: Dialect | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Task:
        """``message/send`` / ``SendMessage`` asking for an immediate answer; returns the peer's Task.

        Without ``dialect`` the card decides the interface URL and dialect (:meth:`resolve`);
        with one, ``url`` is taken as the interface URL to post to in that dialect.
        """
        target, d = await self._target(url, dialect)
        params: dict[str, Any] = {"message": dump_message(message, d), "configuration": dict(IMMEDIATE[d])}
        result = await self._call(target, d, _METHODS[d]["send"], params, headers)
        return self._parse(target, result, send=True)

    async def get_task(
        self,
        url: str,
        task_id: str,
        *,
        dialect: Dialect | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Task:
        target, d = await self._target(url, dialect)
        result = await self._call(target, d, _METHODS[d]["get"], {"id": task_id}, headers)
        return self._parse(target, result, send=False)

    async def cancel_task(
        self,
        url: str,
        task_id: str,
        *,
        dialect: Dialect | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Task:
        target, d = await self._target(url, dialect)
        result = await self._call(target, d, _METHODS[d]["cancel"], {"id": task_id}, headers)
        return self._parse(target, result, send=False)

    def stream_message(
        self,
        url: str,
        message: Message,
        *,
        dialect: Dialect | None = None,
        headers: Mapping[str, str] | None = None,
        idle_timeout: float = STREAM_IDLE_SECS,
    ) -> AsyncGenerator[Task | TaskEvent, None]:
        """``SendStreamingMessage`` / ``message/stream``: the peer's Task, then its updates as they
        come, until the peer closes the stream (at a terminal or interrupted state). Break out of
        the loop to stop listening; the task goes on at the peer."""
        return _flat(
            self._stream_batches(
                "stream", url, lambda d: {"message": dump_message(message, d)}, dialect, headers, idle_timeout
            )
        )

    def stream_message_batches(
        self, url: str, message: Message, **options: Unpack[StreamOptions]
    ) -> AsyncGenerator[list[Task | TaskEvent], None]:
        """:meth:`stream_message` (the same options), the items that arrived together in one list
        (never empty): for a consumer that passes them on, so it can pass on each list at once."""
        return self._stream_batches(
            "stream",
            url,
            lambda d: {"message": dump_message(message, d)},
            options.get("dialect"),
            options.get("headers"),
            options.get("idle_timeout", STREAM_IDLE_SECS),
        )

    def subscribe(
        self,
        url: str,
        task_id: str,
        *,
        dialect: Dialect | None = None,
        headers: Mapping[str, str] | None = None,
        idle_timeout: float = STREAM_IDLE_SECS,
    ) -> AsyncGenerator[Task | TaskEvent, None]:
        """``SubscribeToTask`` / ``tasks/resubscribe``: the task as it stands, then its updates."""
        return _flat(self._stream_batches("subscribe", url, lambda _d: {"id": task_id}, dialect, headers, idle_timeout))

    async def _stream_batches(
        self,
        op: str,
        url: str,
        params: Callable[[Dialect], dict[str, Any]],
        dialect: Dialect | None,
        extra_headers: Mapping[str, str] | None,
        idle_timeout: float,
    ) -> AsyncGenerator[list[Task | TaskEvent], None]:
        shown, d = await self._target(url, dialect)
        target = normalize_peer_url(shown)
        if self.route is not None and self.route(target, {}) is not None:
            raise errors.UnsupportedPeerURL(
                f"streaming from {shown} is not supported: it is reached through another node's keeper, "
                "which carries whole answers only; send and poll instead"
            )
        headers: CIMultiDict[str] = CIMultiDict({"Content-Type": "application/json", "Accept": "text/event-stream"})
        headers[VERSION_HEADER] = d
        for name, value in (extra_headers or {}).items():
            headers[name] = value
        body = jsonrpc.dumps(jsonrpc.build_request(_METHODS[d][op], params(d)))
        try:
            answer = await self._pool.stream("POST", target, body, headers, idle_timeout=idle_timeout)
        except OSError as exc:
            raise errors.PeerUnreachable(shown, _reason(exc, self._total)) from None
        try:
            if 300 <= answer.status < 400:
                raise _redirect_refusal(shown, answer.status, answer.location)
            if not 200 <= answer.status < 300:
                raise self._http_error(shown, answer.status, await _read(answer, shown))
            if not (answer.content_type or "").lower().startswith("text/event-stream"):
                jsonrpc.read_result(await _read(answer, shown), shown)  # a JSON-RPC error raises here
                raise errors.InvalidResponse(shown, "a streaming method was answered without a stream")
            parser = SseParser()
            try:
                async for chunk in answer.chunks():
                    batch: list[Task | TaskEvent] = []
                    try:
                        for data in parser.feed(chunk):
                            result = jsonrpc.read_result(data, shown)
                            try:
                                batch.append(parse_event(result))
                            except ValueError as exc:
                                raise errors.InvalidResponse(
                                    shown, f"a stream item is not valid ({_first_line(exc)})"
                                ) from None
                    except Exception:
                        if batch:  # the items before the bad one are delivered first, as they came
                            yield batch
                        raise
                    if batch:
                        yield batch
            except OSError as exc:
                raise errors.PeerUnreachable(shown, _reason(exc, idle_timeout)) from None
            except ValueError as exc:  # an event past the size bound
                raise errors.InvalidResponse(shown, str(exc)) from None
        finally:
            answer.close()

    # -- plumbing --------------------------------------------------------------------------------

    async def _target(self, url: str, dialect: Dialect | None) -> tuple[str, Dialect]:
        if dialect is not None:
            return url, dialect
        endpoint = await self.resolve(url)
        return endpoint.url, endpoint.dialect

    @staticmethod
    def _parse(url: str, result: Any, *, send: bool) -> Task:
        try:
            return parse_send_result(result) if send else parse_task(result)
        except ValueError as exc:
            raise errors.InvalidResponse(url, f"result is not a Task ({_first_line(exc)})") from None

    async def _call(
        self,
        url: str,
        dialect: Dialect,
        method: str,
        params: dict[str, Any],
        extra_headers: Mapping[str, str] | None,
    ) -> Any:
        target = normalize_peer_url(url)
        headers: CIMultiDict[str] = CIMultiDict({"Content-Type": "application/json"})
        headers[VERSION_HEADER] = dialect  # A2A 1.0 §3.6.1: clients say which version they speak
        if extra_headers:
            for name, value in extra_headers.items():
                headers[name] = value  # caller's headers are sent as given, replacing ours
        body = jsonrpc.dumps(jsonrpc.build_request(method, params))
        status, data = await self._request("POST", target, url, body, headers)
        if not 200 <= status < 300:
            raise self._http_error(url, status, data)
        return jsonrpc.read_result(data, url)

    async def _request(
        self, method: str, target: URL, shown_url: str, body: bytes | None, headers: Mapping[str, str]
    ) -> tuple[int, bytes]:
        via = self.route(target, headers) if self.route is not None else None
        try:
            status, data, location = await (via or self._pool)(method, target, body, headers)
        except OSError as exc:  # TimeoutError included
            raise errors.PeerUnreachable(shown_url, _reason(exc, self._total)) from None
        if 300 <= status < 400:
            raise _redirect_refusal(shown_url, status, location)
        return status, data

    @staticmethod
    def _http_error(url: str, status: int, body: bytes) -> errors.PeerHTTPError:
        code: str | None = None
        message = ""
        try:
            obj = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            obj = None
        if isinstance(obj, dict):
            err, msg = obj.get("error"), obj.get("message")
            code = err if isinstance(err, str) else None
            message = msg if isinstance(msg, str) else (code or "")
        if not message:
            text = body.decode("utf-8", "replace").strip()
            message = _snippet(text) if text else "no body"
        return errors.PeerHTTPError(url, status, message, code)


async def _flat(batches: AsyncGenerator[list[Task | TaskEvent], None]) -> AsyncGenerator[Task | TaskEvent, None]:
    """The items of a stream's batches, one at a time (closing the batches when stopped early)."""
    try:
        async for batch in batches:
            for item in batch:
                yield item
    finally:
        await batches.aclose()


async def _read(answer: StreamAnswer, url: str) -> bytes:
    try:
        return await answer.read()
    except OSError as exc:
        raise errors.PeerUnreachable(url, _reason(exc, None)) from None


def _redirect_refusal(url: str, status: int, location: str | None) -> errors.PeerHTTPError:
    where = f" to {_snippet(location)}" if location else ""
    return errors.PeerHTTPError(
        url,
        status,
        f"it redirects{where}, and A2A requests are never redirected: give the URL the peer serves A2A at",
    )


def _snippet(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _SNIPPET else line[: _SNIPPET - 1] + "…"


def _first_line(exc: BaseException) -> str:
    return _snippet(str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__)
