"""Launcher fixtures: the orphan guard (after the suite, nothing this suite started is left) and
a parent door that records or refuses every completion delivered to it.

Both are defined in :mod:`tests.support.launcher`, beside the helpers (runtime doubles, waiting
for a job), so the chaos and containment tests use the very same ones.
"""

from __future__ import annotations

from tests.support.launcher import no_orphans, parent_door

__all__ = ["no_orphans", "parent_door"]
