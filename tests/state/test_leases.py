"""Session leases: a session whose process roost cannot watch ends when nobody renews it.

A real in-process daemon on a fake wall clock: the test moves the clock past the lease and the
daemon's own sweep (every few real seconds) ends what lapsed. Renewals are real HTTP calls, and
the last case is a real ``roost-capsule`` in a pid namespace of its own (so the pid it reports
cannot be verified and it holds a lease) renewing while it runs.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from roost.events import Subscription
from roost.referee import EXPIRY_SWEEP_SECS
from tests.support.capsules import CAPSULE_CMD, add_examples, base_env
from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder

CRED = "x-murmur-spawn-credential"
LEASE_SECS = 5.0
HANG_GUARD = 120.0


async def started(daemon_factory: Any, registry: RegistryBuilder, *allow: str) -> RunningDaemon:
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    d: RunningDaemon = await daemon_factory(
        registry.root, spawn_allow=allow or ("orchestrator",), session_lease_secs=LEASE_SECS
    )
    return d


async def status_of(d: RunningDaemon, sid: str) -> str:
    status, body, _, _ = await d.call("GET", f"/status/{sid}")
    assert status == 200, body
    return str(body["status"])


async def session_end(sid: str, sub: Subscription) -> dict[str, Any]:
    """The ``roost.session.end`` event of ``sid``, read from a subscription taken before the
    clock moved. The event comes after the session's status changed and its end was
    committed, so a status seen as ended does not yet say the event exists; the event does
    say the status has changed. The wait is only a guard against a hang."""
    while True:
        event = await asyncio.wait_for(sub.get(), HANG_GUARD)
        attrs = event.get("attributes", {})
        if event.get("operation") == "roost.session.end" and attrs.get("roost.session.id") == sid:
            return dict(event)


async def test_an_unrenewed_session_lapses_with_its_reason_and_an_event(
    daemon_factory: Any, registry: RegistryBuilder
) -> None:
    d = await started(daemon_factory, registry)
    sid, _cred = await d.register_top("orchestrator")  # no pid: roost cannot watch it
    assert sid in d.roost.referee.leases
    sub = d.roost.events.subscribe()
    try:
        d.clock.advance(int(LEASE_SECS * 1000) + 1)
        end = await session_end(sid, sub)
    finally:
        sub.close()
    assert end["attributes"]["roost.session.reason"].startswith("lease lapsed")
    assert end["attributes"]["roost.session.status"] == "failed"
    assert await status_of(d, sid) == "failed"
    rec = d.roost.table.get(sid)
    assert rec is not None and rec.end_reason is not None
    assert rec.end_reason.startswith("lease lapsed: no authenticated call from this session for 5 seconds")


async def test_renew_and_any_authenticated_call_keep_a_session_alive(
    daemon_factory: Any, registry: RegistryBuilder
) -> None:
    d = await started(daemon_factory, registry)
    sid, cred = await d.register_top("orchestrator")
    for _ in range(3):
        d.clock.advance(int(LEASE_SECS * 1000 * 0.6))
        status, body, _, _ = await d.call("POST", "/renew", headers={CRED: cred})
        assert status == 200 and body["lease_secs"] == LEASE_SECS, body
    d.clock.advance(int(LEASE_SECS * 1000 * 0.6))
    status, body = await d.spawn(cred, "worker")  # an authenticated call renews too
    assert status == 200, body
    d.clock.advance(int(LEASE_SECS * 1000 * 0.6))
    # 0.6 of a lease since the last call: the check the daemon's sweep makes ends nothing.
    assert await d.roost.referee.lapse_leases(d.clock()) == 0
    assert await status_of(d, sid) == "running"
    status, body, _, _ = await d.call("POST", "/renew", headers={"x-murmur-spawn-credential": "msc1.forged.AAAA"})
    assert status == 403
    sub = d.roost.events.subscribe()
    try:
        d.clock.advance(int(LEASE_SECS * 1000))
        end = await session_end(sid, sub)
    finally:
        sub.close()
    assert end["attributes"]["roost.session.reason"].startswith("lease lapsed")
    assert await status_of(d, sid) == "failed"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
async def test_roost_capsule_renews_its_lease_while_it_runs(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    add_examples(registry, "sleeper")
    d: RunningDaemon = await daemon_factory(registry.root, spawn_allow=("sleeper",), session_lease_secs=LEASE_SECS)
    workdir = tmp_path / "wd"
    workdir.mkdir()
    (workdir / "task.md").write_text("sleep 600 please\n")
    # In a pid namespace of its own the host reports a pid roost cannot verify, so its
    # session holds a lease, which only the host's own renewals keep alive.
    host = [*CAPSULE_CMD, "run", "sleeper@0.1.0", "--workdir", str(workdir), "--registry-path", str(registry.root)]
    # `sh` stays pid 1 of the namespace (it waits, it does not exec), so the host is pid 2 there.
    script = " ".join(shlex.quote(a) for a in [*host, "--json"]) + "; exit $?"
    proc = await asyncio.create_subprocess_exec(
        "unshare",
        "--pid",
        "--fork",
        "--kill-child",
        "sh",
        "-c",
        script,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=base_env(MURMUR_ROOST_URL=d.url, PYTHONPATH=":".join(sys.path)),
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line, (await proc.stderr.read()).decode() if proc.stderr else ""
        sid = json.loads(line)["session_id"]
        assert sid in d.roost.referee.leases, "the host's session should hold a lease"
        first = d.roost.referee.leases[sid]
        # Move the clock through three leases; the host's renewals (every third of a lease,
        # at least a second) must keep carrying the expiry forward.
        for _ in range(6):
            d.clock.advance(int(LEASE_SECS * 1000 / 2))
            await asyncio.sleep(EXPIRY_SWEEP_SECS * 2.5)
        assert await status_of(d, sid) == "running"
        assert d.roost.referee.leases[sid] > first
    finally:
        if proc.returncode is None:
            proc.kill()  # unshare waits out SIGTERM; its death kills the namespace (--kill-child)
        await asyncio.wait_for(proc.wait(), 30)
