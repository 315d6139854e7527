"""The relay's door lookup (which registered session serves a URL's origin) stays bounded and right."""

from __future__ import annotations

from typing import Any, cast

from roost.services.relay import Relay
from roost.state.sessions import SessionTable
from tests.support.records import running_session


def _relay(table: SessionTable) -> Relay:
    unused = cast(Any, None)  # the lookup reads only the session table
    return Relay(sessions=unused, doors=unused, table=table, a2a=unused, events=unused, metrics=unused, traces=unused)


def test_origins_dialled_between_registrations_stay_bounded_and_doors_are_still_found() -> None:
    table = SessionTable()
    table.add(running_session("ses_door", "http://127.0.0.1:40000"))
    relay = _relay(table)
    assert relay._receiver("http://127.0.0.1:40000/a2a/jsonrpc") == "ses_door"
    for port in range(41000, 41000 + 5000):  # a session dialling every port it may
        assert relay._receiver(f"http://127.0.0.1:{port}/") is None
        assert len(relay._doors) <= 4096
    assert relay._receiver("http://127.0.0.1:40000/") == "ses_door"  # found again after the clear
