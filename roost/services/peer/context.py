"""What the peer plane's mint, redeem and fetch steps need from the service that runs them.

A :class:`typing.Protocol` rather than :class:`roost.services.peer.plane.PeerPlane` itself, so the steps
do not import the plane that imports them, and a step can be exercised with any object that
offers these (docs/architecture.md, "The import direction").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import aiohttp

from a2a.client import A2AClient
from roost.observe.events import EventBus
from roost.observe.metrics import Metrics
from roost.observe.tracesink import TraceSink
from roost.services.peer.files import SessionFiles
from roost.state.config import Config
from roost.state.keys import KeyRing
from roost.state.sessions import SessionRecord, SessionTable
from roost.system.blocking import BlockingExecutor

__all__ = ["PeerServices"]


class PeerServices(Protocol):
    @property
    def config(self) -> Config: ...

    @property
    def keys(self) -> KeyRing: ...

    @property
    def verifying(self) -> tuple[KeyRing, ...]:
        """The rings a handle may verify under: the one in force, and a replaced one in its grace."""
        ...

    @property
    def table(self) -> SessionTable: ...

    @property
    def events(self) -> EventBus: ...

    @property
    def metrics(self) -> Metrics: ...

    @property
    def executor(self) -> BlockingExecutor: ...

    @property
    def a2a(self) -> A2AClient: ...

    @property
    def traces(self) -> TraceSink: ...

    @property
    def files(self) -> SessionFiles:
        """Where sessions' exported files are read and fetched files stored (this host, or a node)."""

    @property
    def clock(self) -> Callable[[], int]: ...

    def http(self) -> aiohttp.ClientSession:
        """The fetch side's HTTP client."""

    async def trace(self, rec: SessionRecord, event_type: str, payload: dict[str, object]) -> None:
        """Append a redeem's trace line (grouped with others); return once it is written."""
