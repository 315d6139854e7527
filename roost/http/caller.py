"""Who sent this request: the one accessor handlers use for the caller's identity.

``caller_of(request)`` answers a :class:`Caller` with the uid of the process at the other end
of the request's connection — ``SO_PEERCRED`` on a unix socket, an exact sock_diag lookup on a
loopback TCP connection (:mod:`roost.system.peercred`) — or ``uid=None`` when the kernel cannot say
(a peer on another host). The answer is worked out once per connection and cached with it:
a connection's owner cannot change while it is open, and keep-alive requests then cost
nothing. docs/security.md says what each endpoint does with it.
"""

from __future__ import annotations

import asyncio
import socket
import weakref
from dataclasses import dataclass
from typing import Literal

from aiohttp import web

from roost.core.loopback import is_loopback_peer
from roost.system.peercred import owner_uid, tcp_peer_uid, unix_peer_uid

__all__ = ["Caller", "caller_of", "forget_callers", "identify", "remember"]


@dataclass(frozen=True, slots=True)
class Caller:
    """The identity behind one connection."""

    uid: int | None
    """The uid owning the other end's socket; None when unknown (a peer on another host)."""
    via: Literal["unix", "tcp"]
    loopback: bool
    """A unix socket, or a TCP peer at a loopback address."""

    @property
    def known(self) -> bool:
        return self.uid is not None


_UNKNOWN_TCP = Caller(uid=None, via="tcp", loopback=False)
_CACHE: weakref.WeakKeyDictionary[object, Caller] = weakref.WeakKeyDictionary()


def identify(sock: socket.socket | None) -> Caller:
    """The caller behind ``sock`` (blocking for microseconds: one netlink round trip)."""
    if sock is None:
        return _UNKNOWN_TCP
    if sock.family == socket.AF_UNIX:
        return Caller(uid=unix_peer_uid(sock), via="unix", loopback=True)
    try:
        remote = sock.getpeername()
    except OSError:
        return _UNKNOWN_TCP
    loopback = is_loopback_peer(str(remote[0]))
    return Caller(uid=tcp_peer_uid(sock), via="tcp", loopback=loopback)


def caller_of(request: web.BaseRequest) -> Caller:
    """The caller of ``request``, looked up on the connection's first request and then cached."""
    transport = request.transport
    if transport is None:
        return _UNKNOWN_TCP
    return remember(transport)


def _identify_transport(transport: asyncio.BaseTransport) -> Caller:
    """Like :func:`identify`, but with the addresses asyncio already read for the transport
    (no getsockname/getpeername system calls: only the netlink round trip remains)."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family == socket.AF_UNIX:
        return identify(sock)
    remote = transport.get_extra_info("peername")
    local = transport.get_extra_info("sockname")
    if not remote or not local:
        return identify(sock)
    loopback = is_loopback_peer(str(remote[0]))
    # The other end's socket has the peer's address as its own and ours as its peer.
    uid = owner_uid((str(remote[0]), int(remote[1])), (str(local[0]), int(local[1])))
    return Caller(uid=uid, via="tcp", loopback=loopback)


def remember(transport: asyncio.BaseTransport) -> Caller:
    """Identify the connection behind ``transport`` now (on accept) and cache the answer."""
    found = _CACHE.get(transport)
    if found is None:
        found = _identify_transport(transport)
        _CACHE[transport] = found
    return found


def forget_callers() -> None:
    """Drop every cached identity (tests and benchmarks measuring a cold lookup)."""
    _CACHE.clear()
