"""One job's resource limits on the host that runs its child: the policy's decision, then its cgroups.

Why one module for every backend: the limits policy (roost/core/limits.py, docs/security.md
"Resource limits") says each declared limit is enforced by the best mechanism *the host that runs
the child* has — a cgroup v2 controller in the job's cgroup, else a v1 cgroup of the job's own,
else an rlimit of the same meaning — and a limit nothing there enforces refuses the start (under
``resource_limits = "enforce"``). The local backend runs children on the daemon's host; a Ray
node's keeper runs them on its node, whose cgroups may be nothing like the daemon's. Both hold a
:class:`JobLimits` discovered where they run, so the decision, the cgroups made for it, the
refusal's sentence and the clean-up are the same code wherever a child starts.

The order of a start: :meth:`JobLimits.decide` (pure, before anything of the job exists),
:meth:`JobLimits.make` (blocking: the job's v2 cgroup with its limits, its v1 cgroups), the
spawn, :meth:`JobLimits.enter` (inline, right after the spawn: the child forks nothing before it
has registered), and at the job's end :meth:`JobLimits.finish`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import structlog

from roost.backends.base import LimitsRefused
from roost.backends.process.cgroups import JobCgroups, sweep_marked
from roost.backends.process.cgroupv1 import V1Cgroups
from roost.core.limits import ALIASES, HostMechanisms, LimitPlan, Mode, plan_limits, refusal
from roost.core.manifest import ResourceCaps

__all__ = ["JobLimits", "limits_mode", "unbound_sentence"]

log = structlog.get_logger("roost.launcher")


def limits_mode(setting: str) -> Mode:
    """The daemon's ``resource_limits`` setting as the policy's mode (anything else: enforce)."""
    return "advisory" if setting == "advisory" else "enforce"


def unbound_sentence(controllers: list[str]) -> str:
    """Why a child was ended right after its spawn: it could not join its v1 cgroups."""
    return f"the child could not be moved into its cgroup v1 {', '.join(controllers)} limits"


@dataclass(frozen=True, slots=True)
class JobLimits:
    """The job cgroups of one host (v2, and v1 for the controllers v2 lacks there) and how the
    host is named in a refusal (``where``, ``holder``: :class:`roost.core.limits.HostMechanisms`)."""

    cgroups: JobCgroups | None
    v1: V1Cgroups | None
    off: bool = False
    where: str = "this host"
    holder: str = "the daemon"

    @classmethod
    def discover(cls, job_cgroups: str, *, where: str = "this host", holder: str = "the daemon") -> JobLimits:
        """Blocking: this host's v2 job cgroups, then v1 hierarchies for what they lack."""
        cgroups = JobCgroups.discover(job_cgroups)
        skip = cgroups.controllers if cgroups is not None else frozenset()
        v1 = V1Cgroups.discover(job_cgroups, skip)
        return cls(cgroups, v1, job_cgroups == "off", where, holder)

    def mechanisms(self) -> HostMechanisms:
        """How each resource limit is enforced here (roost/core/limits.py)."""
        return HostMechanisms(
            cgroup2=self.cgroups.controllers if self.cgroups is not None else frozenset(),
            cgroup1=self.v1.controllers if self.v1 is not None else frozenset(),
            cgroups_off=self.off,
            where=self.where,
            holder=self.holder,
        )

    def describe(self) -> dict[str, str | None]:
        """For the start-up log line: the v2 jobs root, its controllers, the v1 ones."""
        return {
            "cgroups": str(self.cgroups.root) if self.cgroups is not None else None,
            "controllers": ",".join(sorted(self.cgroups.controllers)) if self.cgroups is not None else "",
            "cgroup_v1": ",".join(sorted(self.v1.controllers)) if self.v1 is not None else "",
        }

    def decide(self, caps: ResourceCaps, setting: str, coords: str) -> LimitPlan:
        """The job's plan here; :class:`LimitsRefused` (one sentence naming the field) when a
        declared limit has no mechanism here under ``enforce``. Pure: call it before anything of
        the job is made."""
        plan = plan_limits(caps, self.mechanisms(), limits_mode(setting))
        sentence = refusal(plan, coords, self.mechanisms())
        if sentence is not None:
            raise LimitsRefused(sentence)
        return plan

    def make(
        self, job_id: str, caps: ResourceCaps, plan: LimitPlan, coords: str
    ) -> tuple[JobCgroups | None, LimitPlan]:
        """Blocking: the job's v2 cgroup with its limits (None when it could not be made: the
        marker sweep then finishes the job off) and its v1 cgroups; the plan, less what could not
        be written — :class:`LimitsRefused` when that leaves a limit unenforced under ``enforce``."""
        cgroups = self.cgroups
        if cgroups is not None:
            try:
                unset = cgroups.create(job_id, caps)
                if unset:
                    log.warning("cgroup_limits_not_applied", job_id=job_id, limits=",".join(unset))
            except OSError as exc:
                log.warning("cgroup_create_failed", job_id=job_id, error=exc.strerror)
                cgroups = None
        if self.v1 is not None and plan.cgroup1:
            failed = self.v1.create(job_id, plan.cgroup1)
            if failed:
                log.warning("cgroup_v1_limits_not_applied", job_id=job_id, limits=",".join(failed))
                plan = self._unapplied(plan, failed, coords)
        return cgroups, plan

    def _unapplied(self, plan: LimitPlan, fields: list[str], coords: str) -> LimitPlan:
        """The plan once the v1 limits of ``fields`` (canonical) turned out not to be writable;
        refused under ``enforce``."""
        enforced = dict(plan.enforced)
        not_enforced = dict(plan.not_enforced)
        names = [n for n in plan.enforced if ALIASES.get(n, n) in fields]
        for name in names:
            not_enforced[name] = f"its limit ({enforced.pop(name)}) could not be written"
        refused = plan.refused if plan.refused is not None or not names else (names[0], not_enforced[names[0]])
        out = replace(
            plan,
            enforced=enforced,
            not_enforced=not_enforced,
            cgroup1={k: v for k, v in plan.cgroup1.items() if k not in fields},
            refused=refused,
        )
        sentence = refusal(out, coords, self.mechanisms())
        if sentence is not None:
            raise LimitsRefused(sentence)
        return out

    def enter(self, job_id: str, pid: int, cgroups: JobCgroups | None, plan: LimitPlan) -> list[str]:
        """Move the just-spawned child into the job's cgroups (a few cgroupfs writes, no disk:
        call it inline, right after the spawn); the v1 controllers it could not join — under
        ``enforce`` its start must then fail (:func:`unbound_sentence`)."""
        if cgroups is not None:
            cgroups.enter(job_id, pid)
        if self.v1 is None or not plan.cgroup1:
            return []
        return self.v1.enter(job_id, pid)

    def finish(self, job_id: str) -> tuple[int, str]:
        """Blocking: kill what is left of the job — its v2 cgroup (``cgroup.kill``), else every
        process marked with its id — and its v1 cgroups; how many were left, and by what."""
        if self.cgroups is not None and self.cgroups.exists(job_id):
            left, how = self.cgroups.finish(job_id), "cgroup"
        else:
            left, how = sweep_marked(job_id), "sweep"
        if self.v1 is not None and self.v1.exists(job_id):
            left += self.v1.finish(job_id)
        return left, how

    def sweep_empty(self) -> int:
        """Blocking: remove the empty cgroups ended jobs left behind (roost/backends/process/cgroups.py)."""
        swept = self.cgroups.sweep_empty() if self.cgroups is not None else 0
        if self.v1 is not None:
            swept += self.v1.sweep_empty()
        return swept
