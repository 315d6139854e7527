"""The daemon's TCP routes as matrix cells: a live world to name, a sample request per route, and
what each route's own check answers a caller the table lets through (tests/trust/matrix.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from roost.core.authz import Listener, Policy, Who
from roost.core.errors import IDENTITY_REFUSAL
from roost.http.authz import TABLES, policy_for
from roost.http.job_routes import LAUNCH_IN_JOB
from roost.http.referee_routes import REGISTER_IN_JOB
from tests.trust.matrix import FORGED, Expect, Sample

__all__ = ["DAEMON_CLASSES", "ENDS", "World", "daemon_expect", "daemon_sample", "token_headers"]

DAEMON_CLASSES = ("rebound", "cross_site", "other_uid", "forged", "root", "other_session", "own")
"""The order each route is driven in: refusals first, the callers whose call may end something last."""

ENDS = (("POST", "/jobs/{job_id}/cancel"), ("POST", "/deregister"))
"""Routes whose allowed call ends what the rest of the matrix still names: driven last, in this order."""


@dataclass
class World:
    """The live things the samples name: two top-level sessions of ``boss`` with workdirs
    (``own`` and ``other``), and a child job ``own`` delegated (``job``)."""

    own_sid: str
    own_cred: str
    other_sid: str
    other_cred: str
    job: str


def token_headers(caller: str, world: World) -> dict[str, str]:
    """The tokens a caller class presents (root, another uid, a browser: none)."""
    if caller == "own":
        return {"x-murmur-spawn-credential": world.own_cred}
    if caller == "other_session":
        return {"x-murmur-spawn-credential": world.other_cred}
    if caller == "forged":
        return {
            "x-murmur-spawn-credential": FORGED,
            "x-murmur-spawn-approval": "mapr1.AAAA.BBBB",
            "authorization": "Bearer mnk1.AAAA.BBBB",
        }
    return {}


_BODIES: dict[str, Any] = {
    "/spawn": {"name": "kid", "version": "0.1.0"},
    "/deregister": {"outcome": "complete"},
    "/renew": {},
    "/jobs": {"name": "boss", "version": "0.1.0", "task": "sleep 30"},
    "/a2a/send": {"peer_url": "http://127.0.0.1:9", "text": "hi"},
    "/a2a/tasks/get": {"peer_url": "http://127.0.0.1:9", "task_id": "t"},
    "/a2a/tasks/cancel": {"peer_url": "http://127.0.0.1:9", "task_id": "t"},
    "/handles": {"path": "x", "peer": "p@127.0.0.1:9"},
    "/peer-fetch": {"peer": "http://127.0.0.1:9", "handle": "mh1.x.y"},
}


def daemon_sample(key: tuple[str, str], world: World) -> Sample:
    """A concrete request for a daemon route, naming the world's live ids (a registration's
    session id is new each time)."""
    method, path = key
    path = (
        path.replace("{session_id}", world.own_sid)
        .replace("{job_id}", world.job)
        .replace("{tail}", "mh1.AAAA.BBBB")
        .replace("{sha256}", "0" * 64)
    )
    if method == "*":
        return Sample("GET", path)
    if path == "/register":
        body = {"session_id": "ses_" + os.urandom(8).hex(), "name": "boss", "version": "0.1.0"}
        return Sample(method, path, body)
    return Sample(method, path, _BODIES.get(path) if method == "POST" else None)


_VALID = ("own", "other_session")


def daemon_expect(key: tuple[str, str], caller: str) -> Expect:
    """What a daemon route's own check answers a local caller the table let through."""
    policy = policy_for(TABLES[Listener.DAEMON], *key)
    assert isinstance(policy, Policy), key
    return _by_who(policy.who, key, caller)


def _by_who(who: Who, key: tuple[str, str], caller: str) -> Expect:
    identity = Expect(403, IDENTITY_REFUSAL)
    if who in (Who.ANYONE, Who.LOCAL):
        return Expect(200)
    if who is Who.CREDENTIAL:
        return _CREDENTIAL_OK[key[1]] if caller in _VALID else identity
    if who is Who.REGISTER:
        if caller == "in_capsule":  # no top-level session of its own: its credential would launch
            return Expect(403, REGISTER_IN_JOB)
        return identity if caller == "forged" else Expect(200, contains="credential")
    if who is Who.LAUNCH:
        if caller == "forged":
            return identity
        if caller == "in_capsule":  # no top-level launch outside its own envelope
            return Expect(403, LAUNCH_IN_JOB)
        if caller == "other_uid":
            return Expect(403, contains="launch_uids")
        return Expect(201, contains="job_id")
    if who is Who.JOB:
        if caller == "forged":
            return identity
        # A cross-site page reads as the browser's root (the same-origin policy keeps the answer
        # from the page); root's process not inside a job sees every job.
        return (
            Expect(200, contains="job_id") if caller in ("root", "own", "cross_site") else Expect(404, "job not found")
        )
    if who is Who.HANDLE:
        # A credential at a redeem says which session's door it came through: checked first.
        if caller == "forged":
            return identity
        return (
            Expect(400, contains="missing_audience") if key[1].endswith("{tail}") else Expect(404, contains="not_found")
        )
    if who is Who.KEEPER:
        return identity  # on this host too, only a node keeper's token is an answer
    raise AssertionError(f"no daemon route answers {who}")


_CREDENTIAL_OK: dict[str, Expect] = {
    "/spawn": Expect(200, contains="approval"),
    "/deregister": Expect(200, contains="{}"),
    "/renew": Expect(200, contains="lease_expires_at_ms"),
    "/a2a/send": Expect(403, contains="network policy"),
    "/a2a/tasks/get": Expect(403, contains="network policy"),
    "/a2a/tasks/cancel": Expect(403, contains="network policy"),
    "/handles": Expect(404, contains="no_peer_plane"),
    "/peer-fetch": Expect(403, contains="peer_not_allowed"),
}
