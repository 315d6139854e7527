"""A2A 1.0 §8.3.2: the client sends to the URL of the interface it selected from the card.

The peer here serves its card at the origin and JSON-RPC only at ``/a2a/jsonrpc/`` (as the JS
SDK's express server does); the root answers 404, so a client that ignored the card would fail.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from a2a.client import A2AClient
from a2a.door import Door
from a2a.protocol.errors import PeerHTTPError, UnsupportedPeerURL
from a2a.protocol.models import Message, Part, TaskState
from tests.a2a.conformance.harness import SESSION, Script


@contextlib.asynccontextmanager
async def pathed_peer(interfaces: list[tuple[str, str]]) -> AsyncIterator[tuple[str, list[str]]]:
    """A door mounted at /a2a/jsonrpc/ behind a card listing ``(path or url, version)`` interfaces.

    An absolute URL may name ``{port}``, the peer's own port.
    """
    door = Door(name="pathed", version="1", session_id=SESSION, runner=Script(), peer_tasks_accept=True)
    outer = web.Application()
    seen: list[str] = []
    base: list[str] = []

    async def card(_request: web.Request) -> web.Response:
        listed = [
            {
                "url": u.format(port=base[0].rsplit(":", 1)[1]) if "://" in u else base[0] + u,
                "protocolBinding": "JSONRPC",
                "protocolVersion": v,
            }
            for u, v in interfaces
        ]
        body: dict[str, Any] = {
            "name": "pathed",
            "description": "",
            "version": "1",
            "supportedInterfaces": listed,
            "capabilities": {},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [],
        }
        return web.json_response(body)

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.method == "POST":
            seen.append(f"{request.path} {request.headers.get('A2A-Version', '-')}")
        response: web.StreamResponse = await handler(request)
        return response

    outer.middlewares.append(record)
    outer.router.add_get("/.well-known/agent-card.json", card)
    outer.add_subapp("/a2a/jsonrpc/", door.app)
    runner = web.AppRunner(outer)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    base.append(f"http://127.0.0.1:{runner.addresses[0][1]}")
    try:
        yield base[0], seen
    finally:
        await runner.cleanup()


def _msg(text: str) -> Message:
    return Message(message_id="m1", role="user", parts=[Part(kind="text", text=text)])


@pytest.mark.parametrize(
    ("interfaces", "dialect"),
    [
        ([("/a2a/jsonrpc/", "0.3"), ("/a2a/jsonrpc/", "1.0")], "1.0"),
        ([("/a2a/jsonrpc/", "0.3")], "0.3"),
        ([("https://example.invalid/x", "1.0"), ("/a2a/jsonrpc/", "0.3")], "0.3"),
    ],
)
async def test_client_posts_to_the_selected_interface(interfaces: list[tuple[str, str]], dialect: str) -> None:
    async with pathed_peer(interfaces) as (url, seen), A2AClient() as client:
        endpoint = await client.resolve(url)
        assert (endpoint.url, endpoint.dialect) == (url + "/a2a/jsonrpc/", dialect)
        task = await client.send_message(url, _msg("hi"))
        assert task.status.state in (TaskState.SUBMITTED, TaskState.WORKING, TaskState.COMPLETED)
        got = await client.get_task(url, task.id)
        assert got.id == task.id
    assert seen == [f"/a2a/jsonrpc/ {dialect}", f"/a2a/jsonrpc/ {dialect}"]


async def test_card_with_nothing_dialable_is_refused() -> None:
    async with pathed_peer([("https://example.invalid/x", "1.0")]) as (url, seen), A2AClient() as client:
        with pytest.raises(UnsupportedPeerURL, match="no JSON-RPC interface this client can dial"):
            await client.send_message(url, _msg("hi"))
    assert seen == []


async def test_explicit_dialect_posts_where_told() -> None:
    async with pathed_peer([("/a2a/jsonrpc/", "1.0")]) as (url, _seen), A2AClient() as client:
        with pytest.raises(PeerHTTPError) as info:  # the root is no JSON-RPC endpoint here
            await client.send_message(url, _msg("hi"), dialect="1.0")
        assert info.value.status == 404
