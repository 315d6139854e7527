"""Whether a URL points back at one of the daemon's own listeners (pure).

Why: the relay dials what a session names, within its ``network.allow``; a bare-host rule such
as ``127.0.0.1`` (any port) would let a session make the daemon call its own API — with the
relay's headers, from the daemon's own uid. So the relay refuses a target whose host is one of
the daemon's listener addresses (any loopback address, or ``localhost``, for a loopback listener;
the listener's own address otherwise) on one of its ports. A host name is compared as written:
resolving names is the egress guard's (docs/security.md, threat S5).
"""

from __future__ import annotations

from collections.abc import Iterable

from roost.core.authz import host_name
from roost.core.loopback import is_loopback_host

__all__ = ["dials_own_listener"]


def _split(url: str) -> tuple[str, int] | None:
    scheme, sep, rest = url.strip().partition("://")
    if not sep:
        scheme, rest = "http", url.strip()
    netloc = rest.split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]
    name = host_name(netloc)
    if not name:
        return None
    tail = netloc.rsplit("]", 1)[-1]
    port_text = tail.rsplit(":", 1)[1] if ":" in tail else ""
    if port_text:
        if not port_text.isdigit():
            return None
        return name, int(port_text)
    return name, 443 if scheme.lower() == "https" else 80


def dials_own_listener(url: str, listeners: Iterable[tuple[str, int]]) -> bool:
    """Whether ``url`` names one of ``listeners`` (``(host, port)`` each: the daemon's ``bind``
    and ``listen`` addresses with their bound ports)."""
    target = _split(url)
    if target is None:
        return False
    name, port = target
    for host, own_port in listeners:
        if port != own_port:
            continue
        host = host.strip("[]").lower()
        if name == host or (is_loopback_host(name) and (is_loopback_host(host) or host in ("0.0.0.0", "::"))):
            return True
    return False
