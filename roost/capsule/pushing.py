"""The session door's push-notification delivery, held to the session's egress rule.

Why here: a webhook is egress of the capsule's side, so the door posts only where the relay
would let the session send (:class:`roost.core.egress.Egress`, the one rule for both): URLs its
``capabilities.network.allow`` covers, never the daemon's listeners nor the door's own. The
rule is checked when a config is set, before every post, and again on the address each
connection reached. Posts go through :class:`a2a.http1.Http1Pool` (plain HTTP, never a redirect).
"""

from __future__ import annotations

from collections.abc import Iterable

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


def push_delivery(egress: SessionEgress) -> tuple[PushDelivery, Http1Pool]:
    """Delivery for the door, and the pool it posts through (closed with the session)."""
    pool = Http1Pool(connect_timeout=PUSH_CONNECT_SECS, total_timeout=PUSH_TOTAL_SECS, peer_check=egress.peer_refusal)
    return PushDelivery(pool, egress.refusal), pool
