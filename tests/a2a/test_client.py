"""A2AClient against real local servers: error sentences, headers, dialect choice, session reuse."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from a2a.client import A2AClient, normalize_peer_url
from a2a.protocol import errors
from a2a.protocol.models import Message, Part, TaskState

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MSG = Message(message_id="m1", role="user", parts=[Part(kind="text", text="hi")])
TASK = {"kind": "task", "id": "tsk_1", "contextId": "ctx_1", "status": {"state": "submitted"}}


@contextlib.asynccontextmanager
async def serve(handler: Handler, card: dict[str, Any] | None = None) -> AsyncIterator[str]:
    app = web.Application()
    if card is not None:

        async def card_handler(_r: web.Request) -> web.Response:
            return web.json_response(card)

        app.router.add_get("/.well-known/agent-card.json", card_handler)
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_unreachable_port() -> None:
    url = f"127.0.0.1:{free_port()}"
    async with A2AClient() as client:
        with pytest.raises(errors.PeerUnreachable) as info:
            await client.send_message(url, MSG, dialect="0.3")
    assert str(info.value).startswith(f"could not reach {url}: ")
    assert info.value.reason


async def test_http_500_and_403() -> None:
    async def h500(_r: web.Request) -> web.Response:
        return web.Response(status=500, text="Internal Server Error")

    async with serve(h500) as url, A2AClient() as client:
        with pytest.raises(errors.PeerHTTPError) as info:
            await client.send_message(url, MSG, dialect="0.3", headers={"Authorization": "Bearer SECRET-TOKEN"})
    assert str(info.value) == f"peer at {url} refused the message (500): Internal Server Error"
    assert "SECRET-TOKEN" not in str(info.value)

    async def h403(_r: web.Request) -> web.Response:
        return web.json_response({"error": "peer_not_accepted", "message": "no peers"}, status=403)

    async with serve(h403) as url, A2AClient() as client:
        with pytest.raises(errors.PeerHTTPError) as info:
            await client.get_task(url, "t", dialect="1.0")
    assert str(info.value) == f"peer at {url} refused the message (403 peer_not_accepted): no peers"
    assert info.value.status == 403 and info.value.error_code == "peer_not_accepted"


async def test_jsonrpc_error_sentence() -> None:
    async def h(r: web.Request) -> web.Response:
        body = await r.json()
        return web.json_response(
            {"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32001, "message": "Task not found"}}
        )

    async with serve(h) as url, A2AClient() as client:
        with pytest.raises(errors.JsonRpcError) as info:
            await client.get_task(url, "tsk_x", dialect="0.3", headers={"x-token": "SECRET"})
    assert str(info.value) == f"A2A error from {url}: -32001 Task not found"
    assert info.value.code == -32001


@pytest.mark.parametrize(
    ("body", "cls", "sentence"),
    [
        (b"<html>oops</html>", errors.InvalidResponse, "failed to parse response from {url}: body is not JSON"),
        (b'{"jsonrpc":"2.0","id":"x"}', errors.NoResult, "no result in A2A response from {url}"),
        (
            b'{"jsonrpc":"2.0","id":"x","result":{"id":5}}',
            errors.InvalidResponse,
            "failed to parse response from {url}: result is not a Task",
        ),
    ],
)
async def test_invalid_responses(body: bytes, cls: type[Exception], sentence: str) -> None:
    async def h(_r: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    async with serve(h) as url, A2AClient() as client:
        with pytest.raises(cls) as info:
            await client.send_message(url, MSG, dialect="0.3")
    assert str(info.value).startswith(sentence.format(url=url))


async def test_timeout_is_unreachable() -> None:
    async def slow(_r: web.Request) -> web.Response:
        await asyncio.sleep(1)
        return web.Response()

    async with serve(slow) as url, A2AClient(total_timeout=0.3) as client:
        with pytest.raises(errors.PeerUnreachable) as info:
            await client.send_message(url, MSG, dialect="0.3")
    assert str(info.value) == f"could not reach {url}: timed out after 0.3 s"


def test_peer_url_forms() -> None:
    u = normalize_peer_url("localhost:52222")
    assert (u.scheme, u.host, u.port, u.path) == ("http", "localhost", 52222, "/")
    assert str(normalize_peer_url("http://127.0.0.1:9/a2a")) == "http://127.0.0.1:9/a2a"
    assert normalize_peer_url("http://127.0.0.1:9").path == "/"
    with pytest.raises(errors.UnsupportedPeerURL, match="no TLS here"):
        normalize_peer_url("https://example.com")
    with pytest.raises(errors.UnsupportedPeerURL, match="only http"):
        normalize_peer_url("ftp://example.com")


async def test_https_refused_before_dialling() -> None:
    async with A2AClient() as client:
        with pytest.raises(errors.UnsupportedPeerURL):
            await client.send_message("https://127.0.0.1:1", MSG, dialect="0.3")


class Recorder:
    def __init__(self, result: Any) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.result = result
        self.peers: set[Any] = set()

    async def handle(self, r: web.Request) -> web.Response:
        if r.method != "POST":
            return web.Response(status=404)
        body = await r.json()
        self.requests.append((r.path, dict(r.headers), body))
        self.peers.add(r.transport.get_extra_info("peername") if r.transport else None)
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": self.result})


async def test_0_3_wire_and_extra_headers() -> None:
    rec = Recorder(TASK)
    async with serve(rec.handle) as url, A2AClient() as client:
        extra = {
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "tracestate": "a=b",
            "x-murmur-task-origin": "peer",
            "x-murmur-task-trust": "untrusted",
        }
        task = await client.send_message(url + "/a2a", MSG, headers=extra)  # no card → 0.3
        assert (task.id, task.context_id, task.status.state) == ("tsk_1", "ctx_1", TaskState.SUBMITTED)
        await client.get_task(url, "tsk_1")
        await client.cancel_task(url, "tsk_1")
    path, headers, body = rec.requests[0]
    assert path == "/a2a"
    assert body["method"] == "message/send" and body["id"].startswith("req_")
    assert body["params"]["message"] == {
        "kind": "message",
        "messageId": "m1",
        "role": "user",
        "parts": [{"kind": "text", "text": "hi"}],
    }
    for k, v in extra.items():
        assert headers[k] == v
    assert headers["A2A-Version"] == "0.3"
    assert body["params"]["configuration"] == {"blocking": False}  # our senders never block
    assert [b["method"] for _, _, b in rec.requests] == ["message/send", "tasks/get", "tasks/cancel"]
    assert rec.requests[1][2]["params"] == {"id": "tsk_1"}
    assert len(rec.peers) == 1  # one pooled connection reused


async def test_1_0_wire_from_card() -> None:
    rec = Recorder({"task": {"id": "tsk_1", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}})
    card = {"name": "x", "supportedInterfaces": [{"url": "u", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]}
    async with serve(rec.handle, card) as url, A2AClient() as client:
        task = await client.send_message(url, MSG)
        assert task.status.state is TaskState.WORKING
        rec.result = rec.result["task"]
        assert (await client.get_task(url, "tsk_1")).id == "tsk_1"
        assert (await client.cancel_task(url, "tsk_1")).id == "tsk_1"
        fetched = await client.fetch_card(url)
        assert fetched.name == "x"
    _, headers, body = rec.requests[0]
    assert headers["A2A-Version"] == "1.0"
    assert body["method"] == "SendMessage"
    assert body["params"]["message"] == {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    assert body["params"]["configuration"] == {"returnImmediately": True}  # our senders never block
    assert [b["method"] for _, _, b in rec.requests] == ["SendMessage", "GetTask", "CancelTask"]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_redirects_are_never_followed(status: int) -> None:
    """A 3xx is a PeerHTTPError with a sentence; nothing reaches the server it points to."""
    beyond = Recorder(TASK)
    card = {
        "name": "x",
        "supportedInterfaces": [{"url": "/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
    }
    tail = "and A2A requests are never redirected: give the URL the peer serves A2A at"
    async with serve(beyond.handle, card) as elsewhere:

        async def redirect(r: web.Request) -> web.Response:
            return web.Response(status=status, headers={"Location": f"{elsewhere}{r.path}"})

        async with serve(redirect, card) as url, A2AClient() as client:
            with pytest.raises(errors.PeerHTTPError) as sent:
                await client.send_message(url, MSG, headers={"x-murmur-task-seal": "v2.ses.SEAL"})
            with pytest.raises(errors.PeerHTTPError) as got:
                await client.get_task(url + "/a2a", "tsk_1", dialect="0.3")
        async with serve(redirect) as bare, A2AClient() as client:
            with pytest.raises(errors.PeerHTTPError) as card_got:
                await client.fetch_card(bare)
    assert beyond.requests == []
    assert (
        str(sent.value) == f"peer at {url}/a2a refused the message ({status}): it redirects to {elsewhere}/a2a, {tail}"
    )
    assert "SEAL" not in str(sent.value)
    assert got.value.status == status and str(got.value).endswith(tail)
    assert card_got.value.status == status
    assert str(card_got.value).startswith(
        f"peer at {bare} refused the message ({status}): it redirects to {elsewhere}/"
    )


async def test_fetch_card_errors() -> None:
    async def h(_r: web.Request) -> web.Response:
        return web.Response(status=404)

    async with serve(h) as url, A2AClient() as client:
        with pytest.raises(errors.PeerHTTPError):
            await client.fetch_card(url)
        assert await client.dialect_for(url) == "0.3"
    async with serve(h, card={"nope": 1}) as url, A2AClient() as client:
        with pytest.raises(errors.InvalidResponse, match="agent card is not valid"):
            await client.fetch_card(url)


async def test_close_and_reopen() -> None:
    rec = Recorder(TASK)
    async with serve(rec.handle) as url:
        client = A2AClient()
        await client.get_task(url, "t", dialect="0.3")
        await client.close()
        await client.close()
        await client.get_task(url, "t", dialect="0.3")  # a closed client reopens lazily
        await client.close()
    assert json.dumps(rec.requests[0][2]["params"]) == '{"id": "t"}'


async def test_endpoint_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Doors come and go on new ports; the remembered endpoints stay bounded and still correct."""
    import a2a.client as client_module

    monkeypatch.setattr(client_module, "ENDPOINT_CACHE", 3)
    card = {
        "name": "x",
        "supportedInterfaces": [{"url": "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
    }
    fetched: list[int] = []

    async def h(r: web.Request) -> web.Response:
        assert r.path == "/.well-known/agent-card.json"
        fetched.append(r.url.port or 0)
        return web.json_response(card)

    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(serve(h)) for _ in range(5)]
        client = await stack.enter_async_context(A2AClient())
        for url in urls:
            assert await client.resolve(url) == client_module.Endpoint(url + "/rpc", "1.0")
        assert len(client._endpoints) <= 3 and len(fetched) == 5
        await client.resolve(urls[4])  # still remembered: no card read
        assert len(fetched) == 5
        assert await client.resolve(urls[0]) == client_module.Endpoint(urls[0] + "/rpc", "1.0")
        assert len(fetched) == 6  # forgotten when the cache was emptied, read afresh
