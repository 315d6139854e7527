"""Fixtures for containment tests: real capsule hosts, real payloads, real kernels.

``capsules`` (from the capsule tests) starts ``roost-capsule run`` as a real process and fails
the test if anything it started is still alive at teardown.
"""

from __future__ import annotations

from tests.support.capsules import capsules

__all__ = ["capsules"]
