"""Which daemon → door requests go through a node keeper, and the transport that carries them.

A session's door listens on its own node's loopback. For a session whose job runs on a Ray node,
``http://127.0.0.1:<port>`` means that node's loopback, which the daemon cannot dial; the daemon's
A2A client (a2a/client.py ``route``) asks :meth:`DoorRoutes.route` before each request, and a
request to such a door is made by the node's keeper instead (roost/backends/ray/node/doors.py).
Everything else (a door on this host, a peer that is not a session) is dialled directly.

Which session a loopback URL names: a completion names its receiver
(``x-murmur-completion-session``); otherwise the first running session registered with that
door origin, the same one the relay seals for. Two sessions on different nodes that registered
the same loopback port cannot be told apart by URL (docs/operations.md "Running with Ray").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from yarl import URL

from a2a.client import Transport
from a2a.door import COMPLETION_SESSION_HEADER
from roost.backends.base import ChildDir, NodeRef
from roost.backends.ray.node.doors import DoorRequest
from roost.core.loopback import is_loopback_host
from roost.state.sessions import SessionRecord, SessionTable

__all__ = ["DoorCaller", "DoorRoutes", "KeeperTransport"]


@runtime_checkable
class DoorCaller(Protocol):
    async def door_request(self, node: NodeRef, request: DoorRequest) -> tuple[int, bytes, str | None]:
        """``(status, body, location)`` of the exchange, made on ``node``; ``OSError`` when it fails."""
        ...


class KeeperTransport:
    """A request to one job's door, made by the keeper of the job's node."""

    def __init__(self, caller: DoorCaller, node: NodeRef, job_id: str, timeout_secs: float) -> None:
        self.caller = caller
        self.node = node
        self.job_id = job_id
        self.timeout_secs = timeout_secs

    async def __call__(
        self, method: str, url: URL, body: bytes | None, headers: Mapping[str, str]
    ) -> tuple[int, bytes, str | None]:
        port = url.port
        if port is None:
            raise OSError(f"the door URL {url.origin()} names no port")
        request = DoorRequest(self.job_id, method, port, url.raw_path_qs or "/", dict(headers), body, self.timeout_secs)
        return await self.caller.door_request(self.node, request)


def _origin(url: URL) -> tuple[str, int | None]:
    return (url.host or "", url.port)


class DoorRoutes:
    """The daemon A2A client's ``route``: a keeper transport for a door of a session on a node."""

    def __init__(
        self,
        caller: DoorCaller,
        table: SessionTable,
        remote_dir: Callable[[SessionRecord], ChildDir | None],
        timeout_secs: float,
    ) -> None:
        self._caller = caller
        self._table = table
        self._remote_dir = remote_dir
        self._timeout = timeout_secs

    def _session(self, url: URL, headers: Mapping[str, str]) -> SessionRecord | None:
        origin = _origin(url)
        named = headers.get(COMPLETION_SESSION_HEADER)
        if named:
            rec = self._table.get(named)
            if rec is not None and rec.capsule_url and _origin(URL(rec.capsule_url)) == origin:
                return rec
        for rec in self._table.iter_running():
            if rec.capsule_url and _origin(URL(rec.capsule_url)) == origin:
                return rec
        return None

    def route(self, url: URL, headers: Mapping[str, str]) -> Transport | None:
        if url.scheme != "http" or not is_loopback_host(url.host or ""):
            return None
        rec = self._session(url, headers)
        if rec is None:
            return None
        where = self._remote_dir(rec)
        if where is None or where.node is None:
            return None  # a door on this host
        return KeeperTransport(self._caller, where.node, where.job_id, self._timeout)
