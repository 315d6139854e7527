"""The limits policy: one rule for every ``capabilities.resources`` field (docs/security.md, "Resource limits").

Each declared limit is enforced by the best mechanism the host has, tried in this order:

1. a cgroup v2 controller enabled in the job's own cgroup (``memory.max``, ``pids.max``, ``cpu.max``);
2. on a hybrid host, where a controller lives in a cgroup v1 hierarchy instead (``pids`` and
   ``memory`` often do), a v1 cgroup of the job's own (``pids.max``, ``memory.limit_in_bytes``,
   ``cpu.cfs_quota_us``);
3. an rlimit, only where one means the same thing: ``cpu_seconds`` (``RLIMIT_CPU``),
   ``max_file_size_bytes`` (``RLIMIT_FSIZE``), ``max_open_files`` (``RLIMIT_NOFILE``),
   ``address_space_bytes`` (``RLIMIT_AS``). ``RLIMIT_NPROC`` is *not* the process limit: it counts
   every process of the uid (not the job's), and the kernel exempts uid 0 from it.

A declared limit that no mechanism here can enforce refuses the launch before the child starts,
with one sentence naming the field (as upstream refuses a launch it cannot bound, E-RUN-012) —
unless the operator set ``resource_limits = "advisory"``: then the job runs, and the limit is
listed as not enforced in ``effective_grants.resource_limits`` and by ``roostctl doctor``. A key
this daemon does not know is never a mechanism's: it is refused when a capsule is packed or
added to the registry, and reported as not enforced at a spawn (an upstream manifest may carry
fields this host does not know).

The seeds' names are the canonical ones; ``memory_bytes`` and ``max_processes`` are the
project's aliases of ``cgroup_memory_bytes`` and ``cgroup_pids_max``. The seed's
``resource_limit`` trace field names the canonical field the kernel's evidence points at, and
only when it points at exactly one (:func:`which_limit`).

Pure: no I/O.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from roost.core.manifest import ResourceCaps

__all__ = [
    "ALIASES",
    "CGROUP_FIELDS",
    "KNOWN_RESOURCE_FIELDS",
    "LIMITS_ENV",
    "MODES",
    "RLIMIT_FIELDS",
    "Declared",
    "HostMechanisms",
    "LimitPlan",
    "Mode",
    "declared",
    "plan_limits",
    "refusal",
    "which_limit",
]

Mode = Literal["enforce", "advisory"]
MODES: tuple[Mode, ...] = ("enforce", "advisory")
LIMITS_ENV: Final = "MURMUR_RESOURCE_LIMITS"
"""How the launcher tells a capsule host what its job's limits are enforced by (JSON, :meth:`LimitPlan.to_env`)."""

RLIMIT_FIELDS: Final[Mapping[str, str]] = {
    "cpu_seconds": "RLIMIT_CPU",
    "max_file_size_bytes": "RLIMIT_FSIZE",
    "max_open_files": "RLIMIT_NOFILE",
    "address_space_bytes": "RLIMIT_AS",
}
"""Fields an rlimit enforces with the same meaning, by the ``resource`` module's constant name."""

CGROUP_FIELDS: Final[Mapping[str, str]] = {
    "cgroup_memory_bytes": "memory",
    "cgroup_pids_max": "pids",
    "cpu_percent": "cpu",
}
"""Fields only a cgroup controller enforces, by controller."""

ALIASES: Final[Mapping[str, str]] = {"memory_bytes": "cgroup_memory_bytes", "max_processes": "cgroup_pids_max"}
"""The project's own names, by the seed field they are an alias of."""

_ORDER: Final = (*RLIMIT_FIELDS, *CGROUP_FIELDS)
KNOWN_RESOURCE_FIELDS: Final = (*_ORDER, *ALIASES)
"""Every ``capabilities.resources`` key this daemon knows: the canonical fields, then the aliases."""


@dataclass(frozen=True, slots=True)
class Declared:
    """One declared limit: its canonical field, the name the manifest used, its value."""

    field: str
    name: str
    value: int


def declared(caps: ResourceCaps) -> list[Declared]:
    """Every known limit the manifest declares, in a fixed order, under the name it used."""
    out: list[Declared] = []
    for field in _ORDER:
        value = getattr(caps, field)
        name = field
        if value is None:
            alias = next((a for a, f in ALIASES.items() if f == field), None)
            if alias is not None and getattr(caps, alias) is not None:
                value, name = getattr(caps, alias), alias
        if value is not None:
            out.append(Declared(field, name, int(value)))
    return out


