"""The seccomp filter of contained entrypoints (``scoped`` and ``sealed``), built with libseccomp.

Why: Landlock governs paths, ports and (ABI 6) signals; it does not govern a process's reach to
the scheduler, nor code that never touches a path. So a contained entrypoint may not:

* change the priority, scheduling policy or CPU affinity of any process but itself
  (``setpriority``/``sched_set*`` with a target other than 0, the caller) — a uid-0 capsule could
  otherwise renice or re-pin root's processes outside its sandbox;
* ``memfd_create`` (code written to an anonymous file and run from it), nor
  ``execveat(…, AT_EMPTY_PATH)`` (``fexecve`` of a descriptor): both run a program no
  ``shell.allow`` entry named. They fail with EPERM (libffi and others fall back cleanly).

The filter is built in the capsule host with libseccomp (the shared library, through ctypes: six
calls; no compiler and no extra Python package) and exported as classic BPF. Under ``scoped`` the
forked child installs it with one ``prctl`` after Landlock (which set ``no_new_privs``); under
``sealed`` bubblewrap installs it (``--add-seccomp-fd``) just before it execs the sandbox's
first program. A host without libseccomp runs without the filter and says so in
``effective_grants.advisory``. docs/security.md, "Containment".
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Final

__all__ = ["Filter", "SeccompUnavailable", "build_filter"]

_ALLOW: Final = 0x7FFF0000
_ERRNO_EPERM: Final = 0x00050000 | 1
_CMP_NE: Final = 1
_CMP_MASKED_EQ: Final = 7
_AT_EMPTY_PATH: Final = 0x1000
PR_SET_SECCOMP: Final = 22
SECCOMP_MODE_FILTER: Final = 2

# Calls whose first argument names the target process (0: the caller itself).
_TARGETED: Final = ("sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr")


class SeccompUnavailable(OSError):
    """libseccomp is missing or refused to build the filter; the message says which."""


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def _lib() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise SeccompUnavailable(f"libseccomp is not installed ({exc})") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    )
    lib.seccomp_export_bpf.restype = ctypes.c_int
    lib.seccomp_export_bpf.argtypes = (ctypes.c_void_p, ctypes.c_int)
    return lib


class Filter:
    """An exported BPF program: handed to bubblewrap as a descriptor, or installed by a child."""

    def __init__(self, bpf: bytes) -> None:
        if not bpf or len(bpf) % 8:
            raise SeccompUnavailable("libseccomp exported no BPF program")
        self.bpf = bpf
        self._buf = ctypes.create_string_buffer(bpf, len(bpf))
        self._prog = _SockFprog(len(bpf) // 8, ctypes.cast(self._buf, ctypes.c_void_p))
        self._prctl = ctypes.CDLL(None, use_errno=True).prctl

    def install(self) -> None:
        """Install on the calling thread (the forked child, after ``no_new_privs``): only a
        ``prctl``, nothing that allocates."""
        if self._prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self._prog), 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl(PR_SET_SECCOMP): {os.strerror(err)}")

    def pipe_fd(self) -> int:
        """A readable descriptor holding the program (for ``bwrap --add-seccomp-fd``); inheritable."""
        read, write = os.pipe()
        try:
            os.write(write, self.bpf)
        finally:
            os.close(write)
        os.set_inheritable(read, True)
        return read


def build_filter() -> Filter:
    """The contained entrypoints' filter (blocking: a library load and a temp file)."""
    lib = _lib()
    ctx = lib.seccomp_init(_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:

        def rule(name: str, *cmps: _ArgCmp) -> None:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                return  # not on this architecture
            arr = (_ArgCmp * len(cmps))(*cmps) if cmps else None
            rc = lib.seccomp_rule_add_array(ctx, _ERRNO_EPERM, nr, len(cmps), arr)
            if rc < 0:
                raise SeccompUnavailable(f"seccomp_rule_add({name}): {os.strerror(-rc)}")

        rule("setpriority", _ArgCmp(1, _CMP_NE, 0, 0))
        for name in _TARGETED:
            rule(name, _ArgCmp(0, _CMP_NE, 0, 0))
        rule("memfd_create")
        rule("execveat", _ArgCmp(4, _CMP_MASKED_EQ, _AT_EMPTY_PATH, _AT_EMPTY_PATH))
        fd = os.memfd_create("roost-seccomp", os.MFD_CLOEXEC)
        try:
            rc = lib.seccomp_export_bpf(ctx, fd)
            if rc < 0:
                raise SeccompUnavailable(f"seccomp_export_bpf: {os.strerror(-rc)}")
            size = os.lseek(fd, 0, os.SEEK_END)
            return Filter(os.pread(fd, size, 0))
        finally:
            os.close(fd)
    finally:
        lib.seccomp_release(ctx)
