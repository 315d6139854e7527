"""Proof that this process (the daemon, and a dashboard run in it) never opens a node's files.

Each test node has a root of its own that the daemon is never told about (tests/cluster/conftest.py).
A Python audit hook watches this process: while :func:`daemon_stays_off` is on, every file or
directory it opens or lists below the watched base is recorded, so a test can show that a record
of a remote child reached the daemon through the node's keeper, not through a disk the daemon
happened to share with the node.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["daemon_stays_off"]

# Paths this process opened or listed below the watched directory while a watch was on.
_WATCH: dict[str, Any] = {"base": None, "seen": []}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    base = _WATCH["base"]
    if base is None or event not in ("open", "os.listdir", "os.scandir"):
        return
    path = args[0] if args else None
    if isinstance(path, bytes):
        path = path.decode("utf-8", "replace")
    if isinstance(path, str) and (path.startswith(base) or path == "trace.jsonl"):
        _WATCH["seen"].append((event, path))


sys.addaudithook(_audit)


@contextmanager
def daemon_stays_off(base: Path) -> Iterator[list[tuple[str, str]]]:
    """Record every file or directory this process opens below ``base`` (and any relative open
    of a ``trace.jsonl``, which is how a local trace writer opens one)."""
    seen: list[tuple[str, str]] = []
    _WATCH["base"], _WATCH["seen"] = str(base), seen
    try:
        yield seen
    finally:
        _WATCH["base"] = None
