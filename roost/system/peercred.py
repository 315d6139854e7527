"""Who is at the other end of a socket: ``SO_PEERCRED`` for unix sockets, sock_diag for TCP.

For a loopback TCP connection the kernel knows which socket the other end is, and that
socket's owner: one ``NETLINK_SOCK_DIAG`` request naming the exact address pair
(``inet_diag_req_v2`` without ``NLM_F_DUMP``) returns that one socket's ``inet_diag_msg``,
whose ``idiag_uid`` is the uid that created it. It is a hash lookup in the kernel, so its cost
does not grow with the number of open sockets (reading ``/proc/net/tcp`` would, linearly).
The request and its answer are one ``sendto`` and one ``recv`` on a netlink socket the kernel
answers synchronously, so the lookup is done inline; it never waits on a disk or a peer.

A connection from another host has no socket in this kernel: the lookup answers ``None``.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import socket
import struct
import threading

__all__ = ["SockDiag", "owner_of", "owner_uid", "tcp_peer_uid", "unix_peer", "unix_peer_uid"]

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLMSG_ERROR = 0x2
NLMSG_DONE = 0x3
INET_DIAG_NOCOOKIE = 0xFFFFFFFF
TCP_ALL_STATES = 0xFFFFFFFF

_NLMSGHDR = struct.Struct("=IHHII")
# inet_diag_req_v2: family, protocol, ext, pad, states; then inet_diag_sockid:
# sport, dport (big-endian), src[16], dst[16], if, cookie[2].
_REQ = struct.Struct("=BBBBI")
_SOCKID = struct.Struct("!HH16s16s")
_SOCKID_TAIL = struct.Struct("=III")
# inet_diag_msg after the 4 leading bytes and the 48-byte sockid: expires, rqueue, wqueue, uid, inode.
_MSG_UID_OFFSET = 4 + 48 + 12
_PEERCRED = struct.Struct("3i")


def unix_peer(sock: socket.socket | None) -> tuple[int, int] | None:
    """``(pid, uid)`` of the process at the other end of a unix socket (``SO_PEERCRED``), or None."""
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    except OSError:
        return None
    pid, uid, _gid = _PEERCRED.unpack(raw)
    return int(pid), int(uid)


def unix_peer_uid(sock: socket.socket | None) -> int | None:
    """The uid of the process at the other end of a unix socket (``SO_PEERCRED``), or None."""
    found = unix_peer(sock)
    return found[1] if found is not None else None


_V4_MAPPED = b"\x00" * 10 + b"\xff\xff"
_V4_PAD = b"\x00" * 12


def _family_and_bytes(host: str) -> tuple[int, bytes]:
    """The inet_diag family and 16-byte address of ``host`` (``ValueError`` if not an address)."""
    try:
        if ":" in host:
            packed = socket.inet_pton(socket.AF_INET6, host.split("%", 1)[0])
            if packed[:12] == _V4_MAPPED:
                # The other end of a v4 connection accepted on a dual-stack socket is AF_INET.
                return socket.AF_INET, packed[12:] + _V4_PAD
            return socket.AF_INET6, packed
        return socket.AF_INET, socket.inet_pton(socket.AF_INET, host) + _V4_PAD
    except OSError:
        raise ValueError(host) from None


class SockDiag:
    """One netlink socket for exact inet_diag lookups; safe to share between threads."""

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self._seq = 0
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None

    def _socket(self) -> socket.socket:
        if self._sock is None:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG)
            sock.settimeout(1.0)
            self._sock = sock
        return self._sock

    def owner_uid(self, local: tuple[str, int], remote: tuple[str, int]) -> int | None:
        """The uid owning the TCP socket whose own address is ``local`` and peer is ``remote``.

        ``None`` when no such socket exists in this kernel (the other end is on another host,
        or already gone) or when netlink is unavailable.
        """
        found = self.owner(local, remote)
        return found[0] if found is not None else None

    def owner(self, local: tuple[str, int], remote: tuple[str, int]) -> tuple[int, int] | None:
        """``(uid, inode)`` of the TCP socket whose own address is ``local`` and peer ``remote``."""
        try:
            fam_l, src = _family_and_bytes(local[0])
            fam_r, dst = _family_and_bytes(remote[0])
        except ValueError:
            return None
        if fam_l != fam_r:
            return None
        with self._lock:
            self._seq = (self._seq + 1) & 0xFFFFFFFF
            seq = self._seq
            body = (
                _REQ.pack(fam_l, socket.IPPROTO_TCP, 0, 0, TCP_ALL_STATES)
                + _SOCKID.pack(local[1], remote[1], src, dst)
                + _SOCKID_TAIL.pack(0, INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE)
            )
            msg = _NLMSGHDR.pack(_NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, seq, 0) + body
            try:
                sock = self._socket()
                sock.sendto(msg, (0, 0))
                while True:
                    data = sock.recv(8192)
                    found = _parse(data, seq)
                    if found is not _STALE:
                        return found if isinstance(found, tuple) else None
            except OSError:
                with contextlib.suppress(OSError):
                    if self._sock is not None:
                        self._sock.close()
                self._sock = None
                return None


_STALE = object()


def _parse(data: bytes, seq: int) -> tuple[int, int] | object | None:
    """``(uid, inode)`` in a reply for ``seq``; None for an error or no socket; ``_STALE`` for another seq."""
    offset = 0
    result: tuple[int, int] | object | None = _STALE
    while offset + _NLMSGHDR.size <= len(data):
        length, mtype, _flags, mseq, _pid = _NLMSGHDR.unpack_from(data, offset)
        if length < _NLMSGHDR.size:
            break
        payload = offset + _NLMSGHDR.size
        if mseq == seq:
            if mtype == SOCK_DIAG_BY_FAMILY and payload + _MSG_UID_OFFSET + 8 <= len(data):
                uid, inode = struct.unpack_from("=II", data, payload + _MSG_UID_OFFSET)
                return int(uid), int(inode)
            if mtype in (NLMSG_ERROR, NLMSG_DONE):
                result = None
        offset += (length + 3) & ~3
    return result


_DEFAULT = SockDiag()
atexit.register(_DEFAULT.close)


def owner_uid(local: tuple[str, int], remote: tuple[str, int]) -> int | None:
    """The uid owning the TCP socket whose own address is ``local`` and peer ``remote`` (or None)."""
    return _DEFAULT.owner_uid(local, remote)


def owner_of(local: tuple[str, int], remote: tuple[str, int]) -> tuple[int, int] | None:
    """``(uid, inode)`` of the TCP socket whose own address is ``local`` and peer ``remote`` (or None)."""
    return _DEFAULT.owner(local, remote)


def tcp_peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process owning the other end of a TCP connection on this host, or None."""
    try:
        local = sock.getsockname()
        remote = sock.getpeername()
    except OSError as exc:
        if exc.errno in (errno.ENOTCONN, errno.EBADF):
            return None
        raise
    # The other end's socket has the peer's address as its own and ours as its peer.
    return _DEFAULT.owner_uid((remote[0], remote[1]), (local[0], local[1]))
