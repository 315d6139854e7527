"""The capsule host as its entrypoints' subreaper: nothing an entrypoint starts outlives the host.

Why it looks like this (docs/security.md, "No process outlives its job"): an entrypoint is
untrusted code. It can double-fork, call ``setsid`` to leave its process group and ignore
SIGTERM. Signalling the group is therefore not enough. The host marks itself a *child
subreaper* (``PR_SET_CHILD_SUBREAPER``), so every orphan in its subtree is re-parented to the
host instead of init; the host's descendants are then exactly the processes its entrypoints
started, and stopping means: SIGTERM every descendant, wait a grace period shorter than the
launcher's, SIGKILL whatever is left (repeatedly, so a descendant forking during the kill is
caught), and reap the orphans the kernel handed to us.

The host starts no other child processes, so "every descendant" never includes anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Iterable

import psutil

__all__ = ["KILL_GRACE_SECS", "become_subreaper", "descendants", "is_subreaper", "kill_tree", "reap_orphans"]

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
# Shorter than the launcher's default stop grace (5 s): the host must finish off its tree and
# still write session_end before the launcher's SIGKILL reaches the host itself.
KILL_GRACE_SECS = 2.0
_KILL_ROUNDS = 50

_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.restype = ctypes.c_int
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def become_subreaper() -> bool:
    """Mark this process a child subreaper; False (and nothing changes) where the kernel refuses."""
    return bool(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def is_subreaper() -> bool:
    flag = ctypes.c_int(0)
    if _libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.addressof(flag), 0, 0, 0) != 0:
        return False
    return flag.value != 0


def descendants() -> list[psutil.Process]:
    """Every live process below this one (orphans included: we are their subreaper)."""
    try:
        return psutil.Process(os.getpid()).children(recursive=True)
    except psutil.Error:
        return []


def _signal_all(procs: Iterable[psutil.Process], sig: signal.Signals) -> int:
    sent = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error, OSError):
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            proc.send_signal(sig)
            sent += 1
    return sent


def reap_orphans(keep: Iterable[int] = ()) -> int:
    """``waitpid`` every zombie child except ``keep`` (pids another waiter owns); returns how many."""
    owned = set(keep)
    reaped = 0
    try:
        children = psutil.Process(os.getpid()).children()
    except psutil.Error:
        return 0
    for child in children:
        if child.pid in owned:
            continue
        with contextlib.suppress(psutil.Error, ChildProcessError, OSError):
            if child.status() == psutil.STATUS_ZOMBIE:
                pid, _ = os.waitpid(child.pid, os.WNOHANG)
                reaped += pid != 0
    return reaped


def _alive(procs: Iterable[psutil.Process]) -> list[psutil.Process]:
    out = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
    return out


async def kill_tree(leader: int | None = None, *, grace: float = KILL_GRACE_SECS, keep: Iterable[int] = ()) -> int:
    """SIGTERM the entrypoint's group and every descendant, SIGKILL the rest after ``grace``.

    ``leader`` is the entrypoint's pid (its process group id too); ``keep`` are pids whose exit
    status another waiter collects (they are signalled but never reaped here). Returns the number
    of processes that needed SIGKILL.
    """
    if leader is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, signal.SIGTERM)
    _signal_all(descendants(), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        reap_orphans(keep)
        if not _alive(descendants()):
            break
        await asyncio.sleep(0.05)
    killed = 0
    for _ in range(_KILL_ROUNDS):
        if leader is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(leader, signal.SIGKILL)
        left = _alive(descendants())
        if not left:
            break
        killed += _signal_all(left, signal.SIGKILL)
        await asyncio.sleep(0.02)
        reap_orphans(keep)
    reap_orphans(keep)
    return killed
