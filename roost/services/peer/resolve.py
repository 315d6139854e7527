"""The descriptor walk that turns validated components into an open file, following no link.

Why a descriptor walk rather than ``realpath`` + prefix check: a check on a path string and a
later ``open`` of the same string are two lookups, and a link swapped in between them (a TOCTOU
race) would be followed. Here every directory from the session's workdir down is opened
relative to its parent's descriptor with ``O_NOFOLLOW | O_DIRECTORY`` (``O_PATH``, so only
search permission is needed), the last component is examined with ``fstatat(...,
AT_SYMLINK_NOFOLLOW)`` and opened ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO cannot block the
thread), and the type and size are read from the *descriptor*. Nothing outside the root can be
reached: no ``..`` component exists (pure rules) and no link is ever traversed.

Links follow upstream's rule keyed by the session's achieved containment class (told at
register): under ``scoped`` — and for a session that did not say — any symlink on the path,
the export root's own components included, is ``symlink_refused``. Under ``advisory`` and
``sealed`` a link below the root is resolved: a target inside the root is served (the walk
is then repeated over the resolved, link-free components, so a link swapped in meanwhile is
still refused), one outside it is ``outside_root``. The workdir itself is the path the session
registered and is opened normally.

errno mapping (as upstream): ``ENOENT``/``ENOTDIR``/``ENAMETOOLONG`` → ``not_found`` (a
name that long cannot exist), ``ELOOP`` → ``symlink_refused``, anything else → ``io_error``
with the errno's text, never a path. Blocking: call through the daemon's executor.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import Final

from roost.services.peer.errors import (
    IoError,
    NotARegularFile,
    NotFound,
    OutsideRoot,
    PeerError,
    SymlinkRefused,
    TooLarge,
)
from roost.system.fsutil import LinkRefused, open_no_links
from roost.system.workdirs import R_OK, X_OK, groups_of, may_access

Reader = tuple[int, frozenset[int]]
"""A uid and its groups: the session's own uid, on whose behalf a file is read."""

__all__ = [
    "OpenedFile",
    "Reader",
    "follows_links",
    "map_oserror",
    "mint_target",
    "open_export",
    "reader_for",
    "root_components",
    "stat_export",
]

_DIR_FLAGS: Final = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_NOT_FOUND: Final = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG})


@dataclass(frozen=True, slots=True)
class OpenedFile:
    """An open regular file under the export root, with the identity read from its descriptor."""

    fd: int
    size: int
    mtime_ns: int
    ctime_ns: int
    dev: int
    ino: int

    @property
    def identity(self) -> tuple[int, int, int, int, int]:
        """(dev, ino, size, mtime_ns, ctime_ns): unchanged ⇒ same bytes (ctime cannot be set back)."""
        return (self.dev, self.ino, self.size, self.mtime_ns, self.ctime_ns)

    @property
    def mtime_ms(self) -> int:
        return self.mtime_ns // 1_000_000


def map_oserror(exc: OSError) -> PeerError:
    """errno → peer-plane refusal; the text names the errno only, never a path."""
    if exc.errno in _NOT_FOUND:
        return NotFound()
    if exc.errno == errno.ELOOP:
        return SymlinkRefused()
    reason = os.strerror(exc.errno) if exc.errno else type(exc).__name__
    return IoError(reason[:1].lower() + reason[1:])


def root_components(root: str) -> tuple[str, ...]:
    """``exports.peer_files.root`` as components (the manifest model already refused ``..``/absolute)."""
    return tuple(c for c in root.split("/") if c not in ("", "."))


def _classify_non_dir(parent: int, name: str) -> PeerError:
    """A component that did not open as a directory: a link (refused) or something else (missing)."""
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError as exc:
        return map_oserror(exc)
    return SymlinkRefused() if stat.S_ISLNK(st.st_mode) else NotFound()


def reader_for(uid: int | None) -> Reader | None:
    """Blocking (a passwd lookup): the reader for a session's uid; None when no check is needed."""
    if uid is None or uid == 0:
        return None
    return (uid, groups_of(uid))


def _denied() -> PeerError:
    # What the session's own uid would get opening it: EACCES.
    return IoError("permission denied")


def _check(fd: int, reader: Reader | None, want: int) -> None:
    """Refuse unless the session's uid could ``want`` the object behind ``fd`` (checked on the descriptor)."""
    if reader is None:
        return
    try:
        st = os.fstat(fd)
    except OSError as exc:
        raise map_oserror(exc) from None
    if not may_access(st, reader[0], reader[1], want):
        raise _denied()


WORKDIR_REPLACED: Final = (
    "the session's workdir was replaced after it registered (it is not the directory roost checked), "
    "so nothing is served from it"
)


