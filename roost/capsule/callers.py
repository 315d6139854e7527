"""Who is calling the capsule's door: the uid behind a loopback TCP connection.

Why: a direct (unsealed) caller of the door sees only the tasks created by its own uid, so the
door needs the uid of the process at the other end of each connection. The kernel's socket
table (``/proc/net/tcp``) lists every IPv4 socket with its owner's uid; the caller's socket is the
one whose local address is the connection's peer address and whose remote address is the door.
Read once per connection (the door caches the answer per transport), in a worker thread.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

from aiohttp import web

TCP_TABLE = Path("/proc/net/tcp")


def _hex_addr(host: str, port: int) -> str:
    """``127.0.0.1``, 5000 → ``0100007F:1388``, the table's spelling (address in host byte order)."""
    return f"{int.from_bytes(socket.inet_aton(host), sys.byteorder):08X}:{port:04X}"


def socket_uid(peer: tuple[str, int], local: tuple[str, int], table: Path = TCP_TABLE) -> int | None:
    """Blocking: the uid owning the IPv4 socket ``peer`` → ``local``, or None when not listed."""
    try:
        want_local, want_remote = _hex_addr(*peer), _hex_addr(*local)
    except OSError:
        return None  # not an IPv4 address
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 7 and fields[1] == want_local and fields[2] == want_remote:
            try:
                return int(fields[7])
            except ValueError:
                return None
    return None


async def loopback_owner(request: web.BaseRequest) -> str | None:
    """The door's ``identify`` callable: ``uid:<n>`` for the process behind the connection."""
    transport = request.transport
    if transport is None:
        return None
    peer = transport.get_extra_info("peername")
    local = transport.get_extra_info("sockname")
    if not peer or not local:
        return None
    uid = await asyncio.to_thread(socket_uid, (peer[0], peer[1]), (local[0], local[1]))
    return f"uid:{uid}" if uid is not None else None
