"""Inside a ``sealed`` sandbox: make the writable scope ``noexec``, finish the Landlock ruleset,
drop every capability for good, exec the entrypoint.

Why a separate script: Landlock forbids mounting, so it cannot be applied to ``bwrap`` before it
builds the sandbox, and bubblewrap has no ``noexec`` bind. ``bwrap`` runs this file as uid 0 of
the sandbox's user namespace (mapped to the job's own uid outside it) with ``CAP_SYS_ADMIN`` and
``CAP_SETPCAP`` there only (``python -I -S sealexec.py FD SCOPE… -- ARGV…``, the ruleset the host
built still open as ``FD``). Here, in order:

1. each writable ``SCOPE`` is marked ``noexec`` (``mount_setattr``; the mount namespace belongs to
   the sandbox's user namespace): the dynamic loader cannot map a program written there
   (``ld.so ./copied-binary``), nor can it be executed;
2. the securebits are locked (``noroot``: an exec by uid 0 regains nothing) and the bounding set
   is emptied;
3. the sandbox's own ``/proc`` and ``/dev`` are added to the ruleset and it is enforced;
4. every capability is dropped, and the entrypoint replaces us: it runs as the sandbox's uid 0,
   which is the job's uid outside and holds no capability anywhere.

Stdlib only, imported by nobody: it runs before any site-packages.
"""

import ctypes
import os
import sys

SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
SYS_MOUNT_SETATTR = 442
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
# noroot, noroot_locked, no_setuid_fixup, no_setuid_fixup_locked, keep_caps_locked
SECUREBITS = 0x1 | 0x2 | 0x4 | 0x8 | 0x20
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MOUNT_ATTR_NOEXEC = 0x8
AT_FDCWD = -100
READ = (1 << 2) | (1 << 3)
WRITE_FILE = 1 << 1
EXTRA = {"/proc": READ, "/dev": READ | WRITE_FILE}
_CAP_V3 = 0x20080522
_LAST_CAP = 63


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


class _Fail(Exception):
    pass


def _check(rc: int, what: str) -> None:
    if rc < 0 or rc is None:
        err = ctypes.get_errno()
        raise _Fail(f"{what}: {os.strerror(err)}")


def _noexec(libc: ctypes.CDLL, scopes: list[str]) -> None:
    attr = _MountAttr(MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, 0)
    for scope in scopes:
        rc = libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, scope.encode(), 0, ctypes.byref(attr), ctypes.sizeof(attr))
        _check(rc, f"mount_setattr({scope}, noexec)")


def _lock(libc: ctypes.CDLL) -> None:
    _check(libc.prctl(PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0), "prctl(PR_SET_SECUREBITS)")
    for cap in range(_LAST_CAP + 1):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such cap
            _check(-1, f"prctl(PR_CAPBSET_DROP, {cap})")


def _restrict(libc: ctypes.CDLL, fd: int) -> None:
    for path, access in EXTRA.items():
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        rule = _PathBeneath(access, pfd)
        _check(libc.syscall(SYS_ADD_RULE, fd, RULE_PATH_BENEATH, ctypes.byref(rule), 0), f"landlock_add_rule({path})")
        os.close(pfd)
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    _check(libc.syscall(SYS_RESTRICT_SELF, fd, 0), "landlock_restrict_self")
    os.close(fd)


def _drop_all(libc: ctypes.CDLL) -> None:
    header = (ctypes.c_uint32 * 2)(_CAP_V3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


def main(argv: list[str]) -> int:
    try:
        sep = argv.index("--")
    except ValueError:
        sep = -1
    if sep < 2 or sep == len(argv) - 1:
        sys.stderr.write("sealexec: usage: sealexec.py FD [SCOPE...] -- ARGV...\n")
        return 126
    fd = int(argv[1])
    scopes, target = argv[2:sep], argv[sep + 1 :]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    try:
        _noexec(libc, scopes)
        _lock(libc)
        _restrict(libc, fd)
        _drop_all(libc)
    except (_Fail, OSError) as exc:
        sys.stderr.write(f"sealexec: {exc}\n")
        return 126
    try:
        os.execv(target[0], target)
    except OSError as exc:
        sys.stderr.write(f"sealexec: cannot exec {target[0]}: {exc.strerror}\n")
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
