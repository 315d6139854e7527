"""Whether an address is this host's own: the one test, for a host name and for a peer address.

Four places ask it — the config's ``bind`` rule, the plaintext-listener rule, ``roostctl
doctor``'s network check and the routes that answer only this host — and they must agree, or a
caller one of them calls local would be remote to another. Stdlib only (:mod:`ipaddress`), so
roostctl imports it at no cost.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback_host", "is_loopback_peer"]


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP address (IPv4-mapped ``::ffff:127.x.y.z`` too); a name, or
    an unspecified address (``0.0.0.0``, ``::``), is not."""
    if host == "localhost":
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped.is_loopback
    return addr.is_loopback


def is_loopback_peer(remote: str | None) -> bool:
    """A connection's peer address on this host: a loopback address, or no address at all (a
    unix socket). Common loopback forms are answered without parsing (it runs per request)."""
    if not remote:
        return True
    if remote.startswith("127.") or remote == "::1" or remote.startswith("::ffff:127."):
        return True
    return remote != "localhost" and is_loopback_host(remote)