def _walk(
    workdir: str, dirs: tuple[str, ...], reader: Reader | None = None, identity: tuple[int, int] | None = None
) -> int:
    """Open ``workdir`` and descend through ``dirs`` without following links; return the last fd.

    The workdir itself is reached from ``/`` without following any link and, with ``identity``
    (recorded at registration), must still be that directory. With a ``reader``, every directory
    on the way must be searchable by that uid.
    """
    try:
        fd = open_no_links(workdir)
    except LinkRefused:
        raise IoError(WORKDIR_REPLACED) from None
    except OSError as exc:
        raise map_oserror(exc) from None
    try:
        if identity is not None:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != identity:
                raise IoError(WORKDIR_REPLACED)
        _check(fd, reader, X_OK)
    except PeerError:
        os.close(fd)
        raise
    for name in dirs:
        try:
            nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            err = _classify_non_dir(fd, name) if exc.errno in (errno.ENOTDIR, errno.ELOOP) else map_oserror(exc)
            os.close(fd)
            raise err from None
        os.close(fd)
        fd = nfd
        try:
            _check(fd, reader, X_OK)
        except PeerError:
            os.close(fd)
            raise
    return fd


def _lstat_final(parent: int, name: str) -> os.stat_result:
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError as exc:
        raise map_oserror(exc) from None
    if stat.S_ISLNK(st.st_mode):
        raise SymlinkRefused()
    if not stat.S_ISREG(st.st_mode):
        raise NotARegularFile()
    return st


def follows_links(containment: str | None) -> bool:
    """Whether links below the export root are resolved for a session of this class."""
    return containment in ("advisory", "sealed")


def _resolved(workdir: str, root: tuple[str, ...], components: tuple[str, ...]) -> tuple[str, ...]:
    """The link-free components a linked path resolves to, if it stays inside the root."""
    canon_root = os.path.join(os.path.realpath(workdir), *root)
    if os.path.realpath(canon_root) != canon_root:
        raise SymlinkRefused()  # the export root itself is reached through a link
    target = os.path.realpath(os.path.join(canon_root, *components))
    if not target.startswith(canon_root + os.sep):
        raise OutsideRoot()
    return tuple(os.path.relpath(target, canon_root).split(os.sep))


def mint_target(
    workdir: str,
    root: tuple[str, ...],
    components: tuple[str, ...],
    uid: int | None = None,
    *,
    follow: bool = False,
    identity: tuple[int, int] | None = None,
) -> tuple[str, ...]:
    """Mint-time check; returns the components the handle names (a followed link's target)."""
    try:
        stat_export(workdir, root, components, uid, identity=identity)
        return components
    except SymlinkRefused:
        if not follow:
            raise
    resolved = _resolved(workdir, root, components)
    stat_export(workdir, root, resolved, uid, identity=identity)
    return resolved


def stat_export(
    workdir: str,
    root: tuple[str, ...],
    components: tuple[str, ...],
    uid: int | None = None,
    *,
    identity: tuple[int, int] | None = None,
) -> os.stat_result:
    """Mint-time check: the target exists under the root, reached without links, is a regular
    file, and (with ``uid``) that uid could read it."""
    reader = reader_for(uid)
    parent = _walk(workdir, root + components[:-1], reader, identity)
    try:
        st = _lstat_final(parent, components[-1])
    finally:
        os.close(parent)
    if reader is not None and not may_access(st, reader[0], reader[1], R_OK):
        raise _denied()
    return st


def open_export(
    workdir: str,
    root: tuple[str, ...],
    components: tuple[str, ...],
    max_bytes: int,
    uid: int | None = None,
    *,
    follow: bool = False,
    identity: tuple[int, int] | None = None,
) -> OpenedFile:
    """Redeem-time open: walk, refuse links (or, with ``follow``, resolve them inside the root)
    and non-regular files, check size on the descriptor.

    With ``uid`` (the minting session's), every directory must be searchable and the opened
    file readable by that uid, judged from the descriptors: a hard link to another user's file,
    a file planted by root or a bind mount of ``/proc`` gives that uid nothing it could not
    read itself. The caller owns the returned descriptor and must close it.
    """
    try:
        return _open_export(workdir, root, components, max_bytes, uid, identity)
    except SymlinkRefused:
        if not follow:
            raise
    return _open_export(workdir, root, _resolved(workdir, root, components), max_bytes, uid, identity)


def _open_export(
    workdir: str,
    root: tuple[str, ...],
    components: tuple[str, ...],
    max_bytes: int,
    uid: int | None,
    identity: tuple[int, int] | None,
) -> OpenedFile:
    reader = reader_for(uid)
    parent = _walk(workdir, root + components[:-1], reader, identity)
    try:
        # Refuse FIFOs, devices and sockets without opening them (opening a device can have
        # side effects); the descriptor is re-checked below in case the name was swapped.
        _lstat_final(parent, components[-1])
        try:
            fd = os.open(components[-1], _FILE_FLAGS, dir_fd=parent)
        except OSError as exc:
            raise map_oserror(exc) from None
    finally:
        os.close(parent)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFile()
        if reader is not None and not may_access(st, reader[0], reader[1], R_OK):
            raise _denied()
        if st.st_size > max_bytes:
            raise TooLarge(max_bytes)
    except BaseException:
        os.close(fd)
        raise
    return OpenedFile(fd, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_dev, st.st_ino)
