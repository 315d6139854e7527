"""Allow-list entries that name a registry: ``local/worker`` matches a spawn of ``worker``.

Seed 002 names a capsule in ``capabilities.spawn.allow`` by its registry and name (``worker``
for ``local/worker``). The daemon resolves every spawn from its one registry, which has a name
(``registry_name``, ``local`` by default; ``roostctl registry ls`` shows it). So an entry
``<registry>/<name>`` is the bare ``<name>`` when ``<registry>`` is the daemon's registry, and
matches nothing here otherwise (a capsule of another registry is never resolved by this daemon).
A bare entry keeps matching exactly, as upstream's referee does.

The same normalisation applies wherever allow lists are compared: the parent's
``spawn.allow`` against a spawned name (``POST /spawn``, ``POST /jobs``), the daemon's
``spawn_allow`` against a top-level name, and the spawn envelope's ``capabilities.spawn.allow``
axis (a child's ``local/worker`` is within a parent's ``worker`` and the other way round).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

__all__ = ["DEFAULT_REGISTRY_NAME", "allows", "normalise", "normalised"]

DEFAULT_REGISTRY_NAME = "local"


def normalise(entry: str, registry: str) -> str:
    """``entry`` as this daemon compares it: ``<registry>/<name>`` of its own registry is ``<name>``;
    anything else is left as it is (another registry's entry stays qualified, so it matches no name)."""
    prefix, sep, name = entry.partition("/")
    if sep and prefix == registry and name and "/" not in name:
        return name
    return entry


def normalised(entries: Iterable[str], registry: str) -> tuple[str, ...]:
    """Every entry normalised, in order."""
    return tuple(normalise(e, registry) for e in entries)


def allows(entries: Collection[str], name: str, registry: str) -> bool:
    """Whether an allow list admits a spawn of the bare ``name`` resolved from ``registry``."""
    if name in entries:
        return True
    qualified = f"{registry}/{name}"
    return qualified in entries
