"""Typed application keys: one per service a route may use, shared by the TCP and admin apps.

Why one key per service and not the daemon: a route module then names exactly what it uses,
and a service can be swapped for a test double of its interface without building a daemon.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from roost.observe.metrics import Metrics
    from roost.observe.probes import Probes
    from roost.services.launcher.service import Launcher
    from roost.services.peer.plane import PeerPlane
    from roost.services.referee.service import Referee
    from roost.services.relay import Relay
    from roost.state.keys import KeyHolder
    from roost.state.lifecycle import Lifecycle
    from roost.state.settings import Settings
    from roost.system.blocking import BlockingExecutor

__all__ = [
    "EXECUTOR",
    "KEYS",
    "LAUNCHER",
    "LIFECYCLE",
    "METRICS",
    "PEER_PLANE",
    "PROBES",
    "REFEREE",
    "RELAY",
    "SETTINGS",
    "Services",
]

REFEREE: web.AppKey[Referee] = web.AppKey("referee")
RELAY: web.AppKey[Relay] = web.AppKey("relay")
PEER_PLANE: web.AppKey[PeerPlane] = web.AppKey("peer_plane")
LAUNCHER: web.AppKey[Launcher] = web.AppKey("launcher")
PROBES: web.AppKey[Probes] = web.AppKey("probes")
SETTINGS: web.AppKey[Settings] = web.AppKey("settings")
KEYS: web.AppKey[KeyHolder] = web.AppKey("keys")
EXECUTOR: web.AppKey[BlockingExecutor] = web.AppKey("executor")
METRICS: web.AppKey[Metrics] = web.AppKey("metrics")
LIFECYCLE: web.AppKey[Lifecycle] = web.AppKey("lifecycle")


@dataclass(frozen=True, slots=True)
class Services:
    """The services routes may use, as the composition root built them."""

    referee: Referee
    relay: Relay
    peer_plane: PeerPlane
    launcher: Launcher
    probes: Probes
    settings: Settings
    keys: KeyHolder
    executor: BlockingExecutor
    metrics: Metrics
    lifecycle: Lifecycle

    def install(self, app: web.Application) -> None:
        """Put each service under its key (both apps serve routes that use them)."""
        app[REFEREE] = self.referee
        app[RELAY] = self.relay
        app[PEER_PLANE] = self.peer_plane
        app[LAUNCHER] = self.launcher
        app[PROBES] = self.probes
        app[SETTINGS] = self.settings
        app[KEYS] = self.keys
        app[EXECUTOR] = self.executor
        app[METRICS] = self.metrics
        app[LIFECYCLE] = self.lifecycle
