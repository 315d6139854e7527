"""Per-uid quotas at a real daemon: one local user's flood cannot fill the host for everyone."""

from __future__ import annotations

import os
from typing import Any

from tests.support.daemon import FakeClock, RunningDaemon
from tests.support.registry import EXAMPLES, RegistryBuilder
from tests.trust.attacker import NOBODY, request_as

CRED = "x-murmur-spawn-credential"


def _body(name: str = "orchestrator") -> dict[str, str]:
    return {"session_id": f"ses_{os.urandom(8).hex()}", "name": name, "version": "0.1.0"}


async def test_live_sessions_per_uid(daemon_factory: Any, registry: RegistryBuilder) -> None:
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    d: RunningDaemon = await daemon_factory(registry.root, spawn_allow=("orchestrator",), uid_max_live_sessions=3)
    creds = [(await d.register_top("orchestrator"))[1] for _ in range(2)]
    _, grant = await d.spawn(creds[0], "worker")
    await d.register_child(grant["approval"], "worker")  # a child counts for its parent's uid
    status, body, _, _ = await d.call("POST", "/register", json=_body())
    assert status == 403, body
    assert "per-user quota" in body["error"] and "uid_max_live_sessions" in body["error"] and "uid 0 " in body["error"]
    status, body = await d.spawn(creds[1], "worker")
    assert status == 403 and "uid_max_live_sessions" in body["error"], body
    # Another user is not held back by this one's sessions.
    status, answer = await request_as(NOBODY, d.url, "POST", "/register", _body())
    assert status == 200, answer
    # Ending one frees its place.
    status, _, _, _ = await d.call("POST", "/deregister", json={"outcome": "complete"}, headers={CRED: creds[1]})
    assert status == 200
    status, body, _, _ = await d.call("POST", "/register", json=_body())
    assert status == 200, body


async def test_registrations_per_minute_per_uid(daemon_factory: Any, registry: RegistryBuilder) -> None:
    registry.add("orchestrator")
    clock = FakeClock()
    d: RunningDaemon = await daemon_factory(
        registry.root, spawn_allow=("orchestrator",), clock=clock, uid_registrations_per_minute=4
    )
    for _ in range(4):
        _, cred = await d.register_top("orchestrator")
        await d.call("POST", "/deregister", json={"outcome": "complete"}, headers={CRED: cred})
        clock.advance(1_000)
    status, body, _, _ = await d.call("POST", "/register", json=_body())
    assert status == 403 and "uid_registrations_per_minute" in body["error"], body
    clock.advance(57_000)  # the first registration leaves the minute's window
    status, body, _, _ = await d.call("POST", "/register", json=_body())
    assert status == 200, body


async def test_live_jobs_per_uid(daemon_factory: Any) -> None:
    d: RunningDaemon = await daemon_factory(
        EXAMPLES / "registry", spawn_allow=("sleeper",), uid_max_live_jobs=1, stop_grace_secs=1.0
    )
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "sleeper", "version": "0.1.0", "task": "60"})
    assert status == 201, job
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "sleeper", "version": "0.1.0", "task": "60"})
    assert status == 403 and "uid_max_live_jobs" in body["error"], body
    status, view, _, _ = await d.call("POST", f"/jobs/{job['job_id']}/cancel")
    assert status == 200, view
    status, job2, _, _ = await d.call("POST", "/jobs", json={"name": "sleeper", "version": "0.1.0", "task": "60"})
    assert status == 201, job2
    await d.call("POST", f"/jobs/{job2['job_id']}/cancel")


async def test_a_refused_duplicate_uses_up_no_registration(daemon_factory: Any, registry: RegistryBuilder) -> None:
    """Re-registering the id of an ended session that only the database still holds is refused
    (403) after the rate check; the refused attempts must not take the user's minute."""
    registry.add("orchestrator")
    clock = FakeClock()
    d: RunningDaemon = await daemon_factory(
        registry.root, spawn_allow=("orchestrator",), clock=clock, uid_registrations_per_minute=2, session_memory_secs=1
    )
    sid, cred = await d.register_top("orchestrator")
    await d.call("POST", "/deregister", json={"outcome": "complete"}, headers={CRED: cred})
    clock.advance(2_000)
    await d.roost.retention.sweep()  # out of memory, still on disk
    assert d.roost.table.get(sid) is None
    for _ in range(5):
        body = {"session_id": sid, "name": "orchestrator", "version": "0.1.0"}
        status, answer, _, _ = await d.call("POST", "/register", json=body)
        assert status == 403 and "uid_registrations_per_minute" not in str(answer), answer
    status, body, _, _ = await d.call("POST", "/register", json=_body())  # the second of two
    assert status == 200, body
