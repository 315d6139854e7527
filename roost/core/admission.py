"""Whether a new capsule may start: one decision for a top-level start, one for a delegated spawn.

A top-level session can begin two ways — an upstream runtime registering itself without an
approval, or the launcher starting a job nobody delegated — and both must refuse for the same
reasons in the same order: the daemon is draining, the capsule is not in ``--spawn-allow``, the
host's live-capsule ceiling is reached. Deciding here, with no I/O and no sentences, keeps the
two edges from drifting apart; each edge renders the :data:`Refusal` value in its own words
(:mod:`roost.core.refusals`): ``/register`` byte for byte as upstream, ``/jobs`` and ``roostctl`` in
theirs.

A delegated spawn (``POST /spawn``, and ``POST /jobs`` with a credential, which goes through the
same referee call) is bounded by :func:`admit_spawn`: the parent's remaining depth, the host's
ceiling, the parent's live children and its user's live sessions, in upstream's order.

The caller reads the daemon's state (draining flag, allow list, live counts) and calls these
with no await between the read, the decision and the reservation it takes on the strength of it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from roost.core.allownames import DEFAULT_REGISTRY_NAME, allows

__all__ = [
    "CeilingReached",
    "ConcurrencyReached",
    "DepthExhausted",
    "Draining",
    "NotInSpawnAllow",
    "Refusal",
    "SpawnLimits",
    "SpawnRefusal",
    "UidSessionsReached",
    "admit_spawn",
    "admit_top_level",
]


@dataclass(frozen=True, slots=True)
class Draining:
    """The daemon is draining: it finishes what runs and starts nothing new."""


@dataclass(frozen=True, slots=True)
class NotInSpawnAllow:
    """The capsule's name is not in the daemon's ``--spawn-allow`` list."""

    name: str


@dataclass(frozen=True, slots=True)
class CeilingReached:
    """The host already holds ``live`` capsules and allows at most ``limit``."""

    limit: int
    live: int


Refusal = Draining | NotInSpawnAllow | CeilingReached
"""Why a top-level start was refused; ``None`` from :func:`admit_top_level` means admitted."""


def admit_top_level(
    name: str,
    *,
    draining: bool,
    spawn_allow: Collection[str],
    live_capsules: int | None = None,
    max_live_capsules: int = 0,
    registry: str = DEFAULT_REGISTRY_NAME,
) -> Refusal | None:
    """Admit a top-level capsule ``name``, or say the first reason it is refused.

    Checked in upstream's order: draining, then the allow list, then the ceiling.
    ``live_capsules`` is what already counts against ``max_live_capsules`` (the launcher adds
    the starts it holds); ``None`` skips the ceiling, as ``/register`` does for a top-level
    session (upstream bounds the capsules a session spawns, not the ones that register).
    """
    if draining:
        return Draining()
    if not allows(spawn_allow, name, registry):  # ``local/worker`` admits ``worker`` (roost/core/allownames.py)
        return NotInSpawnAllow(name)
    if live_capsules is not None and live_capsules >= max_live_capsules:
        return CeilingReached(max_live_capsules, live_capsules)
    return None


@dataclass(frozen=True, slots=True)
class DepthExhausted:
    """The parent has no delegation depth left (the daemon allows ``max_depth`` levels)."""

    max_depth: int


@dataclass(frozen=True, slots=True)
class ConcurrencyReached:
    """The parent already holds ``live`` children (running or granted) of ``limit``."""

    limit: int
    live: int


@dataclass(frozen=True, slots=True)
class UidSessionsReached:
    """The parent's user already holds ``live`` live sessions of ``limit``."""

    uid: int | None
    limit: int
    live: int


SpawnRefusal = DepthExhausted | CeilingReached | ConcurrencyReached | UidSessionsReached
"""Why a delegated spawn was refused; ``None`` from :func:`admit_spawn` means within bounds."""


@dataclass(frozen=True, slots=True)
class SpawnLimits:
    """The bounds a delegated spawn is checked against (from the daemon's configuration)."""

    max_depth: int
    max_live_capsules: int
    max_concurrent: int
    uid_live_sessions: int


def admit_spawn(
    limits: SpawnLimits,
    *,
    depth_remaining: int,
    live_capsules: int,
    live_children: int,
    uid: int | None,
    uid_live: int,
) -> SpawnRefusal | None:
    """The first bound a spawn by a parent in this state breaks, in upstream's order, or None."""
    if depth_remaining <= 0:
        return DepthExhausted(limits.max_depth)
    if live_capsules >= limits.max_live_capsules:
        return CeilingReached(limits.max_live_capsules, live_capsules)
    if live_children >= limits.max_concurrent:
        return ConcurrencyReached(limits.max_concurrent, live_children)
    if uid_live >= limits.uid_live_sessions:
        return UidSessionsReached(uid, limits.uid_live_sessions, uid_live)
    return None
