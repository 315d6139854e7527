"""Connection limits on the TCP listener: a deadline for the first request head, an idle
keep-alive timeout, and a cap on open connections per uid.

Why here and not in a proxy: every local user can reach the loopback port, so one user's
thousands of silent or trickling connections must not use up the daemon's descriptors or its
loop. Each accepted connection is identified at once (the uid behind it, by the exact
sock_diag lookup of :mod:`roost.http.caller`, cached for the connection's requests):

* over ``max_connections_per_uid`` open connections from that uid → closed on accept;
* no complete request head within ``header_timeout_secs`` → closed (aiohttp's own keep-alive
  timer, set to ``keepalive_timeout_secs``, then bounds idle time and slow heads between the
  requests of a kept-alive connection).

``/health`` and every other user keep being served. docs/security.md (D2).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from roost.http.caller import remember

__all__ = ["ConnectionGuard"]

log = structlog.get_logger("roost.http")


@dataclass
class ConnectionGuard:
    """Limits and the live count of connections per uid (None: a caller of unknown uid).

    The listener asks it through :class:`roost.http.server.ConnectionPolicy`."""

    header_timeout_secs: float = 10.0
    max_per_uid: int = 1024
    open: Counter[int | None] = field(default_factory=Counter)
    refused: int = 0
    timed_out: int = 0

    def admit(self, transport: asyncio.BaseTransport) -> Callable[[], None] | None:
        """Count the connection against its uid, or None when that uid is at its cap."""
        uid = remember(transport).uid
        if self.open[uid] >= self.max_per_uid:
            self.refused += 1
            if self.refused in (1, 100, 10_000) or self.refused % 100_000 == 0:
                log.warning("connection_cap_reached", uid=uid, cap=self.max_per_uid, refused=self.refused)
            return None
        self.open[uid] += 1

        def release() -> None:
            self.open[uid] -= 1
            if self.open[uid] <= 0:
                del self.open[uid]

        return release

    def head_missed(self) -> None:
        self.timed_out += 1
