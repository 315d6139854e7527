"""The job record: one launched child, from ``starting`` to its final state, kept in SQLite (schema: the
``jobs`` entry of :data:`roost.state.store.MIGRATIONS`).

A job row is the launcher's durable memory of a child it started. It is written (one full-row
upsert) at every state change, so after a ``kill -9`` of the daemon the reconcile pass knows
every child it had running, where its directory is, which pid and process start (ticks since boot) it had,
whether its ``delegation_start``/``delegation`` lines were written and how far a completion
delivery got (``delivery``: ``posting`` is the marker that makes delivery at-most-once across a
crash — a post whose answer was never recorded is not sent again).

Where a child runs (:class:`NodeRef`) and its directory (:class:`ChildDir`) are plain values
here too, so the store's repository and the trace sink can name them without importing a
process backend.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from roost.core.admin_models import JobView, NodeView
from roost.core.wire import FINAL_JOB_STATES, JobState

__all__ = ["ChildDir", "Job", "JobState", "NodeRef", "StopReason", "state_for_status"]


@dataclass(frozen=True, slots=True)
class NodeRef:
    """The machine a child runs on: a stable id and an address an operator can reach it by.

    ``None`` wherever a ``NodeRef`` is optional means "this host". It is what the job record's
    ``node`` field holds (``{"node_id": ..., "address": ...}``).
    """

    node_id: str
    address: str

    def to_dict(self) -> NodeView:
        return {"node_id": self.node_id, "address": self.address}

    @classmethod
    def from_dict(cls, obj: object) -> NodeRef | None:
        """The reverse of :meth:`to_dict`; None for anything that is not such a mapping."""
        if not isinstance(obj, dict):
            return None
        node_id, address = obj.get("node_id"), obj.get("address")
        if not isinstance(node_id, str) or not isinstance(address, str):
            return None
        return cls(node_id, address)


@dataclass(frozen=True, slots=True)
class ChildDir:
    """A job's directory, as every directory method receives it.

    ``workdir`` is the absolute path the child sees as its workdir. A delegated child's
    directory lies under ``parent_workdir`` (its parent session's registered workdir): a backend
    walks down from there and refuses a link anywhere below it. A top-level job's directory is
    its own base (``parent_workdir`` is None). ``uid`` owns what is created (None: the daemon's
    own uid). ``node`` is where the directory lives (None: this host); a backend that runs
    children elsewhere keeps each job's directory on its child's node.
    """

    job_id: str
    workdir: str
    parent_workdir: str | None
    uid: int | None
    node: NodeRef | None = None


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
    """The job's owner: its parent session's uid, or the top-level launcher's."""
    run_uid: int | None = None
    """The uid its process runs as when that is not the owner's: the config's ``run_as`` user for
    an operator's job (None: the owner's uid)."""
    node: NodeRef | None = None
    """The machine its child runs on (None: this host)."""
    traceparent: str | None = None
    """The W3C ``traceparent`` naming the job's span (its trace is its delegation tree's)."""
    formation_id: str | None = None
    """The formation its child joins (``MURMUR_FORMATION_ID``): its parent's, or the operator's."""
    # In-memory only: set once the exit has been handled (completion, trace, record).
    done: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    completion: dict[str, object] | None = field(default=None, repr=False)
    readopted: bool = field(default=False, repr=False)
    """In memory: found running or lost by reconcile (a previous daemon may have written its lines)."""
    finalizing: bool = field(default=False, repr=False)
    """In memory: its exit is being handled (a second caller returns at once)."""

    @property
    def process_uid(self) -> int | None:
        """The uid the job's process runs as (and owns what is made for it)."""
        return self.run_uid if self.run_uid is not None else self.uid

    @property
    def final(self) -> bool:
        return self.state in FINAL_JOB_STATES

    @property
    def delegated(self) -> bool:
        return self.parent_id is not None

    def view(self) -> JobView:
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
            "trace_id": self.traceparent[3:35] if self.traceparent else None,
            "uid": self.uid,
            "formation_id": self.formation_id,
        }
