"""Session leases: a session whose process roost cannot watch ends when nobody renews it.

A real in-process daemon on a fake wall clock: the test moves the clock past the lease and the
daemon's own sweep (every few real seconds) ends what lapsed. Renewals are real HTTP calls, and
the last case is a real ``roost-capsule`` in a pid namespace of its own (so the pid it reports
cannot be verified and it holds a lease) renewing while it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import shutil
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from roost.core.finalize import PARENT_ENDED_REASON
from roost.observe.events import Subscription
from roost.services.referee.service import EXPIRY_SWEEP_SECS
from tests.support.capsules import CAPSULE_CMD, add_examples, base_env
from tests.support.daemon import DaemonProcess, FakeClock, RunningDaemon, start_daemon_process
from tests.support.launcher import DOUBLE, RUNTIME, add_doubles, job_final, wait_for
from tests.support.registry import RegistryBuilder

CRED = "x-murmur-spawn-credential"
LEASE_SECS = 5.0
HANG_GUARD = 120.0
EOF_GUARD = 30.0  # a child reads EOF at once; under the pytest timeout, so a miss names its step


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


async def test_a_top_level_job_whose_child_is_unverifiable_outlives_the_lease(
    daemon_factory: Any, registry: RegistryBuilder
) -> None:
    """Its child registers with no pid (so /register grants a lease), but the launcher watches
    the child's process: once the job links the session, a lapse must not end it under the job."""
    add_doubles(registry)
    d: RunningDaemon = await daemon_factory(
        registry.root, spawn_allow=("solo",), runtime_command=RUNTIME, session_lease_secs=LEASE_SECS
    )
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "solo", "version": "0.1.0", "task": "no-pid hang"})
    assert status == 201, job
    sid = d.roost.launcher.jobs[job["job_id"]].session_id
    assert sid is not None
    rec = d.roost.table.get(sid)
    assert rec is not None and rec.pid is None and rec.job_id == job["job_id"]
    assert sid not in d.roost.referee.leases
    d.clock.advance(int(LEASE_SECS * 1000) * 3)
    assert await d.roost.referee.lapse_leases(d.clock()) == 0
    assert await status_of(d, sid) == "running"
    status, view, _, _ = await d.call("GET", f"/jobs/{job['job_id']}")
    assert status == 200 and view["state"] == "running", view
    status, _, _, _ = await d.call("POST", f"/jobs/{job['job_id']}/cancel")
    assert status in (200, 202)
    assert (await job_final(d, job["job_id"]))["state"] == "terminated"


async def test_a_readopted_job_whose_link_was_never_written_is_not_leased(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, daemon_processes: list[DaemonProcess]
) -> None:
    """kill -9 came before the session's link to its job reached the database: the daemon that
    re-adopts the job links them again, and the restart's fresh leases skip that session."""
    add_doubles(registry)
    state = tmp_path / "state"
    cfg = tmp_path / "roost.toml"
    cfg.write_text(
        f'registry_path = "{registry.root}"\nstate_dir = "{state}"\nspawn_allow = ["solo"]\n'
        f'runtime_command = ["{sys.executable}", "{DOUBLE}"]\nsession_lease_secs = {LEASE_SECS}\n'
        "stop_grace_secs = 1.0\n"
    )
    loop = asyncio.get_running_loop()
    first = await loop.run_in_executor(None, start_daemon_process, ["--config", str(cfg)])
    daemon_processes.append(first)
    async with aiohttp.ClientSession() as http:
        body = {"name": "solo", "version": "0.1.0", "task": "no-pid hang"}
        async with http.post(first.url + "/jobs", json=body) as resp:
            assert resp.status == 201, await resp.text()
            job = await resp.json()
    db = state / "roost.db"

    def job_names_its_session() -> bool:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            row = conn.execute("SELECT session_id FROM jobs WHERE job_id = ?", (job["job_id"],)).fetchone()
        return row is not None and row[0] is not None

    await wait_for(job_names_its_session)  # the job's row is written behind its answer
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait()
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        assert conn.execute("UPDATE sessions SET job_id = NULL WHERE job_id = ?", (job["job_id"],)).rowcount == 1
    d: RunningDaemon = await daemon_factory(
        registry.root,
        state_dir=state,
        spawn_allow=("solo",),
        runtime_command=RUNTIME,
        session_lease_secs=LEASE_SECS,
        stop_grace_secs=1.0,
    )
    readopted = d.roost.launcher.jobs[job["job_id"]]
    assert readopted.readopted and readopted.state == "running"
    sid = readopted.session_id
    assert sid is not None and sid not in d.roost.referee.leases
    d.clock.advance(int(LEASE_SECS * 1000) * 3)
    assert await d.roost.referee.lapse_leases(d.clock()) == 0
    assert await status_of(d, sid) == "running"
    status, _, _, _ = await d.call("POST", f"/jobs/{job['job_id']}/cancel")
    assert status in (200, 202)
    assert (await job_final(d, job["job_id"]))["state"] == "terminated"


