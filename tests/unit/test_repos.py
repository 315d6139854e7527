"""The repositories against a real SQLite store: what one writes, the other reads back unchanged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.backends.base import NodeRef
from roost.core.envelope import Envelope
from roost.core.jobs import Job
from roost.core.manifest import parse_manifest
from roost.core.wire import JOB_STATES
from roost.state.repos.jobs import JobRepository
from roost.state.repos.jobs import prune_sql as prune_jobs
from roost.state.repos.journal import JournalRepository
from roost.state.repos.meta import MetaRepository
from roost.state.repos.sessions import SessionRepository
from roost.state.repos.sessions import prune_sql as prune_sessions
from roost.state.repos.spent import SpentRepository
from roost.state.repos.spent import prune_sql as prune_spent
from roost.state.sessions import SessionRecord
from roost.state.store import Store
from roost.system.blocking import BlockingExecutor

MANIFEST = parse_manifest("name: worker\nversion: 0.1.0\ncapabilities: {spawn: {allow: [worker]}}\n")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = Store(tmp_path / "state.db", BlockingExecutor())
    await s.open()
    yield s
    await s.close()


def session(sid: str, **kw: object) -> SessionRecord:
    values: dict[str, object] = {
        "session_id": sid,
        "name": "worker",
        "version": "0.1.0",
        "sha256": "a" * 64,
        "status": "running",
        "parent_id": None,
        "depth_remaining": 2,
        "envelope": Envelope.from_manifest(MANIFEST),
        "manifest": MANIFEST,
        "trust": "trusted",
        "cred_nonce": "n" * 16,
        "handle_salt": "s" * 32,
        "created_ms": 1000,
    }
    values.update(kw)
    return SessionRecord(**values)  # type: ignore[arg-type]


def job(job_id: str, state: str = "running", created_ms: int = 1000, **kw: object) -> Job:
    values: dict[str, object] = {
        "job_id": job_id,
        "delegation_id": "dlg_" + job_id,
        "name": "worker",
        "version": "0.1.0",
        "sha256": "b" * 64,
        "workdir": "/tmp/" + job_id,
        "trust": "trusted",
        "deadline_secs": 60.0,
        "created_ms": created_ms,
        "state": state,
    }
    values.update(kw)
    return Job(**values)  # type: ignore[arg-type]


def _fields(j: Job) -> dict[str, object]:
    return {k: getattr(j, k) for k in j.__slots__ if k not in ("done", "completion")}  # type: ignore[attr-defined]


# -- sessions ------------------------------------------------------------------------------------


async def test_a_session_round_trips_and_its_end_and_job_are_recorded(store: Store) -> None:
    repo = SessionRepository(store)
    rec = session("ses_a", workdir="/w", pid=42, pid_start=1.5, capsule_url="http://127.0.0.1:1", uid=7)
    rec.containment = "scoped"
    await store.commit([repo.insert_op(rec)])
    got = await repo.get("ses_a")
    assert got is not None and got == rec
    rec.status, rec.ended_ms, rec.end_reason = "failed", 2000, "lease lapsed"
    await store.commit([repo.status_op(rec), repo.job_op("ses_a", "job_1")])
    got = await repo.get("ses_a")
    assert got is not None
    assert (got.status, got.ended_ms, got.end_reason, got.job_id) == ("failed", 2000, "lease lapsed", "job_1")
    assert await repo.get("ses_missing") is None


async def test_live_sessions_are_the_running_ones_and_those_an_unfinished_job_names(store: Store) -> None:
    sessions, jobs = SessionRepository(store), JobRepository(store)
    ops = [
        sessions.insert_op(session("ses_run")),
        sessions.insert_op(session("ses_done", status="complete", ended_ms=5)),
        sessions.insert_op(session("ses_child", status="failed", ended_ms=5)),
        sessions.insert_op(session("ses_parent", status="complete", ended_ms=5)),
        sessions.insert_op(session("ses_old_child", status="failed", ended_ms=5)),
        jobs.upsert_op(job("job_live", "running", session_id="ses_child", parent_id="ses_parent")),
        jobs.upsert_op(job("job_over", "complete", session_id="ses_old_child", parent_id="ses_done")),
    ]
    await store.commit(ops)
    assert {r.session_id for r in sessions.live_sync()} == {"ses_run", "ses_child", "ses_parent"}


async def test_session_prune_deletes_only_ended_rows_up_to_the_cutoff(store: Store) -> None:
    repo = SessionRepository(store)
    await store.commit(
        [
            repo.insert_op(session("ses_run")),
            repo.insert_op(session("ses_old", status="complete", ended_ms=100)),
            repo.insert_op(session("ses_new", status="complete", ended_ms=900)),
        ]
    )
    assert await store.prune([(prune_sessions(10), (500,))]) == [1]
    assert await repo.get("ses_old") is None
    assert await repo.get("ses_new") is not None and await repo.get("ses_run") is not None


# -- jobs ----------------------------------------------------------------------------------------


async def test_a_job_round_trips_field_for_field(store: Store) -> None:
    repo = JobRepository(store)
    original = job(
        "job_1",
        "complete",
        parent_id="ses_p",
        parent_workdir="/p",
        session_id="ses_c",
        capsule_url="http://127.0.0.1:9",
        pid=123,
        pid_start=4.25,
        handle="h",
        ready_ms=1100,
        ended_ms=1200,
        exit_status="0",
        outcome="ok",
        reason="done",
        stop_reason="cancel",
        delivery="delivered",
        start_written=True,
        end_written=True,
        uid=1000,
        node=NodeRef("node-1", "10.0.0.2:9000"),
    )
    await store.commit([repo.upsert_op(original)])
    got = await repo.get("job_1")
    assert got is not None and _fields(got) == _fields(original)
    assert got.done.is_set()  # a finished job read back is already done
    synced = repo.get_sync("job_1")
    assert synced is not None and _fields(synced) == _fields(original)
    assert await repo.get("job_none") is None and repo.get_sync("job_none") is None


async def test_an_upsert_replaces_the_row(store: Store) -> None:
    repo = JobRepository(store)
    j = job("job_1", "starting")
    await store.commit([repo.upsert_op(j)])
    j.state, j.pid = "running", 99
    await store.commit([repo.upsert_op(j)])
    got = await repo.get("job_1")
    assert got is not None and (got.state, got.pid) == ("running", 99) and not got.done.is_set()
    assert await repo.counts_by_state() == {"running": 1}


async def test_listing_counting_and_unfinished(store: Store) -> None:
    repo = JobRepository(store)
    states = ["starting", "running", "complete", "failed", "running", "crashed"]
    await store.commit([repo.upsert_op(job(f"job_{i}", s, created_ms=1000 + i)) for i, s in enumerate(states)])
    assert [j.job_id for j in await repo.newest()] == [f"job_{i}" for i in reversed(range(6))]
    assert [j.job_id for j in await repo.newest(limit=2)] == ["job_5", "job_4"]
    assert [j.job_id for j in await repo.newest("running")] == ["job_4", "job_1"]
    assert await repo.newest("terminated") == []
    assert [j.job_id for j in await repo.unfinished()] == ["job_0", "job_1", "job_4"]
    assert await repo.counts_by_state() == {"starting": 1, "running": 2, "complete": 1, "failed": 1, "crashed": 1}


async def test_job_prune_deletes_only_finished_rows_up_to_the_cutoff(store: Store) -> None:
    repo = JobRepository(store)
    await store.commit(
        [
            repo.upsert_op(job("job_old", "complete", ended_ms=100)),
            repo.upsert_op(job("job_run", "running", ended_ms=100)),  # not final: kept whatever its stamp
            repo.upsert_op(job("job_new", "failed", ended_ms=900)),
        ]
    )
    assert await store.prune([(prune_jobs(10), (500,))]) == [1]
    assert {j.job_id for j in await repo.newest()} == {"job_run", "job_new"}


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(picks=st.lists(st.sampled_from(JOB_STATES), max_size=12))
def test_counts_match_the_states_written(tmp_path: Path, picks: list[str]) -> None:
    import asyncio

    async def run() -> None:
        s = Store(None, BlockingExecutor())
        await s.open()
        repo = JobRepository(s)
        await s.commit([repo.upsert_op(job(f"job_{i}", st_, created_ms=i)) for i, st_ in enumerate(picks)])
        expected: dict[str, int] = {}
        for st_ in picks:
            expected[st_] = expected.get(st_, 0) + 1
        assert await repo.counts_by_state() == expected
        assert [j.job_id for j in await repo.unfinished()] == [
            f"job_{i}" for i, st_ in enumerate(picks) if st_ in ("starting", "running")
        ]
        await s.close()

    asyncio.run(run())


# -- spent ids, the journal, meta ----------------------------------------------------------------


async def test_spent_ids_are_kept_while_their_approval_is_valid(store: Store) -> None:
    repo = SpentRepository(store)
    await store.commit([repo.spend_op("j1", 100), repo.spend_op("j2", 300), repo.spend_op("j1", 999)])
    assert sorted(repo.unexpired_sync(0)) == [("j1", 100), ("j2", 300)]  # a second spend is ignored
    assert repo.unexpired_sync(100) == [("j2", 300)]
    await store.commit([repo.expire_op(100)])
    assert repo.unexpired_sync(0) == [("j2", 300)]
    assert await store.prune([(prune_spent(10), (300,))]) == [1]
    assert repo.unexpired_sync(0) == []


async def test_journal_rows_replay_in_order_and_compact_by_expiry(store: Store) -> None:
    repo = JournalRepository(store)
    await store.commit([repo.append_op(100, b"[1]", b"[]"), repo.append_op(300, b"[2]", b'["x"]')])
    assert repo.unexpired_sync(0) == [(b"[1]", b"[]"), (b"[2]", b'["x"]')]
    assert repo.unexpired_sync(100) == [(b"[2]", b'["x"]')]
    await store.commit([repo.compact_op(100)])
    assert repo.unexpired_sync(0) == [(b"[2]", b'["x"]')]


async def test_meta_keys_are_written_once(store: Store) -> None:
    repo = MetaRepository(store)
    assert repo.get_sync("instance_id") is None
    repo.put_sync("instance_id", "run_1")
    assert repo.get_sync("instance_id") == "run_1"