@dataclass(frozen=True, slots=True)
class HostMechanisms:
    """What can bind a job here: the v2 controllers enabled in its cgroup, the v1 controllers
    whose hierarchy the daemon can write, and whether job cgroups are used at all.

    ``where`` names the host in a sentence and ``holder`` the process that makes the job cgroups
    there: this host and the daemon, or a Ray node and its keeper."""

    cgroup2: frozenset[str] = frozenset()
    cgroup1: frozenset[str] = frozenset()
    cgroups_off: bool = False
    where: str = "this host"
    holder: str = "the daemon"

    def mechanism(self, field: str) -> str | None:
        """How ``field`` is enforced here (``"cgroup v2 pids"``, ``"rlimit RLIMIT_CPU"``…), or None."""
        if field in RLIMIT_FIELDS:
            return f"rlimit {RLIMIT_FIELDS[field]}"
        controller = CGROUP_FIELDS.get(field)
        if controller is None:
            return None
        if controller in self.cgroup2:
            return f"cgroup v2 {controller}"
        if controller in self.cgroup1:
            return f"cgroup v1 {controller}"
        return None

    def why_not(self, field: str) -> str:
        """Why ``field`` has no mechanism here (one clause)."""
        controller = CGROUP_FIELDS.get(field)
        if controller is None:
            return f"this daemon does not know the resource field '{field}'"
        if self.cgroups_off:
            return f'job cgroups are off (job_cgroups = "off"), and only a {controller} controller can enforce it'
        return (
            f"{self.where} gives {self.holder} no {controller} controller: its job cgroups (cgroup v2) have none "
            f"enabled and no writable cgroup v1 {controller} hierarchy was found"
        )

    def to_dict(self) -> dict[str, str | None]:
        """Every known field with its mechanism here (None: none), for ``GET /status`` and doctor."""
        return {field: self.mechanism(field) for field in _ORDER}


@dataclass(frozen=True, slots=True)
class LimitPlan:
    """How each declared limit of one job is enforced: ``enforced`` maps the declared name to
    its mechanism, ``not_enforced`` to why it is not; ``cgroup`` the canonical cgroup fields to
    write with their values, by the cgroup version that takes them."""

    mode: Mode
    enforced: dict[str, str]
    not_enforced: dict[str, str]
    cgroup2: dict[str, int]
    cgroup1: dict[str, int]
    refused: tuple[str, str] | None = None
    """The first known field no mechanism enforces and its reason (refuses under ``enforce``)."""

    def report(self) -> dict[str, object]:
        """``effective_grants.resource_limits``."""
        return {"mode": self.mode, "enforced": dict(self.enforced), "not_enforced": dict(self.not_enforced)}

    def to_env(self) -> str:
        """The report as the capsule host reads it from :data:`LIMITS_ENV`."""
        return json.dumps(self.report(), separators=(",", ":"), sort_keys=True)


def plan_limits(caps: ResourceCaps, host: HostMechanisms, mode: Mode) -> LimitPlan:
    """The plan for one job's limits on this host under ``mode``."""
    enforced: dict[str, str] = {}
    not_enforced: dict[str, str] = {}
    v2: dict[str, int] = {}
    v1: dict[str, int] = {}
    refused: tuple[str, str] | None = None
    for d in declared(caps):
        how = host.mechanism(d.field)
        if how is None:
            why = host.why_not(d.field)
            not_enforced[d.name] = why
            if refused is None:
                refused = (d.name, why)
            continue
        enforced[d.name] = how
        if how.startswith("cgroup v2"):
            v2[d.field] = d.value
        elif how.startswith("cgroup v1"):
            v1[d.field] = d.value
    for key in caps.unknown_keys:
        not_enforced[key] = host.why_not(key)
    return LimitPlan(mode, enforced, not_enforced, v2, v1, refused)


def refusal(plan: LimitPlan, coords: str, host: HostMechanisms | None = None) -> str | None:
    """The launch's refusal under ``enforce`` (one sentence naming the field and the host the
    child was to run on), else None."""
    if plan.mode != "enforce" or plan.refused is None:
        return None
    host = host or HostMechanisms()
    name, why = plan.refused
    field = ALIASES.get(name, name)
    controller = CGROUP_FIELDS.get(field, "")
    return (
        f"{coords} declares capabilities.resources.{name}, which {host.where} cannot enforce ({why}); a launch "
        f"whose limit cannot be enforced is refused rather than run unlimited — give {host.holder} a delegated "
        f'cgroup with the {controller} controller (systemd: Delegate=yes), or set resource_limits = "advisory" '
        "to run it with the limit listed as not enforced"
    )


def which_limit(
    declared_fields: Collection[str],
    *,
    signal_number: int | None,
    pids_hits: int = 0,
    oom_kills: int = 0,
) -> str | None:
    """The canonical field the kernel's evidence names, when it names exactly one declared limit.

    Evidence: death by ``SIGXCPU`` (``cpu_seconds``) or ``SIGXFSZ`` (``max_file_size_bytes``); a
    fork the job's pids controller refused (``cgroup_pids_max``); an OOM kill in the job's memory
    cgroup (``cgroup_memory_bytes``). Counts are the increase over the run being judged.
    """
    named: list[str] = []
    if signal_number == signal.SIGXCPU and "cpu_seconds" in declared_fields:
        named.append("cpu_seconds")
    if signal_number == signal.SIGXFSZ and "max_file_size_bytes" in declared_fields:
        named.append("max_file_size_bytes")
    if pids_hits > 0 and "cgroup_pids_max" in declared_fields:
        named.append("cgroup_pids_max")
    if oom_kills > 0 and "cgroup_memory_bytes" in declared_fields:
        named.append("cgroup_memory_bytes")
    return named[0] if len(named) == 1 else None
