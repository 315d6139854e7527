"""What containment this host can enforce, and why: probed once when a capsule host starts.

Why a probe and not a setting: the classes are promises about the running kernel. ``scoped``
needs Landlock (its ABI says which rights exist: network rules from 4, signal and abstract
socket scoping from 6); ``sealed`` also needs unprivileged-style user namespaces and the
``bwrap`` binary that composes the sandbox. The user-namespace probe forks a child that tries
``unshare(CLONE_NEWUSER)``, so an LSM, a sysctl or a seccomp filter that forbids it is seen
as it is; the sysctls and AppArmor's presence only explain the answer (``userns_grant``).

An operator (or a test) can lower what is offered with ``containment_max`` (the daemon passes it
as ``MURMUR_CONTAINMENT_MAX``); nothing can raise it. :func:`decide` is pure.
"""

from __future__ import annotations

import ctypes
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from roost.capsule import landlock
from roost.core.manifest import CONTAINMENT_ORDER, Containment

__all__ = ["CONTAINMENT_MAX_ENV", "Decision", "HostProbe", "decide", "probe_host", "refusal"]

CONTAINMENT_MAX_ENV = "MURMUR_CONTAINMENT_MAX"
CLONE_NEWUSER = 0x10000000
UsernsGrant = Literal["apparmor_absent", "restriction_disabled_host_wide", "profile_confining", "withheld"]
_CLASSES: tuple[Containment, ...] = ("advisory", "scoped", "sealed")


@dataclass(frozen=True, slots=True)
class HostProbe:
    """The facts; ``offered`` is the strongest class they support (before any operator cap)."""

    landlock_abi: int
    landlock_reason: str | None
    userns: bool
    userns_grant: UsernsGrant
    userns_reason: str | None
    bwrap: str | None
    cap: Containment | None = None
    hints: list[str] = field(default_factory=list)
    map_reason: str | None = None
    """Why this process cannot map its uid into the user namespace it can create (a uid-0 child
    started without ``CAP_SETFCAP``, which the daemon hands only to a ``sealed`` floor); None: it can."""

    @property
    def enforceable(self) -> Containment:
        if self.landlock_abi < 1:
            return "advisory"
        if self.userns and self.bwrap is not None:
            return "sealed"
        return "scoped"

    @property
    def offered(self) -> Containment:
        """The strongest class this host offers (what ``containment_achieved`` reports)."""
        best = self.enforceable
        if self.cap is not None and CONTAINMENT_ORDER[self.cap] < CONTAINMENT_ORDER[best]:
            return self.cap
        return best

    @property
    def offered_here(self) -> Containment:
        """The strongest class this process can build: :attr:`offered`, less ``sealed`` when it
        cannot map its uid."""
        best = self.offered
        return "scoped" if best == "sealed" and self.map_reason is not None else best

    def why_not(self, wanted: Containment) -> str:
        """Why ``wanted`` is above what this host offers (one clause)."""
        if self.cap is not None and CONTAINMENT_ORDER[self.cap] < CONTAINMENT_ORDER[wanted]:
            return f"the operator capped it at '{self.cap}' (containment_max)"
        if self.landlock_abi < 1:
            return f"Landlock is unavailable ({self.landlock_reason})"
        reasons = []
        if not self.userns:
            reasons.append(f"user namespaces cannot be created ({self.userns_reason})")
        elif wanted == "sealed" and self.map_reason is not None:
            reasons.append(f"this process cannot map its uid into a user namespace ({self.map_reason})")
        if self.bwrap is None:
            reasons.append("bwrap (bubblewrap) is not installed")
        return " and ".join(reasons)

    def raise_hints(self) -> list[str]:
        """What an operator could change to offer a stronger class (empty at ``sealed``)."""
        hints: list[str] = []
        if self.cap is not None and self.cap != self.enforceable:
            hints.append(f"remove containment_max = '{self.cap}' from the daemon's config")
        if self.landlock_abi < 1:
            hints.append(
                "boot a kernel with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y and 'landlock' in the lsm= list)"
            )
        if not self.userns:
            hints.append(
                "allow user namespaces (sysctl user.max_user_namespaces > 0; "
                "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile granting userns)"
            )
        if self.bwrap is None:
            hints.append("install bubblewrap (apt-get install bubblewrap)")
        return hints


@dataclass(frozen=True, slots=True)
class Decision:
    """``declared``: the manifest's floor; ``achieved``: the class the session runs under (its
    floor when the host offers it); ``enforceable``: seed 000's ``containment_achieved`` — the
    class this host can enforce, capped by ``workdir_exec`` (nothing in a manifest raises it)."""

    declared: Containment
    achieved: Containment
    floor_met: bool
    shortfall_reason: str | None
    enforceable: Containment = "advisory"


