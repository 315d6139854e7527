"""The launcher's fixtures (parent door, orphan guard) for the chaos tests."""

from tests.support.launcher import no_orphans, parent_door

__all__ = ["no_orphans", "parent_door"]
