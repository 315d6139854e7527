"""A cgroup v1 directory per job, for the controllers a hybrid host keeps in v1 hierarchies.

Why: on hosts where the cgroup v2 hierarchy carries no ``pids`` or ``memory`` controller (they
are mounted as v1 hierarchies, ``/sys/fs/cgroup/pids``, ``/sys/fs/cgroup/memory``), a job cgroup
in v2 can still be killed as one, but nothing in it limits processes or memory. The limits
policy (roost/core/limits.py) then puts the job into a v1 cgroup of its own in each such
hierarchy: ``<hierarchy>/<the daemon's own cgroup there>/roost-jobs/<job_id>``, with
``pids.max``, ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` when swap is
accounted, so swap is no way around it) or ``cpu.cfs_quota_us``. A directory below the daemon's
own keeps the job inside whatever the daemon itself is held to.

A v1 hierarchy is used only when the daemon can make a directory there and write its limit
file (checked once, with a probe directory). v1 has no ``cgroup.kill``: :meth:`V1Cgroups.finish`
SIGKILLs what is left in the job's directories, then removes them.

Everything here blocks: call it through the daemon's executor.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import structlog

from roost.backends.process.cgroups import remove_cgroup as _remove
from roost.backends.process.cgroups import write_cgroup_file as _write
from roost.core.ids import JOB_ID_RE

__all__ = ["V1_CONTROLLERS", "V1Cgroups", "own_v1_paths", "v1_limit_files", "v1_mounts"]

log = structlog.get_logger("roost.launcher")

V1_CONTROLLERS = ("pids", "memory", "cpu")
CPU_PERIOD_US = 100_000
_LIMIT_FILE = {"pids": "pids.max", "memory": "memory.limit_in_bytes", "cpu": "cpu.cfs_quota_us"}
FRESH_SECS = 60.0


def v1_mounts(mounts: str) -> dict[str, str]:
    """``controller → mount point`` of each v1 hierarchy in a ``/proc/self/mounts`` text that
    carries one of :data:`V1_CONTROLLERS` (a hierarchy mounted with several, ``cpu,cpuacct``, counts
    for each)."""
    out: dict[str, str] = {}
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[2] != "cgroup":
            continue
        options = set(fields[3].split(","))
        for controller in V1_CONTROLLERS:
            if controller in options and controller not in out:
                out[controller] = fields[1].replace("\\040", " ")
    return out


def own_v1_paths(proc_cgroup: str) -> dict[str, str]:
    """``controller → this process's path`` in each v1 hierarchy, from ``/proc/self/cgroup``
    (``4:memory:/a/b`` → ``{"memory": "/a/b"}``; ``2:cpu,cpuacct:/`` → ``cpu`` and ``cpuacct``)."""
    out: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3 or parts[0] == "0" or not parts[1]:
            continue
        for controller in parts[1].split(","):
            out[controller] = parts[2].strip() or "/"
    return out


def v1_limit_files(field: str, value: int, *, memsw: bool) -> dict[str, str]:
    """The files a canonical limit field becomes in a v1 job cgroup (order matters: memsw after
    the memory limit, since v1 refuses a memsw limit below the memory limit)."""
    if field == "cgroup_pids_max":
        return {"pids.max": str(value)}
    if field == "cgroup_memory_bytes":
        out = {"memory.limit_in_bytes": str(value)}
        if memsw:
            out["memory.memsw.limit_in_bytes"] = str(value)
        return out
    if field == "cpu_percent":
        return {
            "cpu.cfs_period_us": str(CPU_PERIOD_US),
            "cpu.cfs_quota_us": str(max(1000, value * CPU_PERIOD_US // 100)),
        }
    return {}


_CONTROLLER_OF = {"cgroup_pids_max": "pids", "cgroup_memory_bytes": "memory", "cpu_percent": "cpu"}


@dataclass(frozen=True, slots=True)
class V1Cgroups:
    """The jobs root in each usable v1 hierarchy, by controller."""

    roots: dict[str, Path]

    @property
    def controllers(self) -> frozenset[str]:
        return frozenset(self.roots)

    @classmethod
    def discover(cls, mode: str, skip: frozenset[str] = frozenset()) -> V1Cgroups | None:
        """Blocking: the v1 hierarchies the daemon can make job cgroups in, except the
        controllers in ``skip`` (those the v2 job cgroups carry already). None: no such hierarchy."""
        if mode == "off":
            return None
        try:
            mounts = v1_mounts(Path("/proc/self/mounts").read_text())
            own = own_v1_paths(Path("/proc/self/cgroup").read_text())
        except OSError:
            return None
        roots: dict[str, Path] = {}
        for controller, mount in mounts.items():
            if controller in skip:
                continue
            root = Path(mount) / own.get(controller, "/").lstrip("/") / "roost-jobs"
            if _usable(root, controller):
                roots[controller] = root
        return cls(roots) if roots else None

    def path(self, controller: str, job_id: str) -> Path:
        if not JOB_ID_RE.match(job_id):
            raise ValueError("not a job id")
        return self.roots[controller] / job_id

    def create(self, job_id: str, limits: dict[str, int]) -> list[str]:
        """Make the job's directory in the hierarchy of each canonical field in ``limits`` and
        write its limit; the fields that could not be set."""
        failed: list[str] = []
        for field, value in limits.items():
            controller = _CONTROLLER_OF.get(field)
            if controller is None or controller not in self.roots:
                failed.append(field)
                continue
            path = self.path(controller, job_id)
            memsw = controller == "memory" and (path.parent / "memory.memsw.limit_in_bytes").exists()
            try:
                path.mkdir(mode=0o755, exist_ok=True)
                for name, text in v1_limit_files(field, value, memsw=memsw).items():
                    _write(path / name, text)
            except OSError:
                failed.append(field)
        return failed

    def enter(self, job_id: str, pid: int) -> list[str]:
        """Move ``pid`` into each of the job's v1 directories; the controllers it could not join."""
        failed: list[str] = []
        for controller in self.roots:
            path = self.path(controller, job_id)
            if not path.is_dir():
                continue
            try:
                _write(path / "cgroup.procs", str(pid))
            except OSError as exc:
                log.warning("cgroup_v1_enter_failed", job_id=job_id, controller=controller, error=exc.strerror)
                failed.append(controller)
        return failed

    def exists(self, job_id: str) -> bool:
        return any(self.path(c, job_id).is_dir() for c in self.roots)

    def finish(self, job_id: str, timeout: float = 5.0) -> int:
        """SIGKILL whatever is left in the job's v1 directories, then remove them; how many
        processes were still there."""
        killed = 0
        for controller in self.roots:
            path = self.path(controller, job_id)
            if not path.is_dir():
                continue
            deadline = time.monotonic() + timeout
            while True:
                pids = _procs(path)
                if not pids or time.monotonic() >= deadline:
                    break
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                        killed += 1
                time.sleep(0.02)
            if not _remove(path, tries=50):
                log.warning("cgroup_not_removed", job_id=job_id, cgroup=str(path))
        return killed

    def sweep_empty(self, min_age_secs: float = FRESH_SECS) -> int:
        """Remove empty job directories older than ``min_age_secs`` that ended jobs left behind."""
        removed = 0
        now = time.time()
        for root in self.roots.values():
            try:
                entries = list(os.scandir(root))
            except OSError:
                continue
            for entry in entries:
                if not JOB_ID_RE.match(entry.name) or not entry.is_dir(follow_symlinks=False):
                    continue
                try:
                    if now - entry.stat(follow_symlinks=False).st_mtime < min_age_secs:
                        continue
                except OSError:
                    continue
                if not _procs(Path(entry.path)) and _remove(Path(entry.path), tries=1):
                    removed += 1
        return removed


def _procs(path: Path) -> list[int]:
    try:
        return [int(p) for p in (path / "cgroup.procs").read_text().split() if p.isdigit()]
    except OSError:
        return []


def _usable(root: Path, controller: str) -> bool:
    """Whether the daemon can make a job directory under ``root`` and set its limit there."""
    try:
        root.mkdir(mode=0o755, exist_ok=True)
        probe = root / f"probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        try:
            name = _LIMIT_FILE[controller]
            current = (probe / name).read_text().strip()
            _write(probe / name, current)
            return True
        finally:
            probe.rmdir()
    except OSError:
        return False
