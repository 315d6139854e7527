"""The session door's push-notification delivery, held to the session's egress rule.

Why here: a webhook is egress of the capsule's side, so the door posts only where the relay
would let the session send (:class:`roost.core.egress.Egress`, the one rule for both): URLs its
``capabilities.network.allow`` covers, never the daemon's listeners nor the door's own. The
rule is checked when a config is set, before every post, and again on the address each
connection reached (for ``https`` webhooks: on the addresses the name resolves to, the only ones
dialled). Plain ``http`` posts go through :class:`a2a.http1.Http1Pool`, ``https`` ones through
aiohttp with the system's trust store; neither follows a redirect.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from a2a.http1 import Http1Pool
from a2a.push import PushDelivery
from roost.core.egress import Egress, own_listeners
from roost.system.hostaddrs import host_addresses

__all__ = ["SessionEgress", "push_delivery"]

PUSH_CONNECT_SECS = 5.0
PUSH_TOTAL_SECS = 10.0


class SessionEgress:
    """The session's egress rule; the door's own listener joins it once the door is bound."""

    def __init__(self, allow: Iterable[str], daemon_url: str | None) -> None:
        self._addresses = host_addresses()
        self._allow = tuple(allow)
        self._listeners: list[tuple[str, int]] = []
        if daemon_url:
            try:
                url = URL(daemon_url)
            except ValueError:
                url = None
            if url is not None and url.host and url.port:
                self._listeners.append((url.host, url.port))
        self.rule = Egress(self._allow, own_listeners(self._listeners, self._addresses))

    def door_bound(self, host: str, port: int) -> None:
        self._listeners.append((host, port))
        self.rule = Egress(self._allow, own_listeners(self._listeners, self._addresses))

    def refusal(self, url: str) -> str | None:
        return self.rule.refusal(url)

    def peer_refusal(self, host: str, port: int) -> str | None:
        return self.rule.peer_refusal(f"http://{host}:{port}", host, port)


class _EgressResolver(AbstractResolver):
    """Name resolution for https webhooks that drops the addresses the egress rule forbids (so
    aiohttp dials only addresses that were checked)."""

    def __init__(self, egress: SessionEgress) -> None:
        self._egress = egress
        self._inner = aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        kept = [r for r in found if self._egress.peer_refusal(r["host"], r["port"]) is None]
        if not kept:
            refusal = self._egress.peer_refusal(found[0]["host"], found[0]["port"]) if found else None
            raise OSError(refusal or f"{host} resolves to no address")
        return kept

    async def close(self) -> None:
        await self._inner.close()


class WebhookPoster:
    """Posts a webhook body: plain http through the pool, https through aiohttp; never a redirect."""

    def __init__(self, egress: SessionEgress) -> None:
        self._egress = egress
        self.pool = Http1Pool(
            connect_timeout=PUSH_CONNECT_SECS, total_timeout=PUSH_TOTAL_SECS, peer_check=egress.peer_refusal
        )
        self._tls: aiohttp.ClientSession | None = None

    async def __call__(
        self, method: str, url: URL, body: bytes | None, headers: Mapping[str, str]
    ) -> tuple[int, bytes, str | None]:
        if url.scheme != "https":
            return await self.pool(method, url, body, headers)
        if self._tls is None or self._tls.closed:
            connector = aiohttp.TCPConnector(resolver=_EgressResolver(self._egress))
            timeout = aiohttp.ClientTimeout(total=PUSH_TOTAL_SECS, sock_connect=PUSH_CONNECT_SECS)
            self._tls = aiohttp.ClientSession(
                connector=connector, timeout=timeout, trust_env=False, cookie_jar=aiohttp.DummyCookieJar()
            )
        try:
            async with self._tls.request(method, url, data=body, headers=dict(headers), allow_redirects=False) as resp:
                return resp.status, await resp.read(), resp.headers.get("Location")
        except aiohttp.ClientError as exc:
            raise OSError(str(exc) or type(exc).__name__) from None

    async def close(self) -> None:
        await self.pool.close()
        if self._tls is not None:
            await self._tls.close()


def push_delivery(egress: SessionEgress) -> tuple[PushDelivery, WebhookPoster]:
    """Delivery for the door, and the poster it posts through (closed with the session)."""
    poster = WebhookPoster(egress)
    return PushDelivery(poster, egress.refusal, http_only=False), poster
