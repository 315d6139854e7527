"""``capabilities.resources`` as rlimits, set in the entrypoint's child just before it execs.

Why there and not on the host: the limits bind the entrypoint's process tree (rlimits are
inherited across fork and exec), and the host itself needs more address space than a small
limit allows. Setting them between fork and exec closes the window a ``prlimit`` after the spawn
leaves open: the entrypoint's first instruction already runs under them.
"""

from __future__ import annotations

import resource
from collections.abc import Sequence

from roost.core.manifest import ResourceCaps

__all__ = ["RLIMITS", "apply_rlimits", "rlimit_plan"]

RLIMITS: tuple[tuple[str, int], ...] = (
    ("cpu_seconds", resource.RLIMIT_CPU),
    ("max_file_size_bytes", resource.RLIMIT_FSIZE),
    ("max_open_files", resource.RLIMIT_NOFILE),
    ("address_space_bytes", resource.RLIMIT_AS),
    ("max_processes", resource.RLIMIT_NPROC),
)


def rlimit_plan(caps: ResourceCaps) -> list[tuple[int, int]]:
    """``(resource, value)`` for each declared limit, capped by the host's current hard limit."""
    plan: list[tuple[int, int]] = []
    for attr, which in RLIMITS:
        value = getattr(caps, attr)
        if value is None:
            continue
        _soft, hard = resource.getrlimit(which)
        plan.append((which, value if hard == resource.RLIM_INFINITY else min(value, hard)))
    return plan


def apply_rlimits(plan: Sequence[tuple[int, int]]) -> None:
    """Set each limit (soft = hard); runs in the forked child, so it only raises OSError."""
    for which, value in plan:
        resource.setrlimit(which, (value, value))
