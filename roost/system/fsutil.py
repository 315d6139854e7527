"""Atomic, durable file writes: the one implementation every record writer uses.

A reader sees the old bytes or the new, never a mixture: the data goes to a temp file beside the
target (created exclusively, never through a link), is fsynced, renamed over the target, and the
directory is fsynced so the rename itself survives a crash. An ``exclusive`` write links the temp
file into place instead of renaming it: like ``O_EXCL`` it never replaces an existing path, so a
file that must be created once (the master key) is either whole or absent.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "LinkRefused",
    "Owner",
    "Place",
    "dir_identity",
    "fsync_dir",
    "open_append_at",
    "open_beneath",
    "open_no_links",
    "owner_for",
    "write_atomic",
    "write_atomic_at",
    "write_atomic_beneath",
]


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fill_and_close(fd: int, data: bytes, *, mode: int, durable: bool, owner: tuple[int, int] | None) -> None:
    """Give a fresh temp file its mode (the umask may have narrowed it) and owner, write all of
    ``data``, fsync it when ``durable``, and close it whatever happens."""
    try:
        os.fchmod(fd, mode)
        if owner is not None:
            os.fchown(fd, owner[0], owner[1])
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
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
        _fill_and_close(fd, data, mode=mode, durable=durable, owner=None)
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


# -- writes beneath a directory descriptor (docs/security.md: "the daemon's own writes") --------

Owner = tuple[int, int]
"""(uid, gid) that files and directories the daemon creates for a session are given."""

_DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NO_LINK_DIR = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class LinkRefused(OSError):
    """A path component below the base is a symbolic link (or not a directory): nothing is written."""

    def __init__(self, where: str) -> None:
        super().__init__(errno.ELOOP, f"{where} is a symbolic link or not a directory; roost writes nothing through it")


@functools.lru_cache(maxsize=1024)
def owner_for(uid: int | None) -> Owner | None:
    """Blocking (a passwd lookup): the owner to give new files of ``uid`` — None when the daemon
    itself is that uid, or is not root (it cannot give files away then)."""
    if uid is None or os.geteuid() != 0 or uid == os.geteuid():
        return None
    import pwd

    try:
        return uid, pwd.getpwuid(uid).pw_gid
    except KeyError:
        return uid, uid


def open_no_links(path: str | os.PathLike[str], flags: int = os.O_PATH) -> int:
    """A descriptor on the directory ``path`` (absolute) reached from ``/`` one component at a
    time with ``O_NOFOLLOW``: a link anywhere on the path is :class:`LinkRefused`, so a parent
    swapped for a link after a check cannot redirect what is opened. The caller closes it."""
    where = os.fspath(path)
    parts = [p for p in where.split("/") if p and p != "."]
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            try:
                nfd = os.open(name, (flags if last else os.O_PATH) | _NO_LINK_DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise LinkRefused("/" + "/".join(parts[: i + 1])) from None
                raise
            os.close(fd)
            fd = nfd
        if not parts and flags != os.O_PATH:
            nfd = os.open("/", flags | os.O_DIRECTORY | os.O_CLOEXEC)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def dir_identity(path: str | os.PathLike[str]) -> tuple[int, int]:
    """Blocking: ``(st_dev, st_ino)`` of the directory ``path``, reached without any link."""
    fd = open_no_links(path)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return st.st_dev, st.st_ino


def open_beneath(
    base: str | os.PathLike[str],
    rel: tuple[str, ...] | list[str],
    *,
    create: bool = False,
    mode: int = 0o700,
    owner: Owner | None = None,
) -> int:
    """A descriptor on ``base/rel…`` reached without following any link at or below ``base``.

    With ``create``, missing directories are made (``mode``, then given to ``owner``). A link
    or non-directory anywhere on the way is :class:`LinkRefused`. The caller closes the fd.
    """
    # The base itself is reached with no link anywhere on its path: a parent swapped for a link
    # after the workdir was checked cannot send the daemon's writes elsewhere.
    fd = open_no_links(base, os.O_RDONLY) if os.path.isabs(base) else _open_relative_base(base)
    where = os.fspath(base)
    for name in rel:
        where = os.path.join(where, name)
        if create:
            try:
                os.mkdir(name, mode, dir_fd=fd)
                made = True
            except FileExistsError:
                made = False
            except BaseException:
                os.close(fd)
                raise
        else:
            made = False
        try:
            nfd = os.open(name, _DIR_OPEN, dir_fd=fd)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise LinkRefused(where) from None
            raise
        os.close(fd)
        fd = nfd
        if made and owner is not None:
            os.fchown(fd, owner[0], owner[1])
    return fd


def _open_relative_base(base: str | os.PathLike[str]) -> int:
    try:
        return os.open(base, _DIR_OPEN)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise LinkRefused(os.fspath(base)) from None
        raise


def write_atomic_at(
    dir_fd: int, name: str, data: bytes, *, mode: int = 0o600, durable: bool = True, owner: Owner | None = None
) -> None:
    """:func:`write_atomic` relative to a directory descriptor (the temp never follows a link;
    the rename replaces a planted link instead of writing through it)."""
    tmp = f".{name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
    try:
        _fill_and_close(fd, data, mode=mode, durable=durable, owner=owner)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    if durable:
        os.fsync(dir_fd)


def open_append_at(dir_fd: int, name: str, *, mode: int = 0o600, owner: Owner | None = None) -> int:
    """An ``O_APPEND`` descriptor on ``name`` under ``dir_fd``, never through a link."""
    fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
    if owner is not None:
        try:
            st = os.fstat(fd)
            if st.st_uid != owner[0]:
                os.fchown(fd, owner[0], owner[1])
        except BaseException:
            os.close(fd)
            raise
    return fd


def write_atomic_beneath(
    base: str | os.PathLike[str],
    rel: str,
    data: bytes,
    *,
    mode: int = 0o600,
    durable: bool = True,
    owner: Owner | None = None,
    create: bool = False,
) -> None:
    """Write ``base/rel`` atomically, following no link at or below ``base``."""
    parts = [p for p in rel.split("/") if p]
    dfd = open_beneath(base, parts[:-1], create=create, owner=owner)
    try:
        write_atomic_at(dfd, parts[-1], data, mode=mode, durable=durable, owner=owner)
    finally:
        os.close(dfd)


@dataclass(frozen=True, slots=True)
class Place:
    """A directory the daemon writes into for a session: ``base/rel…``, reached without links.

    ``base`` is a directory that was checked (a session's registered workdir, or the daemon's
    own state dir); ``rel`` the components below it, each opened with ``O_NOFOLLOW``; ``uid``
    the session's uid, whom new files and directories are given to when the daemon is root.
    """

    base: str
    rel: tuple[str, ...] = ()
    uid: int | None = None

    @property
    def path(self) -> Path:
        return Path(self.base, *self.rel)

    def owner(self) -> Owner | None:
        """Blocking (passwd lookup)."""
        return owner_for(self.uid)

    def open_dir(self, sub: tuple[str, ...] = (), *, create: bool = False) -> int:
        """Blocking: a descriptor on this directory (or ``sub`` below it), following no link."""
        return open_beneath(self.base, self.rel + sub, create=create, owner=self.owner())

    def write(self, name: str, data: bytes, *, mode: int = 0o600, durable: bool = True) -> None:
        """Blocking: replace ``name`` (``a/b`` allowed; directories made) atomically, no link followed."""
        parts = tuple(p for p in name.split("/") if p)
        dfd = self.open_dir(parts[:-1], create=True)
        try:
            write_atomic_at(dfd, parts[-1], data, mode=mode, durable=durable, owner=self.owner())
        finally:
            os.close(dfd)

    def read(self, name: str, max_bytes: int = 1 << 20) -> bytes:
        """Blocking: up to ``max_bytes`` of ``name``, opened without following any link."""
        parts = tuple(p for p in name.split("/") if p)
        dfd = self.open_dir(parts[:-1])
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
        finally:
            os.close(dfd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, f"{name} is not a regular file")
            chunks: list[bytes] = []
            left = max_bytes
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 16))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)
