"""No process outlives its job: a cgroup v2 per job where one can be made, else a marker sweep.

**cgroup path.** Where a writable cgroup v2 hierarchy exists (found from ``/proc/self/mounts``,
the daemon's own place in it from ``/proc/self/cgroup``), each job gets
``<jobs root>/<job_id>``: the launcher moves the child in as soon as ``Popen`` returns (the child
has exec'd the capsule host or runtime, which forks nothing before it has registered), so every
descendant — double-forked, ``setsid``, ignoring SIGTERM — is in it. Ending a job writes
``cgroup.kill`` and waits for ``populated 0``. ``capabilities.resources`` become ``memory.max``,
``pids.max`` and ``cpu.max`` for the controllers enabled in the jobs root. The jobs root is the
daemon's cgroup's parent when the daemon sits in a ``daemon`` leaf (systemd's
``DelegateSubgroup=daemon``), else ``<own cgroup>/roost-jobs``. A job's cgroup is removed
when the job ends; one left behind (a daemon killed before it could, a removal that stayed busy)
is removed by the next daemon's start once it is empty and no longer fresh
(:meth:`JobCgroups.sweep_empty`), so empty cgroups do not pile up.

**Fallback** (no writable hierarchy, or ``job_cgroups = "off"``): every process of a job carries
``MURMUR_JOB_ID`` in its environment (the launcher sets it; the capsule host passes it to
entrypoints), and the capsule host is a child subreaper that kills its entrypoint's tree. When
the job ends, the launcher finishes off whatever is left: it SIGKILLs every process whose
environment names the job, and repeats until none is found. A payload that rewrites its own
environment escapes this path; the cgroup path has no such gap (docs/security.md).

Everything here blocks: call it through the daemon's executor.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import psutil
import structlog

from roost.core.ids import JOB_ID_RE
from roost.core.manifest import ResourceCaps

__all__ = [
    "HoldsJobCgroups",
    "JobCgroups",
    "cgroup_limits",
    "find_v2_mount",
    "own_cgroup",
    "remove_cgroup",
    "sweep_marked",
    "write_cgroup_file",
    "write_limits",
]

log = structlog.get_logger("roost.launcher")

CPU_PERIOD_US = 100_000
# An empty job cgroup younger than this may belong to a job being started right now (made, its
# child not yet moved in) by a daemon sharing the jobs root: the start-up sweep leaves it.
FRESH_CGROUP_SECS = 60.0


def find_v2_mount(mounts: str) -> str | None:
    """The mount point of the cgroup v2 hierarchy in a ``/proc/self/mounts`` text, or None."""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            return fields[1].replace("\\040", " ")
    return None


def own_cgroup(proc_cgroup: str) -> str | None:
    """This process's v2 cgroup path (``0::/a/b`` → ``/a/b``) from ``/proc/self/cgroup``."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def cgroup_limits(caps: ResourceCaps, controllers: frozenset[str]) -> dict[str, str]:
    """The limit files a job's ``capabilities.resources`` become, for the enabled controllers."""
    out: dict[str, str] = {}
    memory = caps.memory_limit or caps.address_space_bytes
    if memory is not None and "memory" in controllers:
        out["memory.max"] = str(memory)
    if caps.pids_limit is not None and "pids" in controllers:
        out["pids.max"] = str(caps.pids_limit)
    if caps.cpu_percent is not None and "cpu" in controllers:
        out["cpu.max"] = f"{max(1000, caps.cpu_percent * CPU_PERIOD_US // 100)} {CPU_PERIOD_US}"
    return out


