"""Where fetched bytes land: ``peer-in/<handle_id>-<clean basename>``, written atomically.

The name (the pure part) is chosen by the runtime, never by the peer: the
hint is ``p`` from the handle's *unverified* payload (the fetcher holds no key), so it is
attacker-controlled and is reduced to its last ``/`` component, every character outside
``[A-Za-z0-9._-]`` becomes ``_``, it is cut to 120 characters, and an empty, ``.`` or ``..``
result becomes ``file``. The ``handle_id`` prefix keeps two handles from colliding; the same
handle fetched twice replaces its own file.

The write (blocking part) fixes upstream's plain ``fs::write``, which follows a link an agent
planted at the destination name: the session's workdir is opened, ``peer-in`` is created and
opened relative to it with ``O_NOFOLLOW | O_DIRECTORY`` (a planted ``peer-in`` link is refused),
the bytes go to a fresh ``O_EXCL | O_NOFOLLOW`` temporary inside that directory, which is
fsynced and ``rename``d over the final name relative to the same directory descriptor (rename
replaces a planted link rather than writing through it), and the directory is fsynced. A
reader therefore sees either the previous file or the whole new one, never a torn body.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import json
import os
import re
import secrets
from typing import Final

from roost.system.workdirs import W_OK, X_OK, groups_of, may_access

__all__ = ["PEER_IN", "PeerInWriter", "clean_name", "hint_from_token", "stored_path"]

PEER_IN: Final = "peer-in"
_KEEP: Final = re.compile(r"[^A-Za-z0-9._-]")
_MAX_NAME: Final = 120
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def clean_name(hint: str | None) -> str:
    """Upstream's sanitiser: last component, ``[A-Za-z0-9._-]`` only, ≤ 120 chars, never empty/./..."""
    name = (hint or "").rsplit("/", 1)[-1]
    name = _KEEP.sub("_", name)[:_MAX_NAME]
    return "file" if name in ("", ".", "..") else name


def stored_path(handle_id: str, hint: str | None) -> str:
    """Workdir-relative destination of a fetch."""
    return f"{PEER_IN}/{handle_id}-{clean_name(hint)}"


def hint_from_token(token: str) -> str | None:
    """``p`` from a handle's payload, read without any verification (a naming hint only)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    seg = parts[1]
    try:
        raw = base64.urlsafe_b64decode(seg + "=" * (-len(seg) % 4))
        obj = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        return None
    p = obj.get("p") if isinstance(obj, dict) else None
    return p if isinstance(p, str) else None


class PeerInWriter:
    """One atomic write into ``<workdir>/peer-in/``. Blocking: drive it through the executor.

    ``open()`` → ``write()``… → ``commit(name)``; ``abort()`` on any failure removes the temp.
    """

    def __init__(self, workdir: str, uid: int | None = None) -> None:
        self.workdir = workdir
        self.uid = uid if uid != 0 else None
        self._dir: int | None = None
        self._fd: int | None = None
        self._tmp: str | None = None

    def open(self) -> None:
        wd = os.open(self.workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self._may_write(wd)
            try:
                os.mkdir(PEER_IN, 0o700, dir_fd=wd)
                created = True
            except FileExistsError:
                created = False
            self._dir = os.open(PEER_IN, _DIR_FLAGS, dir_fd=wd)
            if created and self.uid is not None:
                os.fchown(self._dir, self.uid, -1)
            self._may_write(self._dir)
        finally:
            os.close(wd)
        self._tmp = f".{secrets.token_hex(8)}.part"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        self._fd = os.open(self._tmp, flags, 0o600, dir_fd=self._dir)
        if self.uid is not None:
            os.fchown(self._fd, self.uid, -1)

    def _may_write(self, fd: int) -> None:
        """Refuse (EACCES) a directory the session's own uid could not write into (judged on ``fd``)."""
        if self.uid is None:
            return
        if not may_access(os.fstat(fd), self.uid, groups_of(self.uid), W_OK | X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    def write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def commit(self, name: str) -> None:
        """fsync the temp, rename it over ``name`` (never through a link), fsync the directory.

        ``name`` must be one clean component (what :func:`clean_name` yields behind a handle id):
        a writer on a node keeper takes it from a remote call and must not be steered elsewhere.
        """
        assert self._fd is not None and self._dir is not None and self._tmp is not None
        if _KEEP.search(name) or name in ("", ".", "..") or len(name) > 2 * _MAX_NAME:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = None
        os.rename(self._tmp, name, src_dir_fd=self._dir, dst_dir_fd=self._dir)
        self._tmp = None
        os.fsync(self._dir)
        os.close(self._dir)
        self._dir = None

    def abort(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if self._tmp is not None and self._dir is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._tmp, dir_fd=self._dir)
        self._tmp = None
        if self._dir is not None:
            with contextlib.suppress(OSError):
                os.close(self._dir)
            self._dir = None
