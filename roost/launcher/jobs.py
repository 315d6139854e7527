"""The job record: one launched child, from ``starting`` to its final state, kept in SQLite (schema: the
``jobs`` entry of :data:`roost.store.MIGRATIONS`).

A job row is the launcher's durable memory of a child it started. It is written (one full-row
upsert) at every state change, so after a ``kill -9`` of the daemon the reconcile pass knows
every child it had running, where its directory is, which pid and process start (ticks since boot) it had,
whether its ``delegation_start``/``delegation`` lines were written and how far a completion
delivery got (``delivery``: ``posting`` is the marker that makes delivery at-most-once across a
crash — a post whose answer was never recorded is not sent again).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from roost.launcher.backend import NodeRef
from roost.wire import FINAL_JOB_STATES, JobState

__all__ = ["Job", "JobState", "StopReason", "state_for_status"]

StopReason = Literal["cancel", "operator_cancel", "deadline", "parent_ended", "shutdown"]
Delivery = Literal["none", "posting", "delivered", "failed"]


def state_for_status(status: str) -> JobState:
    """Job state for a completion status (``ok`` → ``complete``, ``error`` → ``failed``)."""
    return {"ok": "complete", "error": "failed", "crashed": "crashed", "terminated": "terminated"}.get(status, "failed")  # type: ignore[return-value]


@dataclass(slots=True, eq=False)
class Job:
    job_id: str
    delegation_id: str
    name: str
    version: str
    sha256: str
    workdir: str
    trust: str
    deadline_secs: float
    created_ms: int
    parent_id: str | None = None
    parent_workdir: str | None = None
    session_id: str | None = None
    capsule_url: str | None = None
    state: JobState = "starting"
    pid: int | None = None
    pid_start: float | None = None
    handle: str | None = None
    ready_ms: int | None = None
    ended_ms: int | None = None
    exit_status: str | None = None
    outcome: str | None = None
    reason: str | None = None
    stop_reason: StopReason | None = None
    delivery: Delivery = "none"
    start_written: bool = False
    end_written: bool = False
    uid: int | None = None
    """The uid the job runs as: its parent session's, or the top-level launcher's."""
    node: NodeRef | None = None
    """The machine its child runs on (None: this host)."""
    # In-memory only: set once the exit has been handled (completion, trace, record).
    done: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    completion: dict[str, object] | None = field(default=None, repr=False)
    readopted: bool = field(default=False, repr=False)
    """In memory: found running or lost by reconcile (a previous daemon may have written its lines)."""
    finalizing: bool = field(default=False, repr=False)
    """In memory: its exit is being handled (a second caller returns at once)."""

    @property
    def final(self) -> bool:
        return self.state in FINAL_JOB_STATES

    @property
    def delegated(self) -> bool:
        return self.parent_id is not None

    def view(self) -> dict[str, object]:
        """The JSON answer of ``POST /jobs`` and ``GET /jobs/{job_id}``."""
        return {
            "job_id": self.job_id,
            "delegation_id": self.delegation_id,
            "session_id": self.session_id,
            "capsule_url": self.capsule_url,
            "name": self.name,
            "version": self.version,
            "sha256": self.sha256,
            "workdir": self.workdir,
            "state": self.state,
            "parent_session_id": self.parent_id,
            "created_ms": self.created_ms,
            "ready_ms": self.ready_ms,
            "ended_ms": self.ended_ms,
            "exit_status": self.exit_status,
            "outcome": self.outcome,
            "reason": self.reason,
            "completion": self.completion,
            "node": self.node.to_dict() if self.node is not None else None,
        }
