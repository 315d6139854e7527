"""Service object for the peer plane (mint, redeem and fetch of mh1 peer-file handles).

Constructed by :class:`roost.daemon.Roost` and started after the store is open, stopped before it
closes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roost.daemon import Roost

__all__ = ["PeerPlane"]


class PeerPlane:
    def __init__(self, roost: Roost) -> None:
        self.roost = roost

    async def start(self) -> None:
        """Nothing to start yet."""

    async def stop(self) -> None:
        """Nothing to stop yet."""