def decide(probe: HostProbe, declared: Containment, *, workdir_exec: bool) -> Decision:
    """The class a session runs under: its declared floor, if this host offers it.

    ``workdir_exec`` keeps the workdir executable, so ``shell.allow`` cannot be enforced inside
    it: such a session is ``advisory`` whatever the host offers.
    """
    host = "advisory" if workdir_exec else probe.offered
    here = "advisory" if workdir_exec else probe.offered_here
    if CONTAINMENT_ORDER[declared] <= CONTAINMENT_ORDER[here]:
        return Decision(declared, declared, True, None, host)
    if workdir_exec and CONTAINMENT_ORDER[declared] <= CONTAINMENT_ORDER[probe.offered_here]:
        reason = (
            "capabilities.filesystem.workdir_exec keeps the workdir executable, so capabilities.shell.allow "
            "cannot be enforced inside it"
        )
    else:
        reason = f"this host offers at most '{probe.offered_here}': {probe.why_not(declared)}"
    return Decision(declared, here, False, reason, host)


def refusal(coords: str, d: Decision) -> str:
    """The E-CAP-003 sentence."""
    return (
        f"E-CAP-003: {coords} declares capabilities.containment '{d.declared}', which this host cannot "
        f"enforce ({d.shortfall_reason}); a session never runs below its declared containment floor, "
        "so the launch is refused"
    )


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _landlock() -> tuple[int, str | None]:
    try:
        return landlock.abi_version(), None
    except OSError as exc:
        if exc.errno == 38:  # ENOSYS
            return 0, "the kernel has no Landlock system calls"
        if exc.errno == 95:  # EOPNOTSUPP
            return 0, "Landlock is built in but disabled at boot (not in the lsm= list)"
        return 0, str(exc)


_MAP_FAILED = 200  # the probe child's exit status when only the uid map failed: this plus its errno


def _try_userns() -> tuple[bool, str | None, str | None]:
    """Fork a child that tries ``unshare(CLONE_NEWUSER)`` and then maps its uid; its exit status
    is the errno (``_MAP_FAILED`` + errno for the map). ``(created, why not, why not mapped)``."""
    libc = ctypes.CDLL(None, use_errno=True)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        euid = os.geteuid()
        rc = libc.unshare(CLONE_NEWUSER)
        if rc != 0:
            os._exit(ctypes.get_errno() or 1)
        # bwrap maps our uid next: mapping uid 0 needs CAP_SETFCAP (Linux >= 5.12), which a
        # uid-0 child started without capabilities lacks.
        try:
            fd = os.open("/proc/self/uid_map", os.O_WRONLY)
            try:
                os.write(fd, f"{euid} {euid} 1".encode())
            finally:
                os.close(fd)
        except OSError as exc:
            os._exit(_MAP_FAILED + min(exc.errno or 1, 255 - _MAP_FAILED))
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return True, None, None
    if code > _MAP_FAILED:
        return True, None, f"writing its uid_map failed: {os.strerror(code - _MAP_FAILED)}"
    if code > 0:
        return False, f"unshare(CLONE_NEWUSER) failed: {os.strerror(code)}", None
    return False, f"the probe child died by signal {-code}", None


def _grant(works: bool) -> UsernsGrant:
    apparmor = os.path.isdir("/sys/kernel/security/apparmor") or _read("/sys/module/apparmor/parameters/enabled") == "Y"
    if not works:
        return "withheld"
    if not apparmor:
        return "apparmor_absent"
    if _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") in (None, "0"):
        return "restriction_disabled_host_wide"
    return "profile_confining"


def probe_host(env: dict[str, str] | os._Environ[str] | None = None) -> HostProbe:
    """Probe this host (a fork and a few reads); call before any thread or event loop starts."""
    source = os.environ if env is None else env
    abi, ll_reason = _landlock()
    works, ns_reason, map_reason = _try_userns()
    if works and _read("/proc/sys/user/max_user_namespaces") == "0":
        works, ns_reason = False, "user.max_user_namespaces is 0"
    raw = source.get(CONTAINMENT_MAX_ENV, "").strip()
    cap: Containment | None = None
    for name in _CLASSES:
        if raw == name:
            cap = name
    return HostProbe(abi, ll_reason, works, _grant(works), ns_reason, shutil.which("bwrap"), cap, map_reason=map_reason)
