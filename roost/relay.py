"""Service object for the A2A relay (POST /a2a/send and relays of tasks/get, tasks/cancel).

Constructed by :class:`roost.daemon.Roost` and started after the store is open, stopped before it
closes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roost.daemon import Roost

__all__ = ["Relay"]


class Relay:
    def __init__(self, roost: Roost) -> None:
        self.roost = roost

    async def start(self) -> None:
        """Nothing to start yet."""

    async def stop(self) -> None:
        """Nothing to stop yet."""
