"""Starting a child: its command line, its environment, and the process itself.

Why it is done this way:

* ``subprocess.Popen`` is called on the event loop's own thread (as asyncio's subprocess
  transport does), never from an executor thread: Linux ties parent-death behaviour to the
  spawning thread. No ``preexec_fn`` (it forces fork and costs 3×): the lifeline's read end
  travels by ``pass_fds``, the own process group by ``process_group=0``; both keep vfork.
* With vfork the loop's thread waits until the child has been scheduled and has exec'd. On an
  idle host that is under a millisecond; on a host whose CPUs are all taken it is the child's
  wait for a CPU (tens of ms at the p90 in a storm of launches, ``bench/bench_ray.py``), and it
  is most of the daemon's event-loop lag then. A plain fork that does not wait for the exec was
  measured worse (copying the daemon's page tables costs more than the wait it saves); only
  moving the fork out of the daemon's process would remove the wait.
* The environment starts empty. Names a manifest's ``capabilities.env.allow`` lists are copied
  from the daemon's environment first, then the fixed names are set, so an allow list can never
  displace ``MURMUR_*``. The approval is never in argv or the environment: it goes on stdin.
* ``capabilities.resources`` of a script capsule are set by its host just before it execs the
  entrypoint (``roost/capsule/limits.py``). For a runtime capsule they are applied with
  ``prlimit`` right after the spawn: the child runs its first instructions before the limits
  land, a window accepted because closing it needs a ``preexec_fn`` on every launch.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import psutil

from roost.backends.process.privdrop import Privileges, drop_argv, holds_setpcap
from roost.core.limits import RLIMIT_FIELDS
from roost.core.manifest import Manifest, ResourceCaps
from roost.core.wire import BLOCKING_CAP_ENV
from roost.state.config import Config

__all__ = [
    "CannotSwitchUser",
    "ChildSpec",
    "RunAs",
    "apply_limits",
    "can_switch_users",
    "capsule_host_env",
    "child_argv",
    "child_env",
    "daemon_holds_setpcap",
    "require_command",
    "run_as",
    "setid_capable",
    "start_process",
    "switch_refusal",
]


# Never copied through an env.allow list: runtime names and anything that carries identity.
# OTEL_*: the daemon's exporter settings (endpoint, headers with their API keys) never reach a
# child, whatever its allow list says; a child gets TRACEPARENT and OTEL_SERVICE_NAME of its own.
_RESERVED_PREFIXES = ("MURMUR_", "OTEL_", "TRACEPARENT", "TRACESTATE")
_FIXED = ("PATH", "HOME", "LANG")


def child_argv(cfg: Config, manifest: Manifest, workdir: str, *, delegated: bool) -> list[str]:
    """``roost-capsule run …`` for a script capsule, the runtime command for anything else."""
    coords = f"{manifest.name}@{manifest.version}"
    if manifest.entrypoint:
        base = list(cfg.capsule_command) or [sys.executable, "-m", "roost.capsule"]
        argv = [*base, "run", coords, "--workdir", workdir, "--json"]
        if delegated:
            argv.append("--spawn-grant-stdin")
        return argv
    return [*cfg.runtime_command, coords, "--workdir", workdir, "--json", "--no-env-file", "--spawn-grant-stdin"]


def child_env(
    source: Mapping[str, str],
    *,
    allow: Sequence[str],
    roost_url: str,
    job_id: str,
    registry_path: str,
    spawner: str | None,
) -> dict[str, str]:
    """The child's whole environment but ``MURMUR_SPAWNER_LIFELINE``, which its backend adds."""
    env: dict[str, str] = {}
    for name in allow:
        if name.startswith(_RESERVED_PREFIXES) or name in _FIXED:
            continue
        value = source.get(name)
        if value is not None:
            env[name] = value
    for name in _FIXED:
        value = source.get(name)
        if value is not None:
            env[name] = value
    env.setdefault("PATH", os.defpath)
    env["MURMUR_ROOST_URL"] = roost_url
    env["MURMUR_JOB_ID"] = job_id
    env["MURMUR_REGISTRY_PATH"] = registry_path
    if spawner is not None:
        env["MURMUR_SPAWNER"] = spawner
    return env


def capsule_host_env(cfg: Config) -> dict[str, str]:
    """What ``roost-capsule`` learns from the daemon's config: a kill grace shorter than ours
    (so it finishes off its entrypoint's tree before our SIGKILL reaches it), how long its door
    may hold a blocking send, and, when set, the strongest containment class it may offer."""
    env = {
        "MURMUR_KILL_GRACE_SECS": f"{max(0.1, min(2.0, cfg.stop_grace_secs * 0.4)):.3f}",
        BLOCKING_CAP_ENV: repr(cfg.door_blocking_cap_secs),
    }
    if cfg.containment_max is not None:
        env["MURMUR_CONTAINMENT_MAX"] = cfg.containment_max
    return env


@dataclass(frozen=True, slots=True)
class RunAs:
    """The identity a child is started with: uid, primary gid, supplementary groups, home."""

    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str | None


class CannotSwitchUser(Exception):
    """The daemon cannot start a child as the session's uid; the message is one sentence."""


_CAP_SETGID = 6
_CAP_SETUID = 7


def setid_capable(proc_status: str) -> bool:
    """Whether a ``/proc/<pid>/status`` text shows CAP_SETUID and CAP_SETGID in the effective set."""
    for line in proc_status.splitlines():
        if line.startswith("CapEff:"):
            try:
                eff = int(line.split(":", 1)[1].strip(), 16)
            except ValueError:
                return False
            return bool(eff >> _CAP_SETUID & 1) and bool(eff >> _CAP_SETGID & 1)
    return False


