"""Landlock through its three system calls (ctypes), for the ``scoped`` and ``sealed`` classes.

Why hand-written: the syscalls are three, their ABI is a few packed structs, and the PyPI
bindings either lag the kernel's ABI (network rules, ABI 4; signal and abstract-socket scoping,
ABI 6) or pull in a compiler toolchain. A ruleset is built in the host (opening each granted path
once), and only :func:`restrict_self` runs in the forked child, between fork and exec.

Landlock is an allow list: an access right the ruleset *handles* is denied everywhere except
beneath a path (or on a port) a rule grants it. It restricts root too. Rights the running
kernel's ABI does not know are simply not handled (and reported as advisory by the caller).
The numbers are the kernel's uapi (``include/uapi/linux/landlock.h``); the syscall numbers are
the same on every architecture.
"""

from __future__ import annotations

import ctypes
import os
from typing import Final

__all__ = [
    "FS_EXECUTE",
    "FS_READ",
    "FS_READ_DIR",
    "FS_WRITE",
    "NET_BIND_TCP",
    "NET_CONNECT_TCP",
    "LandlockError",
    "Ruleset",
    "abi_version",
    "fs_rights",
    "restrict_self",
]

SYS_CREATE_RULESET: Final = 444
SYS_ADD_RULE: Final = 445
SYS_RESTRICT_SELF: Final = 446
CREATE_RULESET_VERSION: Final = 1
RULE_PATH_BENEATH: Final = 1
RULE_NET_PORT: Final = 2
PR_SET_NO_NEW_PRIVS: Final = 38

FS_EXECUTE: Final = 1 << 0
FS_WRITE_FILE: Final = 1 << 1
FS_READ_FILE: Final = 1 << 2
FS_READ_DIR: Final = 1 << 3
FS_REMOVE_DIR: Final = 1 << 4
FS_REMOVE_FILE: Final = 1 << 5
FS_MAKE_CHAR: Final = 1 << 6
FS_MAKE_DIR: Final = 1 << 7
FS_MAKE_REG: Final = 1 << 8
FS_MAKE_SOCK: Final = 1 << 9
FS_MAKE_FIFO: Final = 1 << 10
FS_MAKE_BLOCK: Final = 1 << 11
FS_MAKE_SYM: Final = 1 << 12
FS_REFER: Final = 1 << 13  # ABI 2
FS_TRUNCATE: Final = 1 << 14  # ABI 3
FS_IOCTL_DEV: Final = 1 << 15  # ABI 5

NET_BIND_TCP: Final = 1 << 0  # ABI 4
NET_CONNECT_TCP: Final = 1 << 1  # ABI 4

SCOPE_ABSTRACT_UNIX_SOCKET: Final = 1 << 0  # ABI 6
SCOPE_SIGNAL: Final = 1 << 1  # ABI 6

FS_READ: Final = FS_READ_FILE | FS_READ_DIR
_FS_WRITE_ABI1: Final = (
    FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SOCK
    | FS_MAKE_FIFO
    | FS_MAKE_SYM
)
FS_WRITE: Final = _FS_WRITE_ABI1 | FS_REFER | FS_TRUNCATE


def fs_rights(abi: int) -> int:
    """Every filesystem right the given ABI knows (the set a ruleset handles)."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


class LandlockError(OSError):
    """A Landlock call failed; ``errno`` says why."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _NetPort(ctypes.Structure):
    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_prctl = _libc.prctl
_prctl.restype = ctypes.c_int
_prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)


def _fail(what: str) -> LandlockError:
    err = ctypes.get_errno()
    return LandlockError(err, f"{what}: {os.strerror(err)}")


def abi_version() -> int:
    """The kernel's Landlock ABI (0 when absent), or raises with the errno that says why."""
    n = _syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    if n < 0:
        raise _fail("landlock_create_ruleset(LANDLOCK_CREATE_RULESET_VERSION)")
    return int(n)


class Ruleset:
    """A ruleset under construction; ``fd`` is handed to :func:`restrict_self` in the child."""

    def __init__(self, abi: int, *, handle_net: bool, scope: bool) -> None:
        self.abi = abi
        self.handled_fs = fs_rights(abi)
        self.handled_net = (NET_BIND_TCP | NET_CONNECT_TCP) if handle_net and abi >= 4 else 0
        scoped = (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if scope and abi >= 6 else 0
        attr = _RulesetAttr(self.handled_fs, self.handled_net, scoped)
        size = 24 if abi >= 6 else 16 if abi >= 4 else 8
        fd = _syscall(ctypes.c_long(SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
        if fd < 0:
            raise _fail("landlock_create_ruleset")
        self.fd = int(fd)
        os.set_inheritable(self.fd, False)

    def _add(self, rule_type: int, rule: object) -> int:
        args = (ctypes.c_int(self.fd), ctypes.c_int(rule_type), rule, ctypes.c_uint32(0))
        return int(_syscall(ctypes.c_long(SYS_ADD_RULE), *args))

    def allow_path(self, path: str, access: int) -> None:
        """Grant ``access`` beneath ``path`` (a directory) or on it (a file: file rights only)."""
        flags = os.O_PATH | os.O_CLOEXEC
        pfd = os.open(path, flags)
        try:
            if not os.path.isdir(path):
                access &= FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
            self._add_rule(RULE_PATH_BENEATH, _PathBeneath(access & self.handled_fs, pfd), path)
        finally:
            os.close(pfd)

    def allow_port(self, port: int, access: int = NET_CONNECT_TCP) -> None:
        if not self.handled_net:
            return
        self._add_rule(RULE_NET_PORT, _NetPort(access & self.handled_net, port), f"port {port}")

    def _add_rule(self, kind: int, rule: ctypes.Structure, what: str) -> None:
        rc = _syscall(
            ctypes.c_long(SYS_ADD_RULE),
            ctypes.c_int(self.fd),
            ctypes.c_int(kind),
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        )
        if rc < 0:
            raise _fail(f"landlock_add_rule({what})")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def restrict_self(fd: int) -> None:
    """``no_new_privs`` then enforce the ruleset on this thread (the forked child, before exec)."""
    if _prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")
    if _syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(fd), ctypes.c_uint32(0)) < 0:
        raise _fail("landlock_restrict_self")
