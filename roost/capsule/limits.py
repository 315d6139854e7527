"""``capabilities.resources`` in the capsule host: the entrypoint's rlimits, what its job's limits
are enforced by, and which limit a finished entrypoint hit.

Why the rlimits are set here and not on the host: they bind the entrypoint's process tree
(rlimits are inherited across fork and exec), and the host itself needs more address space than a
small limit allows. Setting them between fork and exec closes the window a ``prlimit`` after the
spawn leaves open: the entrypoint's first instruction already runs under them. Only the rlimits
that mean what their field says are set (roost/core/limits.py); ``cpu_seconds`` gets a hard
limit one second above the soft one, so the entrypoint is ended by ``SIGXCPU`` — the kernel's
evidence that names the limit — rather than by an anonymous ``SIGKILL``.

The cgroup limits are the launcher's: it makes the job's cgroups and says, in
``MURMUR_RESOURCE_LIMITS``, what each limit is enforced by (``effective_grants.resource_limits``).
A host started by hand has no job cgroup, so its cgroup limits are listed as not enforced.

Which limit an entrypoint hit (the seed's ``resource_limit``): its death signal, and the increase,
over the run, of the failed forks in its pids cgroup and of the OOM kills in its memory cgroup —
read from the host's own cgroups, which are the job's.
"""

from __future__ import annotations

import json
import resource
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from roost.core.limits import LIMITS_ENV, RLIMIT_FIELDS, HostMechanisms, declared, plan_limits
from roost.core.manifest import ResourceCaps

__all__ = ["LimitCounters", "apply_rlimits", "limits_report", "read_counters", "rlimit_plan"]


def rlimit_plan(caps: ResourceCaps) -> list[tuple[int, int, int]]:
    """``(resource, soft, hard)`` for each declared rlimit field, capped by the host's hard limit."""
    plan: list[tuple[int, int, int]] = []
    for field, name in RLIMIT_FIELDS.items():
        value = getattr(caps, field)
        if value is None:
            continue
        which = getattr(resource, name)
        _soft, hard = resource.getrlimit(which)
        want_hard = value + 1 if field == "cpu_seconds" else value
        if hard != resource.RLIM_INFINITY:
            want_hard = min(want_hard, hard)
        plan.append((which, min(value, want_hard), want_hard))
    return plan


def apply_rlimits(plan: Sequence[tuple[int, int, int]]) -> None:
    """Set each limit; runs in the forked child, so it only raises OSError."""
    for which, soft, hard in plan:
        resource.setrlimit(which, (soft, hard))


def limits_report(caps: ResourceCaps, env: Mapping[str, str]) -> dict[str, object]:
    """``effective_grants.resource_limits``: the launcher's report when it started this host,
    else this host's own (rlimits only: nothing made a job cgroup for it)."""
    raw = env.get(LIMITS_ENV, "").strip()
    if raw:
        try:
            report = json.loads(raw)
        except ValueError:
            report = None
        if isinstance(report, dict) and {"mode", "enforced", "not_enforced"} <= set(report):
            return report
    plan = plan_limits(caps, HostMechanisms(), "advisory")
    report = plan.report()
    not_enforced = report["not_enforced"]
    assert isinstance(not_enforced, dict)
    for name in list(not_enforced):
        if name not in caps.unknown_keys:
            not_enforced[name] = (
                "this capsule host was not started by mur-roost's launcher, which makes the job's cgroups"
            )
    return report


@dataclass(frozen=True, slots=True)
class LimitCounters:
    """The job's cgroup counters that name a limit: refused forks, OOM kills."""

    pids_hits: int = 0
    oom_kills: int = 0

    def since(self, before: LimitCounters) -> LimitCounters:
        return LimitCounters(max(0, self.pids_hits - before.pids_hits), max(0, self.oom_kills - before.oom_kills))


def _counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def _own_dirs(proc_cgroup: str) -> dict[str, Path]:
    """This process's cgroup directory per controller (``""`` for the v2 one)."""
    mounts: dict[str, Path] = {}
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) < 4:
                continue
            if fields[2] == "cgroup2":
                mounts.setdefault("", Path(fields[1]))
            elif fields[2] == "cgroup":
                for c in ("pids", "memory"):
                    if c in fields[3].split(","):
                        mounts.setdefault(c, Path(fields[1]))
    except OSError:
        return {}
    out: dict[str, Path] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        rel = parts[2].strip().lstrip("/")
        for c in ["" if parts[0] == "0" else x for x in parts[1].split(",")] or [""]:
            if c in mounts and c not in out:
                out[c] = mounts[c] / rel
    return out


def read_counters(caps: ResourceCaps) -> LimitCounters:
    """Blocking (a few cgroupfs reads): the counters of this host's own cgroups — the job's —
    for the cgroup limits the manifest declares."""
    fields = {d.field for d in declared(caps)}
    if not fields & {"cgroup_pids_max", "cgroup_memory_bytes"}:
        return LimitCounters()
    try:
        dirs = _own_dirs(Path("/proc/self/cgroup").read_text())
    except OSError:
        return LimitCounters()
    pids = oom = 0
    for key, d in dirs.items():
        if key in ("", "pids"):
            pids += _counter(d / "pids.events", "max")
        if key == "":
            oom += _counter(d / "memory.events", "oom_kill")
        elif key == "memory":
            oom += _counter(d / "memory.oom_control", "oom_kill")
    return LimitCounters(pids, oom)
