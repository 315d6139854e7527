"""Which daemon → door requests a node keeper carries (roost/backends/ray/doors.py), and how a
routed request keeps the A2A client's rules (a2a/client.py ``route``)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from yarl import URL

from a2a.client import A2AClient
from a2a.door import COMPLETION_SESSION_HEADER
from a2a.protocol.errors import PeerHTTPError, PeerUnreachable
from roost.backends.base import ChildDir, NodeRef
from roost.backends.ray.doors import DoorRoutes, KeeperTransport
from roost.backends.ray.node.doors import DoorRequest
from roost.state.sessions import SessionRecord, SessionTable
from tests.support.records import running_session as _session

NODE_A = NodeRef("a" * 56, "10.0.0.1")
NODE_B = NodeRef("b" * 56, "10.0.0.2")


class Calls:
    """A door caller that records what it was asked and answers as told."""

    def __init__(self, answer: tuple[int, bytes, str | None] = (200, b"{}", None)) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str, str, int, str]] = []

    async def door_request(self, node: NodeRef, request: DoorRequest) -> tuple[int, bytes, str | None]:
        self.asked.append((node.node_id, request.job_id, request.method, request.port, request.path))
        return self.answer


def _routes(calls: Calls, *sessions: SessionRecord) -> DoorRoutes:
    table = SessionTable()
    for rec in sessions:
        table.add(rec)
    nodes = {"job_a": NODE_A, "job_b": NODE_B}

    def remote_dir(rec: SessionRecord) -> ChildDir | None:
        node = nodes.get(rec.job_id or "")
        return ChildDir(rec.job_id, "/w", None, None, node) if rec.job_id and node else None

    return DoorRoutes(calls, table, remote_dir, 7.0)


def test_a_door_of_a_session_on_a_node_goes_through_that_nodes_keeper() -> None:
    routes = _routes(Calls(), _session("ses_a", "http://127.0.0.1:4100", "job_a"))
    via = routes.route(URL("http://127.0.0.1:4100/a2a"), {})
    assert isinstance(via, KeeperTransport)
    assert (via.node, via.job_id, via.timeout_secs) == (NODE_A, "job_a", 7.0)


def test_other_urls_are_dialled_directly() -> None:
    routes = _routes(
        Calls(), _session("ses_a", "http://127.0.0.1:4100", "job_a"), _session("ses_l", "http://127.0.0.1:4200", None)
    )
    assert routes.route(URL("http://127.0.0.1:4200/"), {}) is None  # a session on this host
    assert routes.route(URL("http://127.0.0.1:4999/"), {}) is None  # no session's door
    assert routes.route(URL("http://10.0.0.9:4100/"), {}) is None  # not a loopback door


def test_a_completion_goes_to_the_node_of_the_session_it_names() -> None:
    # Two sessions on two nodes registered the same loopback port: the receiver decides.
    a = _session("ses_a", "http://127.0.0.1:4100", "job_a")
    b = _session("ses_b", "http://127.0.0.1:4100", "job_b")
    routes = _routes(Calls(), a, b)
    via = routes.route(URL("http://127.0.0.1:4100/"), {COMPLETION_SESSION_HEADER: "ses_b"})
    assert isinstance(via, KeeperTransport) and via.node == NODE_B


class _Routed:
    def __init__(self, transport: KeeperTransport) -> None:
        self.transport = transport

    def __call__(self, url: URL, headers: Mapping[str, str]) -> KeeperTransport:
        return self.transport


async def test_a_routed_request_keeps_the_clients_rules() -> None:
    calls = Calls((307, b"", "http://elsewhere/"))
    async with A2AClient(route=_Routed(KeeperTransport(calls, NODE_A, "job_a", 5.0))) as client:
        with pytest.raises(PeerHTTPError, match="never redirected"):
            await client.fetch_card("http://127.0.0.1:4100")
    assert calls.asked == [(NODE_A.node_id, "job_a", "GET", 4100, "/.well-known/agent-card.json")]

    class Down(Calls):
        async def door_request(self, *args: object, **kw: object) -> tuple[int, bytes, str | None]:
            raise OSError("on Ray node aaaa: the door on its node did not accept the connection")

    async with A2AClient(route=_Routed(KeeperTransport(Down(), NODE_A, "job_a", 5.0))) as client:
        with pytest.raises(PeerUnreachable, match="did not accept the connection"):
            await client.fetch_card("http://127.0.0.1:4100")
