"""Reading a child's record files by name, from an offset, without following a link.

Why: ``roostctl logs -f`` and ``roostctl job`` show a child's log and output files wherever the
child runs. A backend whose children live on other nodes answers these reads there (its node
keeper runs these functions on its own disk); the local backend runs them here. A name is a
relative path (``.murmur/launcher.log``, ``out/result.txt``) walked from the child's directory
with no link followed and no ``..`` allowed, so a child cannot point a reader elsewhere.

Everything here blocks: call it through an executor (the daemon's) or a worker thread (a keeper's).
"""

from __future__ import annotations

import os
import stat

from roost.fsutil import Place

__all__ = ["READ_MAX", "list_names", "read_at", "record_parts"]

READ_MAX = 256 * 1024
"""The most one read returns (a follower reads on from where it got to)."""


def record_parts(name: str) -> tuple[str, ...]:
    """The components of a relative record name; ValueError for an absolute name, ``.``, ``..``."""
    if not name or name.startswith("/") or "\x00" in name:
        raise ValueError("a record name is a relative path")
    parts = tuple(name.split("/"))
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError("a record name has no empty, '.' or '..' component")
    return parts


def read_at(place: Place, name: str, offset: int, max_bytes: int = READ_MAX) -> tuple[int, bytes]:
    """``(start, data)``: up to ``max_bytes`` of the regular file ``name`` from ``start``.

    ``offset < 0`` asks for the file's last ``max_bytes`` (a tail). An ``offset`` beyond the end
    means the file was truncated or replaced since: the read starts over at 0. A missing or
    unreadable file, or one that is not a regular file, reads as ``(0, b"")``.
    """
    parts = record_parts(name)
    max_bytes = max(0, min(max_bytes, READ_MAX))
    try:
        dfd = place.open_dir(parts[:-1])
    except OSError:
        return 0, b""
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return 0, b""
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return 0, b""
        start = max(0, st.st_size - max_bytes) if offset < 0 else offset if offset <= st.st_size else 0
        return start, os.pread(fd, max_bytes, start)
    except OSError:
        return 0, b""
    finally:
        os.close(fd)


def list_names(place: Place, sub: str) -> list[str]:
    """The regular files directly in the directory ``sub`` (sorted names); [] when it is missing."""
    try:
        dfd = place.open_dir(record_parts(sub))
    except OSError:
        return []
    try:
        names: list[str] = []
        for name in sorted(os.listdir(dfd)):
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                names.append(name)
        return names
    finally:
        os.close(dfd)
