"""Reading an exported file for a redeem: the blocking half, shared by this host and a node keeper.

The daemon runs these through its executor for a session whose workdir is on its own disk; a
Ray node keeper runs the very same functions in a worker thread for a session whose workdir is
on its node (roost/backends/ray/node/peers.py). The path rules (:mod:`roost.core.peerpaths`) and the
descriptor walk (:mod:`roost.services.peer.resolve`) are applied here, so both places enforce them alike.

Bytes and etag always describe the same content: a file of at most :data:`SMALL_FILE` bytes is
read once from its descriptor and hashed from the very bytes that will be sent; a larger one is
hashed in a first pass over the *same* descriptor (:func:`hash_fd`, or the hash comes from an
:class:`EtagCache` keyed by the descriptor's (dev, ino, size, mtime_ns, ctime_ns)), then sent
from that descriptor, and its identity is read again afterwards: a file that changed while it
was sent is never answered as a complete 200.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from roost.services.peer.errors import TooLarge
from roost.services.peer.resolve import OpenedFile, open_export

__all__ = ["HASH_CHUNK", "SMALL_FILE", "EtagCache", "FileIdentity", "SmallBody", "hash_fd", "identity", "open_and_read"]

SMALL_FILE: Final = 64 * 1024
HASH_CHUNK: Final = 1024 * 1024

FileIdentity = tuple[int, int, int, int, int]


class EtagCache:
    """sha256 by file identity (dev, ino, size, mtime_ns, ctime_ns); bounded LRU."""

    def __init__(self, maximum: int = 4096) -> None:
        self._max = maximum
        self._items: OrderedDict[FileIdentity, str] = OrderedDict()

    def get(self, key: FileIdentity) -> str | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: FileIdentity, value: str) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._max:
            self._items.popitem(last=False)


@dataclass(frozen=True, slots=True)
class SmallBody:
    """A small file read whole from one descriptor, with its hash and mtime."""

    data: bytes
    sha256: str
    mtime_ms: int


def identity(fd: int) -> FileIdentity:
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def open_and_read(
    workdir: str,
    root: tuple[str, ...],
    components: tuple[str, ...],
    max_bytes: int,
    uid: int | None = None,
    follow: bool = False,
    identity: tuple[int, int] | None = None,
) -> SmallBody | OpenedFile:
    """One blocking job for the common case: walk, open, and (small file) read + hash + close.

    A file of at most :data:`SMALL_FILE` bytes at open is read whole (bounded by ``max_bytes +
    1``: a file that grew past the ceiling is ``too_large``) and hashed from the very bytes that
    will be sent. A larger one is returned open; the caller owns and closes its descriptor.
    """
    opened = open_export(workdir, root, components, max_bytes, uid, follow=follow, identity=identity)
    if opened.size > SMALL_FILE:
        return opened
    try:
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(opened.fd, min(left, SMALL_FILE * 4))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(opened.fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise TooLarge(max_bytes)
    return SmallBody(data, hashlib.sha256(data).hexdigest(), opened.mtime_ms)


def hash_fd(opened: OpenedFile) -> str | None:
    """sha256 of exactly ``opened.size`` bytes; ``None`` if the file changed while hashed."""
    h = hashlib.sha256()
    offset = 0
    while offset < opened.size:
        chunk = os.pread(opened.fd, min(HASH_CHUNK, opened.size - offset), offset)
        if not chunk:
            return None
        h.update(chunk)
        offset += len(chunk)
    if os.pread(opened.fd, 1, offset) or identity(opened.fd) != opened.identity:
        return None
    return h.hexdigest()
