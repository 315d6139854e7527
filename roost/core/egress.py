"""Where a session's outbound HTTP may go: the one egress rule for relayed sends and push webhooks.

Why one rule: a relayed A2A send and a push notification the session's door posts are both the
session reaching out, so both obey the same two checks, in this order, with the same sentences:

* the session's ``capabilities.network.allow`` must cover the URL (:func:`roost.core.netrule.allows`;
  the refusal is upstream's sentence, byte for byte);
* the URL must not be one of this host's own listeners — the daemon's, or the session's own door
  (a webhook pointed at the daemon's API, or a door posting to itself). A loopback name and a
  loopback address are the same listener; a listener bound to every address
  (``0.0.0.0``/``::``) is listed by the caller under each address of this host
  (:func:`own_listeners`).

The same check is made again on the address a connection actually reached
(:meth:`Egress.peer_refusal`), so a name that resolves to one of those listeners is refused too.
Pure: the caller gathers the host's addresses. docs/security.md, "Egress".
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from roost.core.loopback import is_loopback_host
from roost.core.netrule import Target, allows

__all__ = ["WILDCARDS", "Egress", "egress_refusal", "network_refusal", "own_listeners", "own_refusal"]

WILDCARDS = frozenset({"0.0.0.0", "::", ""})
Listener = tuple[str, int]


def network_refusal(url: str) -> str:
    return f"network policy: '{url}' not in capabilities.network.allow"


def own_refusal(url: str) -> str:
    return f"network policy: '{url}' is a listener of this host's own mur-roost or door, which a session never reaches"


def own_listeners(listeners: Iterable[Listener], host_addresses: Iterable[str]) -> frozenset[Listener]:
    """Every (host, port) a listener answers on: as bound, and under each of the host's addresses
    for one bound to every address."""
    addresses = [a.lower() for a in host_addresses]
    out: set[Listener] = set()
    for host, port in listeners:
        host = host.strip("[]").lower()
        if host in WILDCARDS:
            out.update((a, port) for a in addresses)
            out.add(("127.0.0.1", port))
        else:
            out.add((host, port))
    return frozenset(out)


def _is_own(own: frozenset[Listener], host: str, port: int) -> bool:
    host = host.strip("[]").lower()
    if (host, port) in own:
        return True
    return is_loopback_host(host) and any(p == port and is_loopback_host(h) for h, p in own)


@functools.lru_cache(maxsize=4096)
def egress_refusal(allow: tuple[str, ...], own: frozenset[Listener], url: str) -> str | None:
    """The refusal sentence for a session with ``allow`` dialling ``url``, or None (remembered: a
    session dials the same few URLs)."""
    if not allows(allow, url):
        return network_refusal(url)
    target = Target.parse(url)
    if target is not None and own and _is_own(own, target.host, target.port):
        return own_refusal(url)
    return None


@dataclass(frozen=True, slots=True)
class Egress:
    """One session's egress rule: its network allow entries and the host's own listeners."""

    allow: tuple[str, ...]
    own: frozenset[Listener] = frozenset()

    def refusal(self, url: str) -> str | None:
        """The refusal sentence for dialling ``url``, or None when it may be dialled."""
        return egress_refusal(self.allow, self.own, url)

    def peer_refusal(self, url: str, host: str, port: int) -> str | None:
        """The refusal when a connection for ``url`` reached ``host:port``, one of the own listeners."""
        return own_refusal(url) if self.own and _is_own(self.own, host, port) else None
