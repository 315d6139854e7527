"""The ``jobs`` table: the launcher's durable record of each child (:mod:`roost.core.jobs`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from roost.core.jobs import Job, NodeRef
from roost.core.wire import ACTIVE_JOB_STATES, FINAL_JOB_STATES
from roost.state.store import Op, Store

__all__ = ["COLUMNS", "LIST_LIMIT", "JobRepository"]

COLUMNS = (
    "job_id",
    "delegation_id",
    "name",
    "version",
    "sha256",
    "parent_id",
    "parent_workdir",
    "session_id",
    "capsule_url",
    "workdir",
    "state",
    "pid",
    "pid_start",
    "trust",
    "deadline_secs",
    "handle",
    "created_ms",
    "ready_ms",
    "ended_ms",
    "exit_status",
    "outcome",
    "reason",
    "stop_reason",
    "delivery",
    "start_written",
    "end_written",
    "uid",
    "node",
    "traceparent",
    "formation_id",
    "run_uid",
)
UPSERT = f"INSERT OR REPLACE INTO jobs ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
BY_ID = "SELECT * FROM jobs WHERE job_id = ?"
BY_STATE = "SELECT * FROM jobs WHERE state = ? ORDER BY created_ms DESC LIMIT ?"
NEWEST = "SELECT * FROM jobs ORDER BY created_ms DESC LIMIT ?"
_ACTIVE = ", ".join(f"'{s}'" for s in sorted(ACTIVE_JOB_STATES))
UNFINISHED = f"SELECT * FROM jobs WHERE state IN ({_ACTIVE}) ORDER BY created_ms"
COUNTS = "SELECT state, COUNT(*) AS n FROM jobs GROUP BY state"
LIST_LIMIT = 5000
"""The most rows one listing reads (the newest)."""

_FINAL = ", ".join(f"'{s}'" for s in sorted(FINAL_JOB_STATES))


def prune_sql(batch: int) -> str:
    """Delete up to ``batch`` finished jobs that ended at or before the bound parameter; each
    deleted job's id, workdir and parent's workdir come back (its directory may be the daemon's
    to remove: a top-level job's under the state dir, a delegated child's under its parent's)."""
    return (
        "DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs"
        f" WHERE ended_ms IS NOT NULL AND ended_ms <= ? AND state IN ({_FINAL}) LIMIT {int(batch)})"
        " RETURNING job_id, workdir, parent_workdir"
    )


def job_from_row(row: sqlite3.Row) -> Job:
    """A :class:`Job` from its row (a finished one has its ``done`` event set)."""
    values = {c: row[c] for c in COLUMNS}
    values["start_written"] = bool(values["start_written"])
    values["end_written"] = bool(values["end_written"])
    values["node"] = NodeRef.from_dict(json.loads(values["node"])) if values["node"] else None
    job = Job(**values)
    if job.final:
        job.done.set()
    return job


class JobRepository:
    """Writes and reads of job rows, through one :class:`~roost.state.store.Store`.

    The ``*_sync`` readers block (startup, or a caller already in the executor); the others go
    through the store's executor.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    @staticmethod
    def upsert_op(job: Job) -> Op:
        """The whole row, written at every state change."""
        return (
            UPSERT,
            tuple(
                int(v) if isinstance(v, bool) else v
                for v in (
                    job.job_id,
                    job.delegation_id,
                    job.name,
                    job.version,
                    job.sha256,
                    job.parent_id,
                    job.parent_workdir,
                    job.session_id,
                    job.capsule_url,
                    job.workdir,
                    job.state,
                    job.pid,
                    job.pid_start,
                    job.trust,
                    job.deadline_secs,
                    job.handle,
                    job.created_ms,
                    job.ready_ms,
                    job.ended_ms,
                    job.exit_status,
                    job.outcome,
                    job.reason,
                    job.stop_reason,
                    job.delivery,
                    job.start_written,
                    job.end_written,
                    job.uid,
                    json.dumps(job.node.to_dict()) if job.node is not None else None,
                    job.traceparent,
                    job.formation_id,
                    job.run_uid,
                )
            ),
        )

    async def get(self, job_id: str) -> Job | None:
        return await self.store.read(lambda c: _one(c, BY_ID, (job_id,)))

    def get_sync(self, job_id: str) -> Job | None:
        rows = self.store.rows(BY_ID, (job_id,))
        return job_from_row(rows[0]) if rows else None

    async def newest(self, state: str | None = None, limit: int = LIST_LIMIT) -> list[Job]:
        """The newest ``limit`` jobs (in ``state``, if given), newest first."""
        sql, params = (NEWEST, (limit,)) if state is None else (BY_STATE, (state, limit))
        return await self.store.read(lambda c: [job_from_row(r) for r in c.execute(sql, params).fetchall()])

    async def unfinished(self) -> list[Job]:
        """Jobs recorded as ``starting`` or ``running``, oldest first (what reconcile looks for)."""
        return await self.store.read(lambda c: [job_from_row(r) for r in c.execute(UNFINISHED).fetchall()])

    async def counts_by_state(self) -> dict[str, int]:
        """How many stored jobs are in each state."""
        rows = await self.store.read(lambda c: c.execute(COUNTS).fetchall())
        return {str(r["state"]): int(r["n"]) for r in rows}


def _one(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> Job | None:
    rows = conn.execute(sql, params).fetchall()
    return job_from_row(rows[0]) if rows else None