async def test_after_a_restart_a_leased_session_gets_a_fresh_lease(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    """Nobody could renew while no daemon ran: the next daemon gives every unwatchable session
    a whole lease from its own start, not what was left of the old one (long lapsed here)."""
    d1 = await started(daemon_factory, registry)
    sid, _ = await d1.register_top("orchestrator")
    old = d1.roost.referee.leases[sid]
    await d1.roost.stop()
    await d1.http.close()
    later = FakeClock(start_ms=old + int(LEASE_SECS * 1000) * 10)
    d2: RunningDaemon = await daemon_factory(
        registry.root, spawn_allow=("orchestrator",), session_lease_secs=LEASE_SECS, clock=later
    )
    assert d2.roost.referee.leases.get(sid) == later() + int(LEASE_SECS * 1000)
    assert await d2.roost.referee.lapse_leases(later()) == 0
    assert await status_of(d2, sid) == "running"
    later.advance(int(LEASE_SECS * 1000))
    assert await d2.roost.referee.lapse_leases(later()) == 1  # a whole lease later, it lapses


async def test_a_lapsed_lease_closes_its_childs_lifeline(daemon_factory: Any, registry: RegistryBuilder) -> None:
    """The lapsed session's child (a real process, launched through ``POST /jobs``) reads EOF on
    its lifeline, says so and ends; its job ends for that reason, with no completion to deliver
    (its parent is gone); a ``roost.session.end`` event records the parent's lapse."""
    add_doubles(registry)
    d: RunningDaemon = await daemon_factory(
        registry.root, spawn_allow=("boss",), runtime_command=RUNTIME, session_lease_secs=LEASE_SECS
    )
    workdir = Path(d.config.state_dir).parent / "boss-wd"
    workdir.mkdir()
    sid, cred = await d.register_top("boss", workdir=str(workdir))
    assert sid in d.roost.referee.leases
    status, job, _, _ = await d.call(
        "POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": "hang"}, headers={CRED: cred}
    )
    assert status == 201, job
    # Watched in memory, not over HTTP: the parent's authenticated calls would renew its lease.
    child = d.roost.launcher.jobs[job["job_id"]]
    await wait_for(lambda: child.state == "running" and child.session_id is not None)
    kid_sid = child.session_id
    assert kid_sid not in d.roost.referee.leases  # the launcher watches the child's process
    told = Path(child.workdir) / "spawner_ended.json"
    assert not told.exists()
    sub = d.roost.events.subscribe()
    try:
        d.clock.advance(int(LEASE_SECS * 1000) + 1)  # the daemon's own sweep ends it
        end = await session_end(sid, sub)
    finally:
        sub.close()
    assert end["attributes"]["roost.session.reason"].startswith("lease lapsed")
    assert end["attributes"]["roost.session.status"] == "failed"
    await wait_for(told.exists, EOF_GUARD)
    record = json.loads(told.read_text())
    assert record["event_type"] == "spawner_ended" and record["spawned_by"] == sid, record
    await wait_for(lambda: child.final, EOF_GUARD)
    assert child.state == "terminated" and child.reason == PARENT_ENDED_REASON, child
    assert child.exit_status == "exit status 143", child  # it ended itself on EOF, not killed
    assert not (Path(child.workdir) / "completion.json").exists()  # nobody left to report to
    assert await status_of(d, sid) == "failed"
    kid = d.roost.table.get(kid_sid)
    assert kid is not None and not kid.running
