"""Whether a new top-level capsule may start: one decision for ``/register`` and ``POST /jobs``.

A top-level session can begin two ways — an upstream runtime registering itself without an
approval, or the launcher starting a job nobody delegated — and both must refuse for the same
reasons in the same order: the daemon is draining, the capsule is not in ``--spawn-allow``, the
host's live-capsule ceiling is reached. Deciding here, with no I/O and no sentences, keeps the
two edges from drifting apart; each edge renders the :data:`Refusal` value in its own words
(:mod:`roost.refusals`): ``/register`` byte for byte as upstream, ``/jobs`` and ``roostctl`` in
theirs.

The caller reads the daemon's state (draining flag, allow list, live count) and calls
:func:`admit_top_level` with no await between the read, the decision and the reservation it
takes on the strength of it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

__all__ = ["CeilingReached", "Draining", "NotInSpawnAllow", "Refusal", "admit_top_level"]


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
) -> Refusal | None:
    """Admit a top-level capsule ``name``, or say the first reason it is refused.

    Checked in upstream's order: draining, then the allow list, then the ceiling.
    ``live_capsules`` is what already counts against ``max_live_capsules`` (the launcher adds
    the starts it holds); ``None`` skips the ceiling, as ``/register`` does for a top-level
    session (upstream bounds the capsules a session spawns, not the ones that register).
    """
    if draining:
        return Draining()
    if name not in spawn_allow:
        return NotInSpawnAllow(name)
    if live_capsules is not None and live_capsules >= max_live_capsules:
        return CeilingReached(max_live_capsules, live_capsules)
    return None