def daemon_holds_setpcap() -> bool:
    """Blocking: whether this process holds CAP_SETPCAP (it can clear a child's bounding set)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            return holds_setpcap(fh.read())
    except OSError:
        return False


def can_switch_users() -> bool:
    """Blocking: whether this process is root with CAP_SETUID and CAP_SETGID (what a child of
    another uid takes: ``setuid``, ``setgid`` and ``setgroups`` in the forked child)."""
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            return setid_capable(fh.read())
    except OSError:
        return True  # no /proc to ask: let the start say what the kernel thinks


def switch_refusal(uid: int | None, *, me: int, capable: bool) -> str | None:
    """None when a daemon running as ``me`` (root with the capabilities when ``capable``) can
    start a child as ``uid``; else the refusal sentence with its fix."""
    if uid is None or uid == me or (me == 0 and capable):
        return None
    if me == 0:
        return (
            f"this daemon runs as root without CAP_SETUID/CAP_SETGID, so it cannot start a child as "
            f"uid {uid} (the session's own); give the daemon those capabilities (systemd: "
            "CapabilityBoundingSet= and AmbientCapabilities= in its unit) or run it as that user"
        )
    return (
        f"this daemon runs as uid {me}, so it cannot start a child as uid {uid} (the session's "
        "own); run the daemon as root (with CAP_SETUID/CAP_SETGID) or as that user"
    )


def run_as(uid: int | None) -> RunAs | None:
    """Blocking (passwd/group lookups): who a child of a session of ``uid`` runs as.

    None means "as the daemon itself" (the same uid, or no uid recorded). A root daemon with
    CAP_SETUID/CAP_SETGID switches to any other uid; any other daemon refuses
    (:class:`CannotSwitchUser`), before anything of the job is made.
    """
    me = os.geteuid()
    if uid is None or uid == me:
        return None
    refusal = switch_refusal(uid, me=me, capable=can_switch_users())
    if refusal is not None:
        raise CannotSwitchUser(refusal)
    import pwd

    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return RunAs(uid=uid, gid=uid, groups=(), home=None)
    try:
        groups = tuple(g for g in os.getgrouplist(pw.pw_name, pw.pw_gid) if g != pw.pw_gid)
    except OSError:
        groups = ()
    return RunAs(uid=uid, gid=pw.pw_gid, groups=groups, home=pw.pw_dir or None)


def require_command(argv0: str, path: str) -> None:
    """Blocking: :class:`FileNotFoundError` unless the child's command exists. The exec step, not
    the command, is what ``Popen`` execs, so a missing command would otherwise show only as the
    child's early exit instead of the start's own error."""
    found = argv0 if "/" in argv0 else shutil.which(argv0, path=path)
    if found is None or not os.path.isfile(found):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv0)


@dataclass(slots=True)
class ChildSpec:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    lifeline_fd: int
    stderr_fd: int
    user: RunAs | None = None
    setpriv: str | None = None
    """The privilege-dropping exec step (roost/backends/process/privdrop.py); None: none found."""
    sealed: bool = False
    """The child's containment floor is ``sealed`` (a uid-0 child keeps CAP_SETFCAP for bwrap)."""
    setpcap: bool = False
    """The daemon holds CAP_SETPCAP: the child's bounding set is cleared and its securebits locked."""


def start_process(spec: ChildSpec) -> subprocess.Popen[bytes]:
    """Start the child in its own process group. Call from the event loop's thread only.

    The child execs through ``setpriv`` (:mod:`roost.backends.process.privdrop`): with
    ``spec.user`` it switches to that uid, gid and supplementary groups, and whatever its uid it
    starts with no capability, ``no_new_privs`` and locked securebits — it never runs a single
    instruction of its own with the daemon's privileges. Without ``setpriv`` the switch is made in
    the forked child (``Popen(user=, group=, extra_groups=)``) and capabilities are not dropped.
    """
    user = group = None
    extra_groups: list[int] | None = None
    argv = spec.argv
    if spec.user is not None and spec.user.home:
        spec.env["HOME"] = spec.user.home
    if spec.setpriv is not None:
        target = spec.user
        child_uid = target.uid if target is not None else os.geteuid()
        who = Privileges(
            uid=target.uid if target is not None else None,
            gid=target.gid if target is not None else None,
            groups=target.groups if target is not None else (),
            keep_setfcap=spec.sealed and child_uid == 0,
        )
        argv = drop_argv(spec.setpriv, spec.argv, who, setpcap=spec.setpcap)
    elif spec.user is not None:
        user, group, extra_groups = spec.user.uid, spec.user.gid, list(spec.user.groups)
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=spec.stderr_fd,
        env=spec.env,
        cwd=spec.cwd,
        pass_fds=(spec.lifeline_fd,),
        close_fds=True,
        process_group=0,
        user=user,
        group=group,
        extra_groups=extra_groups,
    )


# The rlimits of the limits policy (roost/core/limits.py): those that mean what their field says.
_LIMITS: tuple[tuple[str, int], ...] = tuple((f, getattr(resource, name)) for f, name in RLIMIT_FIELDS.items())


def apply_limits(pid: int, caps: ResourceCaps) -> list[str]:
    """``prlimit`` each declared resource on the child; returns the names that could not be set."""
    failed: list[str] = []
    proc: psutil.Process | None = None
    for attr, which in _LIMITS:
        value = getattr(caps, attr)
        if value is None:
            continue
        try:
            if proc is None:
                proc = psutil.Process(pid)
            _soft, hard = proc.rlimit(which)
            cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
            proc.rlimit(which, (cap, cap))
        except (psutil.Error, OSError, ValueError):
            failed.append(attr)
    return failed
