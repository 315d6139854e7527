"""The schema's upgrades at a real SQLite file: a database left at schema 9 (each job's
``traceparent``) gains the formation columns of schema 10 and the run-as uid of schema 11, one
left at schema 10 gains schema 11's, and each keeps what it held; the job repository writes and
reads every column of the final schema; a database left at schema 11 gains schema 12's workdir
identity of each session, its old sessions read back with none and a new one's (an inode past
2**63 included) round-trips to what start-up loads; a schema past the last one this release knows
is refused, not opened (docs/operations.md, exit 8)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from roost.core.jobs import Job
from roost.state.repos.jobs import COLUMNS, JobRepository
from roost.state.repos.sessions import SessionRepository
from roost.state.store import MIGRATIONS, Store, StoreTooNew, _split_sql
from roost.system.blocking import BlockingExecutor
from tests.support.records import running_session
from tests.unit.test_job_node import job

TRACEPARENT = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
FORMATION = "frm_" + "c" * 32
RUN_UID = 65534


def _database_at(db: Path, version: int) -> None:
    """A file migrated up to ``version`` only, as a release whose last migration that was left it."""
    conn = sqlite3.connect(db, isolation_level=None)
    for idx in range(version):
        for stmt in _split_sql(MIGRATIONS[idx]):
            conn.execute(stmt)
        conn.execute(f"PRAGMA user_version={idx + 1}")
    conn.close()


# The job columns each schema added after the one a test starts from.
LATER_JOB_COLUMNS = {9: ("formation_id", "run_uid"), 10: ("run_uid",)}


def _job(
    job_id: str, traceparent: str | None = None, formation_id: str | None = None, run_uid: int | None = None
) -> Job:
    made = job(job_id, None)
    made.traceparent, made.formation_id, made.run_uid = traceparent, formation_id, run_uid
    return made


def _columns(store: Store, table: str) -> list[str]:
    return [str(r["name"]) for r in store.rows(f"PRAGMA table_info({table})")]


@pytest.mark.parametrize("start", sorted(LATER_JOB_COLUMNS))
def test_an_older_database_gains_the_later_columns_and_keeps_what_it_held(tmp_path: Path, start: int) -> None:
    db = tmp_path / "roost.db"
    _database_at(db, start)
    later = LATER_JOB_COLUMNS[start]
    formation = FORMATION if start >= 10 else None
    old = JobRepository.upsert_op(_job("job_old", traceparent=TRACEPARENT, formation_id=formation))
    conn = sqlite3.connect(db, isolation_level=None)
    # What that release wrote: every column it had, none of the later schemas'.
    have = [c for c in COLUMNS if c not in later]
    conn.execute(
        f"INSERT INTO jobs ({', '.join(have)}) VALUES ({', '.join('?' * len(have))})",
        [v for c, v in zip(COLUMNS, old[1], strict=True) if c not in later],
    )
    conn.close()

    async def reopen() -> tuple[Job | None, Job | None, list[str], list[str], int]:
        store = Store(db, BlockingExecutor())
        await store.open()
        try:
            repo = JobRepository(store)
            made = _job("job_new", traceparent=TRACEPARENT, formation_id=FORMATION, run_uid=RUN_UID)
            await store.commit([repo.upsert_op(made)])
            version = int(store.rows("PRAGMA user_version")[0][0])
            return (
                repo.get_sync("job_old"),
                repo.get_sync("job_new"),
                _columns(store, "jobs"),
                _columns(store, "sessions"),
                version,
            )
        finally:
            await store.close()

    was, new, job_columns, session_columns, version = asyncio.run(reopen())
    assert version == len(MIGRATIONS) == 12
    assert sorted(job_columns) == sorted(COLUMNS)
    assert "formation_id" in session_columns
    assert was is not None and was.traceparent == TRACEPARENT and was.formation_id == formation
    assert was.run_uid is None and was.process_uid == was.uid
    assert new is not None and new.traceparent == TRACEPARENT and new.formation_id == FORMATION
    assert new.run_uid == RUN_UID and new.process_uid == RUN_UID


def test_a_schema_11_database_gains_each_sessions_workdir_identity(tmp_path: Path) -> None:
    db = tmp_path / "roost.db"
    _database_at(db, 11)
    # What release 11 wrote for a session: every column it had, no workdir identity.
    sql, values = SessionRepository.insert_op(running_session("ses_old", None))
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute(sql.replace(", workdir_dev, workdir_ino)", ")").replace("?,?,?)", "?)"), values[:-2])
    conn.close()
    big = (2**64 - 3, 2**63 + 5)  # st_dev/st_ino are unsigned 64-bit; SQLite's INTEGER is signed

    async def reopen() -> tuple[dict[str, tuple[int, int] | None], list[str], int]:
        store = Store(db, BlockingExecutor())
        await store.open()
        try:
            repo = SessionRepository(store)
            first, second = running_session("ses_new", None), running_session("ses_big", None)
            first.workdir_id = (2049, 131077)  # set before the insert: written by it
            await store.commit([repo.insert_op(first), repo.insert_op(second)])
            second.workdir_id = big  # taken after the insert (the route's order): written by its update
            await store.commit([repo.workdir_id_op(second)])
            loaded = {rec.session_id: rec.workdir_id for rec in repo.live_sync()}
            return loaded, _columns(store, "sessions"), int(store.rows("PRAGMA user_version")[0][0])
        finally:
            await store.close()

    loaded, columns, version = asyncio.run(reopen())
    assert version == len(MIGRATIONS) == 12
    assert {"workdir_dev", "workdir_ino"} <= set(columns)
    assert loaded == {"ses_old": None, "ses_new": (2049, 131077), "ses_big": big}


def test_a_schema_past_the_last_migration_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "roost.db"
    _database_at(db, len(MIGRATIONS))
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA user_version={len(MIGRATIONS) + 1}")

    async def reopen() -> None:
        await Store(db, BlockingExecutor()).open()

    with pytest.raises(StoreTooNew) as caught:
        asyncio.run(reopen())
    assert (caught.value.found, caught.value.known) == (len(MIGRATIONS) + 1, len(MIGRATIONS))
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) + 1
