"""Peer-plane fixtures: a daemon with two exporting capsules, sessions with real A2A doors.

``peer_env`` (from :mod:`tests.support.peer`) is a :class:`tests.support.peer.PeerEnv` over a
daemon whose registry holds the exporting capsules. ``no_token_leak`` (autouse) captures every
structlog event of the test and, afterwards, scans them and every ``trace.jsonl`` under the
test's tmp dir for anything shaped like a token: the peer plane must record ``<handle:ID>`` /
ids only, whatever the test did.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from tests.support.peer import TOKEN_RE, peer_env, peer_registry

__all__ = ["no_token_leak", "peer_env", "peer_registry"]


@pytest.fixture(autouse=True)
def no_token_leak(tmp_path: Path) -> Iterator[list[Any]]:
    with structlog.testing.capture_logs() as logs:
        yield logs
    for event in logs:
        assert not TOKEN_RE.search(repr(event)), f"a token reached a log event: {event.get('event')}"
    for trace in tmp_path.rglob("trace.jsonl"):
        text = trace.read_text()
        assert not TOKEN_RE.search(text), f"a token reached {trace}"
