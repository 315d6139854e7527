"""Inside a ``sealed`` sandbox: finish the Landlock ruleset, restrict ourselves, exec the entrypoint.

Why a separate script: Landlock forbids mounting, so it cannot be applied to ``bwrap`` before it
builds the sandbox. ``bwrap`` execs this file (``python -I -S sealexec.py FD -- ARGV...``) with
the ruleset the host built still open as ``FD``; here the sandbox's own ``/proc`` and ``/dev``
(mounted by ``bwrap``, so unknown to the host) are added, the ruleset is enforced and the
entrypoint replaces us. Stdlib only, imported by nobody: it runs before any site-packages.
"""

import ctypes
import os
import sys

SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
READ = (1 << 2) | (1 << 3)
WRITE_FILE = 1 << 1
EXTRA = {"/proc": READ, "/dev": READ | WRITE_FILE}
_CAP_V3 = 0x20080522


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("sealexec: usage: sealexec.py FD -- ARGV...\n")
        return 126
    fd = int(argv[1])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    for path, access in EXTRA.items():
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        rule = _PathBeneath(access, pfd)
        if libc.syscall(SYS_ADD_RULE, fd, RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
            err = ctypes.get_errno()
            sys.stderr.write(f"sealexec: landlock_add_rule({path}): {os.strerror(err)}\n")
            return 126
        os.close(pfd)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(SYS_RESTRICT_SELF, fd, 0) < 0:
        err = ctypes.get_errno()
        sys.stderr.write(f"sealexec: landlock_restrict_self: {os.strerror(err)}\n")
        return 126
    os.close(fd)
    # Whatever capability reached us (a uid-0 job keeps CAP_SETFCAP for bwrap's uid map) goes
    # now: the entrypoint holds none, and the locked securebits keep it from regaining any.
    header = (ctypes.c_uint32 * 2)(_CAP_V3, 0)
    data = (ctypes.c_uint32 * 6)()
    if libc.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
        err = ctypes.get_errno()
        sys.stderr.write(f"sealexec: capset: {os.strerror(err)}\n")
        return 126
    target = argv[3:]
    try:
        os.execv(target[0], target)
    except OSError as exc:
        sys.stderr.write(f"sealexec: cannot exec {target[0]}: {exc.strerror}\n")
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
