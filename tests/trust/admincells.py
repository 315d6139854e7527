"""The admin socket's routes as matrix cells: a sample request per route and what the operator
(root, not inside a job) is answered (tests/trust/matrix.py)."""

from __future__ import annotations

from typing import Any

from tests.trust.matrix import Expect, Sample

__all__ = ["ADMIN_ENDS", "admin_expect", "admin_sample"]

ADMIN_ENDS = (
    ("POST", "/jobs/{job_id}/cancel"),
    ("POST", "/sessions/{session_id}/end"),
    ("POST", "/keys/rotate"),
    ("POST", "/drain"),
)
"""Routes whose allowed call ends or changes what later cells use: driven last, in this order."""

_QUERY = {"/records/{ident}": "?name=input.json", "/events": "?replay=1", "/logs/{ident}": "?tail=5"}
_BODIES: dict[str, Any] = {"/jobs": {"name": "solo", "version": "0.1.0", "task": "sleep 30"}}


def admin_sample(key: tuple[str, str], session_id: str, job_id: str) -> Sample:
    """A concrete admin request naming a live session and job (a job is also an ``ident``)."""
    method, route = key
    path = route.replace("{session_id}", session_id).replace("{job_id}", job_id).replace("{ident}", job_id)
    body = _BODIES.get(route, {}) if method == "POST" else None
    return Sample(method, path + _QUERY.get(route, ""), body)


_OPERATOR: dict[tuple[str, str], Expect] = {
    ("GET", "/status"): Expect(200, contains="draining"),
    ("GET", "/history"): Expect(200),
    ("GET", "/config"): Expect(200, contains="spawn_allow"),
    ("GET", "/drain"): Expect(200),
    ("POST", "/drain"): Expect(200, contains="active_jobs"),
    ("POST", "/keys/rotate"): Expect(200),
    ("POST", "/reload"): Expect(200),
    ("POST", "/registry/forget"): Expect(200, contains="forgotten"),
    ("GET", "/metrics"): Expect(200, contains="roost_"),
    ("GET", "/livez"): Expect(200),
    ("GET", "/readyz"): Expect(200),
    ("GET", "/sessions"): Expect(200),
    ("GET", "/sessions/{session_id}"): Expect(200),
    ("POST", "/sessions/{session_id}/end"): Expect(200),
    ("GET", "/tree"): Expect(200),
    ("GET", "/jobs"): Expect(200),
    ("GET", "/jobs/{job_id}"): Expect(200, contains="job_id"),
    ("POST", "/jobs"): Expect(201, contains="job_id"),
    ("POST", "/jobs/{job_id}/cancel"): Expect(200, contains="terminated"),
    ("GET", "/reconcile"): Expect(200),
    ("GET", "/events"): Expect(200, contains="events"),
    ("GET", "/logs/{ident}"): Expect(200, contains="lines"),
    ("GET", "/records/{ident}"): Expect(200, contains="sleep 60"),
    ("GET", "/cluster"): Expect(200, contains="launcher"),
}


def admin_expect(key: tuple[str, str]) -> Expect:
    """What an admin route answers the operator (every route has a line: a new one fails here)."""
    assert key in _OPERATOR, f"the admin route {key} has no expected answer in tests/trust/admincells.py"
    return _OPERATOR[key]
