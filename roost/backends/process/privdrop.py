"""The privilege-dropping exec step every child starts through: util-linux ``setpriv``.

Why a program and not a ``preexec_fn``: the daemon is threaded (its executor), and code between
fork and exec in a threaded process may deadlock on a lock another thread held (and costs the
vfork fast path). ``setpriv`` does, in order and before it execs the child's own argv: switch to
the session's uid, primary gid and supplementary groups (a root daemon only); clear the
capability bounding set, the inheritable and ambient sets; set ``no_new_privs``; and lock the
securebits (``noroot``, ``no_setuid_fixup``, ``keep_caps`` locked), so a uid-0 child holds no
capability and cannot regain one through a setuid or file-capability binary.

One exception, and why: a uid-0 child whose floor is ``sealed`` builds its sandbox with
``bwrap``, and since Linux 5.12 writing a user namespace's uid map that maps uid 0 needs
``CAP_SETFCAP``. Such a child keeps that one capability (bounding, inheritable and ambient), and
``sealexec.py`` drops it inside the sandbox before the entrypoint runs. ``run_as`` (a dedicated
unprivileged user) removes the exception. docs/security.md, "Which uid and privileges a job has".

A daemon without ``CAP_SETPCAP`` cannot clear a bounding set or lock securebits. One that is not
root holds no capability to hand down, so its children get ``no_new_privs`` and empty
inheritable/ambient sets, which is all they need; a root daemon without it (a unit whose
``CapabilityBoundingSet=`` lacks it) would leave a uid-0 child its bounding set's capabilities,
and says so when it starts. Pure, but :func:`find_setpriv`: the caller passes what it found.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

__all__ = ["LOCKED_SECUREBITS", "Privileges", "drop_argv", "find_setpriv", "holds_setpcap"]

LOCKED_SECUREBITS = "+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked,+keep_caps_locked"


@dataclass(frozen=True, slots=True)
class Privileges:
    """Who the child becomes: ``uid``/``gid``/``groups`` (None: stay the daemon's), and whether it
    keeps ``CAP_SETFCAP`` for ``bwrap`` (a uid-0 child under a ``sealed`` floor)."""

    uid: int | None = None
    gid: int | None = None
    groups: tuple[int, ...] = ()
    keep_setfcap: bool = False


def find_setpriv() -> str | None:
    """Blocking: the ``setpriv`` binary (util-linux), or None."""
    for cand in ("/usr/bin/setpriv", "/bin/setpriv"):
        if shutil.which(cand):
            return cand
    return shutil.which("setpriv")


def drop_argv(setpriv: str, argv: list[str], who: Privileges, *, setpcap: bool) -> list[str]:
    """``setpriv … -- argv``. ``who.uid`` set: switch to it (the daemon is root with
    CAP_SETUID/CAP_SETGID). ``setpcap``: the daemon holds CAP_SETPCAP, so the bounding set can be
    cleared and the securebits locked; without it only the inheritable and ambient sets are
    cleared (a uid-0 child then keeps what the daemon's bounding set allows: the caller warns)."""
    out = [setpriv]
    if who.uid is not None:
        out += [f"--reuid={who.uid}", f"--regid={who.gid if who.gid is not None else who.uid}"]
        out.append("--groups=" + ",".join(str(g) for g in who.groups) if who.groups else "--clear-groups")
    keep = ",+setfcap" if who.keep_setfcap and setpcap else ""
    if setpcap:
        out += [f"--bounding-set=-all{keep}", f"--securebits={LOCKED_SECUREBITS}"]
    out += [f"--inh-caps=-all{keep}", f"--ambient-caps=-all{keep}", "--no-new-privs", "--", *argv]
    return out


def holds_setpcap(proc_status: str) -> bool:
    """Whether a ``/proc/<pid>/status`` text shows CAP_SETPCAP (8) in the effective set (pure)."""
    for line in proc_status.splitlines():
        if line.startswith("CapEff:"):
            try:
                return bool(int(line.split(":", 1)[1].strip(), 16) >> _CAP_SETPCAP & 1)
            except ValueError:
                return False
    return False


_CAP_SETPCAP = 8
