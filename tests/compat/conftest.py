"""Fixtures for the compatibility tests: real capsule hosts (the containment tests' ``capsules``)."""

from __future__ import annotations

from tests.support.capsules import capsules

__all__ = ["capsules"]
