"""The dashboard's only way to the daemon: HTTP over the admin unix socket (aiohttp client).

The daemon checks every connection's ``SO_PEERCRED`` uid there, exactly as for ``roostctl``;
the dashboard holds no credential of its own.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp

__all__ = ["AdminError", "AdminSocket"]


class AdminError(Exception):
    """The daemon refused or is unreachable; ``message`` is a sentence for the page."""

    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class AdminSocket:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=str(self.path)),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
            )
        return self._session

    def stopped_sentence(self) -> str:
        """What the page says when the daemon does not answer (never the socket's error text)."""
        return (
            f"The daemon is not running: nothing answers on its admin socket {self.path}. Start it again "
            "(mur-roost --config …, or systemctl start mur-roost); this page reconnects by itself."
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def _request(self, method: str, path: str, body: object = None) -> tuple[Mapping[str, str], bytes]:
        try:
            async with self._http().request(
                method, f"http://admin{path}", json=body, timeout=aiohttp.ClientTimeout(total=30)
            ) as resp:
                raw = await resp.read()
                if resp.status >= 400:
                    try:
                        doc = json.loads(raw)
                        msg = doc.get("message") or doc.get("error") if isinstance(doc, dict) else None
                    except ValueError:
                        msg = None
                    raise AdminError(str(msg or f"the daemon answered HTTP {resp.status}"), resp.status)
                return resp.headers, raw
        except (aiohttp.ClientError, OSError):
            raise AdminError(self.stopped_sentence(), 502) from None

    async def _call(self, method: str, path: str, body: object = None, *, text: bool = False) -> Any:
        _, raw = await self._request(method, path, body)
        if text:
            return raw.decode("utf-8", "replace")
        return json.loads(raw) if raw else {}

    async def get(self, path: str) -> Any:
        return await self._call("GET", path)

    async def post(self, path: str, body: object = None) -> Any:
        return await self._call("POST", path, body if body is not None else {})

    async def text(self, path: str) -> str:
        return str(await self._call("GET", path, text=True))

    async def raw(self, path: str) -> tuple[Mapping[str, str], bytes]:
        """A route's body as it came, with the answer's headers."""
        return await self._request("GET", path)

    async def lines(self, path: str) -> AsyncIterator[dict[str, object] | None]:
        """NDJSON objects from a streaming admin route until it ends; ``None`` for each keep-alive
        (so the caller can write one too, which is how it notices that its own reader left)."""
        try:
            async with self._http().get(f"http://admin{path}") as resp:
                if resp.status >= 400:
                    raise AdminError(f"the daemon answered HTTP {resp.status}", resp.status)
                async for raw in resp.content:
                    raw = raw.strip()
                    if not raw:
                        yield None
                        continue
                    try:
                        obj = json.loads(raw)
                    except ValueError:
                        continue
                    if isinstance(obj, dict):
                        yield obj
        except (aiohttp.ClientError, OSError):
            raise AdminError(self.stopped_sentence(), 502) from None
