"""The schema's upgrades at a real SQLite file: a database left at schema 9 (each job's
``traceparent``) gains the formation columns of schema 10 and keeps what it held; the job
repository writes and reads every column of the final schema; a schema past the last one this
release knows is refused, not opened (docs/operations.md, exit 8)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from roost.core.jobs import Job
from roost.state.repos.jobs import COLUMNS, JobRepository
from roost.state.store import MIGRATIONS, Store, StoreTooNew, _split_sql
from roost.system.blocking import BlockingExecutor
from tests.unit.test_job_node import job

TRACEPARENT = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
FORMATION = "frm_" + "c" * 32


def _database_at(db: Path, version: int) -> None:
    """A file migrated up to ``version`` only, as a release whose last migration that was left it."""
    conn = sqlite3.connect(db, isolation_level=None)
    for idx in range(version):
        for stmt in _split_sql(MIGRATIONS[idx]):
            conn.execute(stmt)
        conn.execute(f"PRAGMA user_version={idx + 1}")
    conn.close()


def _job(job_id: str, traceparent: str | None = None, formation_id: str | None = None) -> Job:
    made = job(job_id, None)
    made.traceparent, made.formation_id = traceparent, formation_id
    return made


def _columns(store: Store, table: str) -> list[str]:
    return [str(r["name"]) for r in store.rows(f"PRAGMA table_info({table})")]


def test_a_schema_9_database_gains_the_formation_columns_and_keeps_its_traceparents(tmp_path: Path) -> None:
    db = tmp_path / "roost.db"
    _database_at(db, 9)
    old = JobRepository.upsert_op(_job("job_old", traceparent=TRACEPARENT))
    conn = sqlite3.connect(db, isolation_level=None)
    # What the schema-9 release wrote: every column it had, none of schema 10's.
    have = [c for c in COLUMNS if c != "formation_id"]
    conn.execute(
        f"INSERT INTO jobs ({', '.join(have)}) VALUES ({', '.join('?' * len(have))})",
        [v for c, v in zip(COLUMNS, old[1], strict=True) if c != "formation_id"],
    )
    conn.close()

    async def reopen() -> tuple[Job | None, Job | None, list[str], list[str], int]:
        store = Store(db, BlockingExecutor())
        await store.open()
        try:
            repo = JobRepository(store)
            await store.commit([repo.upsert_op(_job("job_new", traceparent=TRACEPARENT, formation_id=FORMATION))])
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
    assert version == len(MIGRATIONS) == 10
    assert sorted(job_columns) == sorted(COLUMNS)
    assert "formation_id" in session_columns
    assert was is not None and was.traceparent == TRACEPARENT and was.formation_id is None
    assert new is not None and new.traceparent == TRACEPARENT and new.formation_id == FORMATION


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
