"""Atomic, durable file writes: the one implementation every record writer uses.

A reader sees the old bytes or the new, never a mixture: the data goes to a temp file beside the
target (created exclusively, never through a link), is fsynced, renamed over the target, and the
directory is fsynced so the rename itself survives a crash. An ``exclusive`` write links the temp
file into place instead of renaming it: like ``O_EXCL`` it never replaces an existing path, so a
file that must be created once (the master key) is either whole or absent.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["fsync_dir", "write_atomic"]


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, mode: int = 0o600, durable: bool = True, exclusive: bool = False) -> None:
    """Replace ``path`` with ``data`` atomically (blocking; call through the executor).

    With ``exclusive``, create ``path`` only if nothing is there (not even a dangling link):
    :class:`FileExistsError` otherwise, and the existing path is left untouched.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    try:
        try:
            os.fchmod(fd, mode)  # the umask may have narrowed it
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            os.link(tmp, path)
            tmp.unlink()
        else:
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)
