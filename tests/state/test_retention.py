"""Bounded retention at a real daemon: ended sessions, finished jobs, spent ids, journal rows."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path
from typing import Any

from roost.state.sessions import SessionTable
from roost.state.store import JOURNAL_SIZE_LIMIT
from tests.support.daemon import FakeClock, RunningDaemon
from tests.support.launcher import RUNTIME, add_doubles, job_final, wait_for
from tests.support.records import running_session
from tests.support.registry import RegistryBuilder

CRED = "x-murmur-spawn-credential"


def _count(d: RunningDaemon, sql: str, *params: Any) -> Any:
    return d.roost.store.read(lambda c: c.execute(sql, params).fetchone()[0])


async def _deregister(d: RunningDaemon, cred: str) -> None:
    status, body, _, _ = await d.call("POST", "/deregister", json={"outcome": "complete"}, headers={CRED: cred})
    assert status == 200, body


async def test_ended_sessions_leave_memory_then_disk(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    clock = FakeClock()
    d: RunningDaemon = await daemon_factory(
        registry.root,
        spawn_allow=("orchestrator",),
        clock=clock,
        session_memory_secs=60,
        retention_secs=3600,
    )
    live_sid, live = await d.register_top("orchestrator")
    old_sid, old = await d.register_top("orchestrator")
    _, grant = await d.spawn(old, "worker")
    kid_sid, kid = await d.register_child(grant["approval"], "worker")
    await _deregister(d, kid)
    await _deregister(d, old)
    assert await _count(d, "SELECT count(*) FROM spent") == 1

    clock.advance(61_000)  # past the approval's expiry and the memory window
    counts = await d.roost.retention.sweep()
    assert counts.sessions_forgotten == 2 and counts.spent_deleted == 1 and counts.sessions_deleted == 0
    assert set(d.roost.table.sessions) == {live_sid}
    assert not d.roost.table.spent
    # Still on disk: /status answers from there, and the id cannot be registered again.
    status, body, _, _ = await d.call("GET", f"/status/{old_sid}")
    assert status == 200 and body["status"] == "complete", body
    body = {"session_id": kid_sid, "name": "orchestrator", "version": "0.1.0"}
    status, _, _, _ = await d.call("POST", "/register", json=body)
    assert status == 403

    clock.advance(3600_000)
    counts = await d.roost.retention.sweep()
    assert counts.sessions_deleted == 2
    status, _, _, _ = await d.call("GET", f"/status/{old_sid}")
    assert status == 404
    assert await _count(d, "SELECT count(*) FROM sessions") == 1
    # The live one was never touched.
    assert (await d.spawn(live, "worker"))[0] == 200


async def test_idle_daemon_prunes_journal_and_finished_jobs(daemon: RunningDaemon) -> None:
    _, cred = await daemon.register_top("orchestrator")
    for _ in range(3):
        assert (await daemon.spawn(cred, "worker"))[0] == 200
    job = (
        "INSERT INTO jobs (job_id, delegation_id, name, version, sha256, workdir, state, trust, deadline_secs,"
        " created_ms, ended_ms) VALUES (?, ?, 'worker', '0.1.0', 'x', '/tmp', ?, 'trusted', 60, ?, ?)"
    )
    now = daemon.clock()
    await daemon.roost.store.commit(
        [
            (job, ("job_" + "a" * 16, "d1", "complete", now, now)),
            (job, ("job_" + "b" * 16, "d2", "running", now, None)),
        ]
    )
    for _ in range(200):  # the write-behind journal row lands within a tick
        if await _count(daemon, "SELECT count(*) FROM reservation_log"):
            break
        await asyncio.sleep(0.02)
    assert await _count(daemon, "SELECT count(*) FROM reservation_log") >= 1
    daemon.clock.advance(daemon.config.retention_secs * 1000 + 61_000)
    await daemon.roost.retention.sweep()  # no request came in between: the sweep alone prunes
    assert await _count(daemon, "SELECT count(*) FROM reservation_log") == 0
    assert await _count(daemon, "SELECT group_concat(state) FROM jobs") == "running"
    assert daemon.roost.table.live_capsules() == 1
    # The WAL shrinks back to this after a checkpoint, whatever its high-water mark was.
    assert await _count(daemon, "PRAGMA journal_size_limit") == 8 * 1024 * 1024


def test_forget_ended_walks_only_what_ended(tmp_path: Path) -> None:
    table = SessionTable()
    recs = []
    for i in range(5):
        rec = running_session(f"ses_{i:016x}", None)
        table.add(rec)
        recs.append(rec)
    for i, rec in enumerate(recs[:4]):
        table.end(rec, "complete", 1000 * i)
    assert table.forget_ended(1500) == 2
    assert set(table.sessions) == {r.session_id for r in recs[2:]}
    assert table.forget_ended(10_000) == 2
    assert table.running == 1 and set(table.sessions) == {recs[4].session_id}


def test_forget_ended_keeps_what_is_named_until_it_is_not(tmp_path: Path) -> None:
    table = SessionTable()
    recs = [running_session(f"ses_{i:016x}", None) for i in range(3)]
    for i, rec in enumerate(recs):
        table.add(rec)
        table.end(rec, "complete", 1000 * i)
    named = {recs[0].session_id}
    assert table.forget_ended(10_000, named) == 2
    assert set(table.sessions) == named
    assert table.forget_ended(20_000, named) == 0  # still named: still kept
    assert table.forget_ended(20_000, frozenset()) == 1  # a held one goes once nothing names it
    assert not table.sessions


async def test_restart_with_100k_ended_sessions_loads_only_the_live(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    state = tmp_path / "history"
    clock = FakeClock()
    d1: RunningDaemon = await daemon_factory(registry.root, spawn_allow=("orchestrator",), state_dir=state, clock=clock)
    sid, cred = await d1.register_top("orchestrator")
    await d1.roost.stop()
    await d1.http.close()
    db = sqlite3.connect(state / "roost.db")
    cols = [c[1] for c in db.execute("PRAGMA table_info(sessions)")]
    row = list(db.execute("SELECT * FROM sessions WHERE session_id = ?", (sid,)).fetchone())
    at = {c: i for i, c in enumerate(cols)}

    def ended(i: int) -> list[Any]:
        values = list(row)
        values[at["session_id"]] = f"ses_{i:016x}"
        values[at["status"]] = "complete"
        values[at["ended_ms"]] = clock()
        return values

    db.executemany(f"INSERT INTO sessions VALUES ({','.join('?' * len(cols))})", (ended(i) for i in range(100_000)))
    db.commit()
    db.close()

    d2: RunningDaemon = await daemon_factory(registry.root, spawn_allow=("orchestrator",), state_dir=state, clock=clock)
    assert list(d2.roost.table.sessions) == [sid]
    assert (await d2.spawn(cred, "worker"))[0] == 200  # the live credential survived
    status, body, _, _ = await d2.call("GET", f"/status/ses_{7:016x}")
    assert status == 200 and body["status"] == "complete"
    again = {"session_id": f"ses_{7:016x}", "name": "orchestrator", "version": "0.1.0"}
    status, _, _, _ = await d2.call("POST", "/register", json=again)
    assert status == 403


async def test_a_session_an_unfinished_job_names_outlives_retention(
    daemon_factory: Any, registry: RegistryBuilder
) -> None:
    """A child that ended its own session long before its process exits: its session (its own
    word on how it ended) stays in memory and on disk until the job is finalized, which then
    reads complete/ok, not crashed."""
    add_doubles(registry)
    clock = FakeClock()
    d: RunningDaemon = await daemon_factory(
        registry.root,
        spawn_allow=("solo",),
        runtime_command=RUNTIME,
        clock=clock,
        session_memory_secs=60,
        retention_secs=3600,
    )
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "solo", "version": "0.1.0", "task": "linger"})
    assert status == 201, job
    sid = d.roost.launcher.jobs[job["job_id"]].session_id
    assert sid is not None
    await wait_for(lambda: (rec := d.roost.table.get(sid)) is not None and not rec.running)
    clock.advance(3600_000 + 61_000)  # past the memory window and the database's retention
    counts = await d.roost.retention.sweep()
    assert counts.sessions_forgotten == 0 and counts.sessions_deleted == 0
    assert d.roost.table.get(sid) is not None
    assert await _count(d, "SELECT count(*) FROM sessions WHERE session_id = ?", sid) == 1
    (Path(job["workdir"]) / "go").write_text("")
    final = await job_final(d, job["job_id"])
    assert (final["state"], final["outcome"]) == ("complete", "ok"), final
    # Nothing names it now: the next sweep forgets it, in memory and on disk.
    counts = await d.roost.retention.sweep()
    assert counts.sessions_forgotten == 1 and counts.sessions_deleted == 1
    assert d.roost.table.get(sid) is None


async def test_a_finished_top_level_jobs_own_directory_goes_with_its_row(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    """``<state_dir>/jobs/<job_id>`` is there right after the run (the README reads
    ``jobs/*/out/``) and goes with the job's row after ``retention_secs``; a workdir the caller
    named stays, and a link planted inside is removed as a link, never followed."""
    add_doubles(registry)
    clock = FakeClock()
    d: RunningDaemon = await daemon_factory(
        registry.root, spawn_allow=("solo",), runtime_command=RUNTIME, clock=clock, retention_secs=3600
    )
    own: dict[str, Any] = {}
    status, own, _, _ = await d.call("POST", "/jobs", json={"name": "solo", "version": "0.1.0", "task": "sleep 0"})
    assert status == 201, own
    named = tmp_path / "named-wd"
    named.mkdir()
    body = {"name": "solo", "version": "0.1.0", "task": "sleep 0", "workdir": str(named)}
    status, theirs, _, _ = await d.call("POST", "/jobs", json=body)
    assert status == 201, theirs
    for job in (own, theirs):
        assert (await job_final(d, job["job_id"]))["state"] == "complete"
    own_dir = d.config.state_dir / "jobs" / own["job_id"]
    assert Path(own["workdir"]) == own_dir and (own_dir / "double.json").is_file()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the daemon's\n")
    (own_dir / "planted").symlink_to(outside)
    counts = await d.roost.retention.sweep()
    assert counts.jobs_deleted == 0 and own_dir.is_dir()  # within retention: all kept
    clock.advance(2 * 3600_000)  # a job's end is stamped by the wall clock, which this one leads
    counts = await d.roost.retention.sweep()
    assert counts.jobs_deleted == 2 and counts.job_dirs_removed == 1
    assert not own_dir.exists()
    assert named.is_dir() and any(named.iterdir())  # the caller's workdir is theirs
    assert (outside / "keep.txt").read_text() == "not the daemon's\n"


def _is_dir(path: Path) -> bool:
    return path.is_dir()


def _size(path: Path) -> int:
    return os.path.getsize(path)


async def test_the_wal_file_shrinks_back_after_a_burst(daemon: RunningDaemon, tmp_path: Path) -> None:
    """A burst while a reader holds an old snapshot (an operator's ``sqlite3`` shell, a backup)
    grows ``roost.db-wal`` far past ``journal_size_limit``: no checkpoint can restart the WAL
    under that reader, so every commit appends. Once the reader is gone, the retention sweep's
    checkpoint alone brings the file back to at most the limit (no later write is needed)."""
    wal = Path(str(daemon.config.state_dir / "roost.db") + "-wal")
    limit = await _count(daemon, "PRAGMA journal_size_limit")
    assert limit == JOURNAL_SIZE_LIMIT
    reader = sqlite3.connect(f"file:{daemon.config.state_dir / 'roost.db'}?mode=ro", uri=True)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM sessions").fetchone()  # the snapshot is now held
        for _ in range(20):  # real traffic in the burst too
            _, cred = await daemon.register_top("orchestrator")
            await _deregister(daemon, cred)
        cols = await daemon.roost.store.read(lambda c: [r[1] for r in c.execute("PRAGMA table_info(sessions)")])
        row = await daemon.roost.store.read(lambda c: list(c.execute("SELECT * FROM sessions").fetchone()))
        at = {c: i for i, c in enumerate(cols)}
        insert = f"INSERT INTO sessions VALUES ({','.join('?' * len(cols))})"
        n = 0
        while _size(wal) < 3 * limit:  # history rows, a thousand per commit
            batch = []
            for _ in range(1000):
                values = list(row)
                values[at["session_id"]] = f"ses_{n:016x}"
                values[at["status"]] = "complete"
                values[at["ended_ms"]] = daemon.clock()
                values[at["workdir"]] = "/w/" + "x" * 900
                batch.append((insert, tuple(values)))
                n += 1
            await daemon.roost.store.commit(batch)
        assert (reader.execute("SELECT count(*) FROM sessions").fetchone()[0]) == 0  # its old snapshot
        # A sweep under the reader neither fails nor waits for it; the WAL cannot shrink yet.
        await daemon.roost.retention.sweep()
        assert _size(wal) >= 3 * limit
    finally:
        reader.close()
    grown = _size(wal)
    assert grown >= 3 * limit
    await daemon.roost.retention.sweep()
    assert _size(wal) <= limit, (grown, _size(wal))
    # Nothing was lost on the way: every row is in the database.
    assert await _count(daemon, "SELECT count(*) FROM sessions") == n + 20
    assert await _count(daemon, "PRAGMA integrity_check") == "ok"


async def test_a_delegated_childs_directory_goes_with_its_row_even_in_a_named_workdir(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    """``<parent>/.murmur/children/<name>-<16 hex>`` is the daemon's own even inside a workdir
    the caller named: it goes with the child's row (children end before, or with, the job that
    delegated to them); the caller's workdir and anything a link inside points at stay."""
    add_doubles(registry)
    clock = FakeClock()
    d: RunningDaemon = await daemon_factory(
        registry.root, spawn_allow=("boss",), runtime_command=RUNTIME, clock=clock, retention_secs=3600
    )
    named = tmp_path / "named-wd"
    named.mkdir()
    body = {"name": "boss", "version": "0.1.0", "task": "delegate kid sleep 0", "workdir": str(named)}
    status, boss, _, _ = await d.call("POST", "/jobs", json=body)
    assert status == 201, boss
    await wait_for(lambda: (named / "delegated.json").exists(), 30)
    import json

    kid = json.loads((named / "delegated.json").read_text())
    await wait_for(lambda: d.roost.launcher.jobs[kid["job_id"]].final, 30)
    assert d.roost.launcher.jobs[kid["job_id"]].state == "complete"
    kid_dir = Path(kid["workdir"])
    assert kid_dir.parent == named / ".murmur" / "children" and _is_dir(kid_dir)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the daemon's\n")
    (kid_dir / "planted").symlink_to(outside)
    status, _, _, _ = await d.call("POST", f"/jobs/{boss['job_id']}/cancel")
    assert status == 200
    await job_final(d, boss["job_id"])
    assert (await d.roost.retention.sweep()).jobs_deleted == 0 and _is_dir(kid_dir)
    clock.advance(2 * 3600_000)
    counts = await d.roost.retention.sweep()
    assert counts.jobs_deleted == 2 and counts.job_dirs_removed == 1
    assert not _is_dir(kid_dir)
    assert _is_dir(named) and "delegated.json" in os.listdir(named)  # the caller's workdir is theirs
    assert (outside / "keep.txt").read_text() == "not the daemon's\n"
