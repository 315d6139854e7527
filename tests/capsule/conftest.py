"""Fixtures for running ``roost-capsule`` as a real subprocess next to an in-process daemon.

``capsules`` (defined in :mod:`tests.support.capsules`, with the helpers) kills every process at
teardown, and the teardown fails if anything that ran in the test's directories is still alive.
"""

from __future__ import annotations

from tests.support.capsules import capsules

__all__ = ["capsules"]
