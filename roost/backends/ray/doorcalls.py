"""The daemon's side of a request to a door on a Ray node: made there by the node's keeper.

Why its own module: a session's door listens on its own node's loopback, which the daemon
cannot dial. Which requests go this way is decided without Ray (roost/backends/ray/doors.py, which
the daemon imports whatever its launcher); the keeper makes the exchange on its node
(roost/backends/ray/node/doors.py). This is the call between the two, and the one sentence a
failed exchange becomes: ``OSError``, as the A2A client's transports fail.
"""

from __future__ import annotations

from ray.exceptions import RayError

from roost.backends.base import BackendError, NodeRef
from roost.backends.ray.keepers import Keepers, cause
from roost.backends.ray.node.doors import DoorRequest

__all__ = ["KeeperDoorCaller"]


class KeeperDoorCaller:
    """A :class:`roost.backends.ray.doors.DoorCaller` through the keeper of the door's node."""

    def __init__(self, keepers: Keepers) -> None:
        self.keepers = keepers

    async def door_request(self, node: NodeRef, request: DoorRequest) -> tuple[int, bytes, str | None]:
        """One HTTP exchange with the door of a child on ``node``, made there by its keeper
        (the door listens on that node's loopback); ``OSError`` with a sentence when it fails."""
        try:
            keeper = await self.keepers.at(node)
            answer = await self.keepers.call(keeper.door_request, request)
        except (RayError, BackendError) as exc:
            raise OSError(f"through the keeper of Ray node {node.node_id}: {cause(exc)}") from None
        if "error" in answer:
            raise OSError(f"on Ray node {node.node_id}: {answer['error']}")
        location = answer.get("location")
        return int(answer["status"]), bytes(answer["body"]), str(location) if location is not None else None
