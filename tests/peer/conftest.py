"""Peer-plane fixtures: a daemon with two exporting capsules, sessions with real A2A doors.

``peer_env`` is a :class:`tests.support.peer.PeerEnv` over a daemon whose registry holds the
exporting capsules. ``no_token_leak`` (autouse) captures every structlog event of the test and,
afterwards, scans them and every ``trace.jsonl`` under the test's tmp dir for anything shaped
like a token: the peer plane must record ``<handle:ID>`` / ids only, whatever the test did.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from tests.support.daemon import RunningDaemon
from tests.support.peer import CAPS, PLANE, SECRET, TOKEN_RE, PeerEnv, Session
from tests.support.registry import RegistryBuilder

__all__ = ["CAPS", "PLANE", "SECRET", "PeerEnv", "Session", "no_token_leak", "peer_env", "peer_registry"]


@pytest.fixture
def peer_registry(registry: RegistryBuilder) -> RegistryBuilder:
    registry.add("alpha", capabilities=CAPS, extra={"exports": PLANE})
    registry.add("beta", capabilities=CAPS, extra={"exports": PLANE})
    registry.add("plain", capabilities=CAPS)  # no exports.peer_files
    registry.add("closed", capabilities={"network": {"allow": ["localhost"]}}, extra={"exports": PLANE})
    registry.add(
        "tiny",
        capabilities=CAPS,
        extra={"exports": {"peer_files": {"root": "share", "max_ttl": 60, "max_bytes": 1024}}},
    )
    return registry


@pytest.fixture
async def peer_env(daemon_factory: Any, peer_registry: RegistryBuilder, tmp_path: Path) -> AsyncIterator[PeerEnv]:
    d: RunningDaemon = await daemon_factory(
        peer_registry.root, spawn_allow=("alpha", "beta", "plain", "closed", "tiny")
    )
    env = PeerEnv(daemon=d, root=tmp_path / "work")
    env.root.mkdir()
    yield env
    for r in env.runners:
        await r.cleanup()


@pytest.fixture(autouse=True)
def no_token_leak(tmp_path: Path) -> Iterator[list[Any]]:
    with structlog.testing.capture_logs() as logs:
        yield logs
    for event in logs:
        assert not TOKEN_RE.search(repr(event)), f"a token reached a log event: {event.get('event')}"
    for trace in tmp_path.rglob("trace.jsonl"):
        text = trace.read_text()
        assert not TOKEN_RE.search(text), f"a token reached {trace}"
