"""This host's own addresses: what a listener bound to every address answers on.

Why it exists: the egress rule (:mod:`roost.core.egress`) never lets a session reach this host's
own listeners, and a listener bound to ``0.0.0.0``/``::`` answers on each interface address, so
the rule needs them listed. Read once at start-up (psutil, a few system calls).
"""

from __future__ import annotations

import socket

import psutil

__all__ = ["host_addresses"]


def host_addresses() -> list[str]:
    """Every IPv4 and IPv6 address of this host's interfaces (lowercased, without an IPv6 zone)."""
    out: list[str] = []
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family in (socket.AF_INET, socket.AF_INET6):
                out.append(a.address.split("%", 1)[0].lower())
    return out
