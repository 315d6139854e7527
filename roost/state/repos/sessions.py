"""The ``sessions`` table: one row per session the referee registered (``roost.state.sessions``)."""

from __future__ import annotations

from roost.core.wire import ACTIVE_JOB_STATES
from roost.state.sessions import SessionRecord, identity_columns
from roost.state.store import Op, Store

__all__ = ["SessionRepository"]

INSERT = (
    "INSERT INTO sessions (session_id, name, version, sha256, status, parent_id, depth_remaining,"
    " envelope, manifest, trust, cred_nonce, handle_salt, workdir, pid, pid_start, capsule_url,"
    " job_id, created_ms, ended_ms, uid, containment, formation_id, workdir_dev, workdir_ino)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
SET_STATUS = "UPDATE sessions SET status = ?, ended_ms = ?, end_reason = ? WHERE session_id = ?"
SET_JOB = "UPDATE sessions SET job_id = ? WHERE session_id = ?"
SET_WORKDIR_ID = "UPDATE sessions SET workdir_dev = ?, workdir_ino = ? WHERE session_id = ?"
BY_ID = "SELECT * FROM sessions WHERE session_id = ?"
# Only what is live: running sessions, and the ended ones an unfinished job still names (its
# child's own record of how it ended, or its parent).
_ACTIVE = ", ".join(f"'{s}'" for s in sorted(ACTIVE_JOB_STATES))
_NAMED = f"""
    SELECT session_id FROM jobs WHERE state IN ({_ACTIVE}) AND session_id IS NOT NULL
    UNION SELECT parent_id FROM jobs WHERE state IN ({_ACTIVE}) AND parent_id IS NOT NULL
"""
LIVE = f"""
    SELECT * FROM sessions WHERE status = 'running'
    UNION
    SELECT * FROM sessions WHERE session_id IN ({_NAMED})
"""


def prune_sql(batch: int) -> str:
    """Delete up to ``batch`` sessions that ended at or before the bound parameter, except the
    ones an unfinished job still names (what start-up loads as live)."""
    return (
        "DELETE FROM sessions WHERE rowid IN (SELECT rowid FROM sessions"
        " WHERE ended_ms IS NOT NULL AND ended_ms <= ? AND status != 'running'"
        f" AND session_id NOT IN ({_NAMED}) LIMIT {int(batch)})"
    )


class SessionRepository:
    """Writes and reads of session rows, through one :class:`~roost.state.store.Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @staticmethod
    def insert_op(rec: SessionRecord) -> Op:
        return (
            INSERT,
            (
                rec.session_id,
                rec.name,
                rec.version,
                rec.sha256,
                rec.status,
                rec.parent_id,
                rec.depth_remaining,
                rec.envelope.to_json(),
                rec.manifest.model_dump_json(),
                rec.trust,
                rec.cred_nonce,
                rec.handle_salt,
                rec.workdir,
                rec.pid,
                rec.pid_start,
                rec.capsule_url,
                rec.job_id,
                rec.created_ms,
                rec.ended_ms,
                rec.uid,
                rec.containment,
                rec.formation_id,
                *identity_columns(rec.workdir_id),
            ),
        )

    @staticmethod
    def status_op(rec: SessionRecord) -> Op:
        """The session's end (status, when, why)."""
        return (SET_STATUS, (rec.status, rec.ended_ms, rec.end_reason, rec.session_id))

    @staticmethod
    def workdir_id_op(rec: SessionRecord) -> Op:
        """The workdir's identity as taken at register (``SessionRecord.workdir_id``)."""
        return (SET_WORKDIR_ID, (*identity_columns(rec.workdir_id), rec.session_id))

    @staticmethod
    def job_op(session_id: str, job_id: str) -> Op:
        """Record which job launched the session (known once the child registered)."""
        return (SET_JOB, (job_id, session_id))

    async def get(self, session_id: str) -> SessionRecord | None:
        """The stored session, read through the executor."""
        rows = await self.store.read(lambda c: c.execute(BY_ID, (session_id,)).fetchall())
        return SessionRecord.from_row(rows[0]) if rows else None

    def live_sync(self) -> list[SessionRecord]:
        """Running sessions and those an unfinished job names (blocking; startup only)."""
        return [SessionRecord.from_row(row) for row in self.store.rows(LIVE)]