def write_limits(directory: Path, limits: dict[str, str]) -> list[str]:
    """Write each limit file into ``directory``; the names that could not be written."""
    failed: list[str] = []
    for name, value in limits.items():
        try:
            fd = os.open(directory / name, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            failed.append(name)
            continue
        try:
            os.write(fd, value.encode())
        except OSError:
            failed.append(name)
        finally:
            os.close(fd)
    return failed


def write_cgroup_file(path: Path, data: str) -> None:
    """Write one cgroupfs control file (never through a link)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class JobCgroups:
    """The jobs root in a writable cgroup v2 hierarchy, and the controllers enabled there."""

    root: Path
    controllers: frozenset[str]

    @classmethod
    def discover(cls, mode: str) -> JobCgroups | None:
        """Blocking: the jobs root if ``mode`` is ``auto`` and a writable hierarchy with
        ``cgroup.kill`` exists; None means the fallback."""
        if mode == "off":
            return None
        try:
            mount = find_v2_mount(Path("/proc/self/mounts").read_text())
            own = own_cgroup(Path("/proc/self/cgroup").read_text())
        except OSError:
            return None
        if mount is None or own is None:
            return None
        here = Path(mount) / own.lstrip("/")
        if here.name.endswith(".service") and _into_daemon_leaf(here):
            here = here / "daemon"
        root = here.parent if here.name == "daemon" and here != Path(mount) else here / "roost-jobs"
        try:
            root.mkdir(mode=0o755, exist_ok=True)
            probe = root / f"probe-{os.getpid()}"
            probe.mkdir(exist_ok=True)
            try:
                if not (probe / "cgroup.kill").exists():
                    return None
            finally:
                probe.rmdir()
        except OSError:
            return None
        controllers = _enable_controllers(root)
        return cls(root=root, controllers=controllers)

    def path(self, job_id: str) -> Path:
        if not JOB_ID_RE.match(job_id):
            raise ValueError("not a job id")
        return self.root / job_id

    def create(self, job_id: str, caps: ResourceCaps) -> list[str]:
        """Make the job's cgroup and write its limits; the limit files that could not be set."""
        path = self.path(job_id)
        path.mkdir(mode=0o755, exist_ok=True)
        return write_limits(path, cgroup_limits(caps, self.controllers))

    def enter(self, job_id: str, pid: int) -> bool:
        """Move ``pid`` (and so everything it will start) into the job's cgroup."""
        try:
            write_cgroup_file(self.path(job_id) / "cgroup.procs", str(pid))
            return True
        except OSError as exc:
            log.warning("cgroup_enter_failed", job_id=job_id, pid=pid, error=exc.strerror)
            return False

    def exists(self, job_id: str) -> bool:
        return self.path(job_id).is_dir()

    def finish(self, job_id: str, timeout: float = 5.0) -> int:
        """Kill everything left in the job's cgroup, wait until it is empty, remove it.

        Returns how many processes were still there.
        """
        path = self.path(job_id)
        try:
            left = len([p for p in (path / "cgroup.procs").read_text().split() if p])
        except FileNotFoundError:
            return 0
        except OSError:
            left = 0
        with contextlib.suppress(OSError):
            write_cgroup_file(path / "cgroup.kill", "1")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if "populated 0" in (path / "cgroup.events").read_text():
                    break
            except OSError:
                break
            time.sleep(0.02)
        if not remove_cgroup(path, tries=50):
            log.warning("cgroup_not_removed", job_id=job_id, cgroup=str(path))
        return left

    def sweep_empty(self, min_age_secs: float = FRESH_CGROUP_SECS) -> int:
        """Remove every empty job cgroup under the root older than ``min_age_secs``: what ended
        jobs left behind. A populated one (a job still running, perhaps re-adopted) is kept:
        the kernel refuses to remove it. Returns how many were removed."""
        removed = 0
        now = time.time()
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            return 0
        for entry in entries:
            if not JOB_ID_RE.match(entry.name) or not entry.is_dir(follow_symlinks=False):
                continue
            path = Path(entry.path)
            try:
                young = now - entry.stat(follow_symlinks=False).st_mtime < min_age_secs
                if young or "populated 0" not in (path / "cgroup.events").read_text():
                    continue
            except OSError:
                continue
            if remove_cgroup(path, tries=1):
                removed += 1
        return removed


def remove_cgroup(path: Path, *, tries: int) -> bool:
    """Remove an empty cgroup; it may stay busy for a moment after its last process died."""
    for attempt in range(tries):
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY or attempt == tries - 1:
                return False
            time.sleep(0.02)
    return False


def _into_daemon_leaf(service: Path) -> bool:
    """Under systemd with ``Delegate=yes`` the daemon starts in its service's cgroup; move it
    into a ``daemon`` leaf so controllers can be enabled for the job cgroups beside it (the
    "no internal processes" rule). What systemd >= 254 does itself with ``DelegateSubgroup=``."""
    leaf = service / "daemon"
    try:
        leaf.mkdir(mode=0o755, exist_ok=True)
        write_cgroup_file(leaf / "cgroup.procs", str(os.getpid()))
        return True
    except OSError:
        return False


def _enable_controllers(root: Path) -> frozenset[str]:
    """Enable what the parent offers (memory, pids, cpu) for the jobs under ``root``."""
    with contextlib.suppress(OSError):
        # The parent must pass them down first (allowed once it holds no process itself).
        offered = set((root.parent / "cgroup.controllers").read_text().split()) & {"memory", "pids", "cpu"}
        for name in sorted(offered):
            with contextlib.suppress(OSError):
                write_cgroup_file(root.parent / "cgroup.subtree_control", f"+{name}")
    try:
        available = set((root / "cgroup.controllers").read_text().split())
    except OSError:
        return frozenset()
    wanted = available & {"memory", "pids", "cpu"}
    enabled: set[str] = set()
    for name in sorted(wanted):
        try:
            write_cgroup_file(root / "cgroup.subtree_control", f"+{name}")
            enabled.add(name)
        except OSError:
            continue
    return frozenset(enabled)


def _marked(job_id: str) -> list[psutil.Process]:
    me = os.getuid()
    out: list[psutil.Process] = []
    for proc in psutil.process_iter(["uids"]):
        try:
            if proc.pid == os.getpid():
                continue
            if me != 0 and (proc.info["uids"] is None or proc.info["uids"].real != me):
                continue
            if proc.environ().get("MURMUR_JOB_ID") == job_id:
                out.append(proc)
        except (psutil.Error, OSError):
            continue
    return out


def sweep_marked(job_id: str, rounds: int = 20) -> int:
    """Fallback: SIGKILL every process whose environment names ``job_id`` until none is left."""
    killed = 0
    for _ in range(rounds):
        found = [p for p in _marked(job_id) if p.status() != psutil.STATUS_ZOMBIE]
        if not found:
            break
        for proc in found:
            with contextlib.suppress(psutil.Error, OSError):
                proc.send_signal(signal.SIGKILL)
                killed += 1
        psutil.wait_procs(found, timeout=0.5)
    return killed


@runtime_checkable
class HoldsJobCgroups(Protocol):
    """A backend that puts children on this host into per-job cgroups (the local one): the
    operator surface and its tests read them; a backend without it has none here."""

    cgroups: JobCgroups | None
