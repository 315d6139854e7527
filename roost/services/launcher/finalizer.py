"""Carrying out the finalize decision: the record, its delivery, the parent's line, the state.

:mod:`roost.core.finalize` decides with no I/O; this module gathers the facts it decides on
(the job's ``completion.json``, its session, its parent) and does what it said, in the order the
guarantees need: the record is written (``delivered: false``) before any post; the job record
says ``posting`` before the first post, so a daemon that dies mid-post never posts again; the
parent's ``delegation`` line lands before the job's state turns final.

A child this launcher started does not post its own completion: it writes ``completion.json``
and the launcher delivers it, sealed under the parent's door key, so the parent's door records
the delegation's trust (``docs/security.md``, "Sealed origin and trust"). What the daemon seals
is vouched for first (:func:`vouched`): the identity lines are the job's, not the child's word.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import structlog

from a2a.client import A2AClient
from a2a.protocol import traceparent
from roost.backends.base import ChildDir, ProcessBackend
from roost.core.completion import CompletionRecord, SpawnerHandle, Status, crash_detail, cut_detail
from roost.core.finalize import Decision, Existing, Facts, decide, wants_own_session_end
from roost.core.jobs import Job, JobState
from roost.observe.events import EventBus, ObservedError
from roost.observe.metrics import Metrics
from roost.services.completionfile import deliver
from roost.services.launcher.delegation import DelegationTrace
from roost.services.referee.service import wall_ms
from roost.state.repos.jobs import JobRepository
from roost.state.sessions import SessionTable
from roost.state.store import Store

__all__ = ["Completer", "child_dir", "process_attrs", "vouched"]

log = structlog.get_logger("roost.launcher")


def child_dir(job: Job) -> ChildDir:
    """The job's directory, as the backend is asked about it."""
    return ChildDir(job.job_id, job.workdir, job.parent_workdir, job.process_uid, job.node)


def process_attrs(job: Job, **more: Any) -> dict[str, Any]:
    """A job's ``roost.process.*`` event attributes, and (``trace``) the job's span as the
    parent of the span they start (roost/observe/jobspans.py)."""
    out: dict[str, Any] = {
        "roost.process.job_id": job.job_id,
        "roost.process.delegation_id": job.delegation_id,
        "roost.process.capsule": f"{job.name}@{job.version}",
    }
    out.update({f"roost.process.{k}": v for k, v in more.items()})
    if job.traceparent is not None:
        out["trace"] = traceparent.parse(job.traceparent)
    return out


def vouched(rec: CompletionRecord, job: Job) -> CompletionRecord:
    """A child's own record as the daemon seals it: the job's identity, the child's outcome.

    The delegation id, capsule, session and workdir are the job's (a child cannot name another
    delegation or session in a sealed message); the status is ``ok`` or ``error`` (anything else
    reads ``error``); a result path is one line of printable text or none; the detail is cut.
    """
    status = rec.status if rec.status in ("ok", "error") else "error"
    path = rec.result_path
    if path is not None and (not path or not path.isprintable() or len(path) > 1024):
        path = None
    return replace(
        rec,
        delegation_id=job.delegation_id,
        capsule_name=job.name,
        capsule_version=job.version,
        session_id=job.session_id or "",
        workdir=job.workdir,
        status=status,
        reported_by="child",
        result_path=path,
        detail=cut_detail(rec.detail) if rec.detail is not None else None,
    )


class Completer:
    """Writes and delivers a finished job's completion, then its parent's line, then its state."""

    def __init__(
        self,
        *,
        backend: ProcessBackend,
        table: SessionTable,
        store: Store,
        metrics: Metrics,
        events: EventBus,
        a2a: A2AClient,
        door_key: Callable[[str], bytes | None],
        trace: DelegationTrace,
        set_state: Callable[[Job, JobState], None],
    ) -> None:
        self.backend = backend
        self.table = table
        self.store = store
        self.metrics = metrics
        self.events = events
        self.a2a = a2a
        self.door_key = door_key
        self.trace = trace
        self.set_state = set_state
        self.delivery_window_secs = 30.0

    async def complete(self, job: Job, own_end: str | None, *, readopted: bool, self_ended: bool = False) -> None:
        backend = self.backend
        existing = await backend.read_completion(child_dir(job))
        handle = SpawnerHandle.parse(job.handle) if job.handle else None
        parent = self.table.get(job.parent_id) if job.parent_id else None
        duration = max(0, wall_ms() - job.created_ms)
        facts = Facts(
            delegated=job.delegated,
            parent_running=parent is not None and parent.running,
            stop_reason=job.stop_reason,
            existing=(
                Existing(existing.status, existing.delivered, existing.reported_by, existing.detail)
                if existing is not None
                else None
            ),
            own_end=own_end,
            exit_status=job.exit_status or "",
            addressed=handle is not None and handle.addressed,
            delivery=job.delivery,
            deadline_secs=job.deadline_secs,
            has_session=job.session_id is not None,
            end_written=job.end_written,
            self_ended=self_ended,
        )
        if wants_own_session_end(facts) and job.session_id is not None:
            # A re-adopted child's exit status is not ours to read: its own records say how it ended.
            facts = replace(facts, told=await backend.own_session_end(child_dir(job), job.session_id))
        decision = decide(facts)
        if decision.write == "none":
            # The parent is gone: nobody to report to, and no completion.json.
            self.set_state(job, decision.state)
            job.completion = existing.to_dict() if existing else None
            job.outcome, job.reason = decision.outcome, decision.reason
            return
        final = await self._record(job, decision, existing, handle, duration)
        reason = decision.reason if not decision.detail_from_stderr else final.detail
        job.completion = final.to_dict()
        job.outcome, job.reason = decision.outcome, reason
        try:
            if decision.trace_line and parent is not None:
                await self.trace.end_line(job, parent, duration, decision.outcome, reason, readopted=readopted)
        finally:
            self.set_state(job, decision.state)

    async def _record(
        self,
        job: Job,
        decision: Decision,
        existing: CompletionRecord | None,
        handle: SpawnerHandle | None,
        duration: int,
    ) -> CompletionRecord:
        """The record the decision names, written (and posted) as it says."""
        if decision.write == "existing":
            assert existing is not None
            rec = vouched(existing, job) if decision.send and existing.reported_by == "child" else existing
        else:
            detail = decision.detail
            if decision.detail_from_stderr:
                tail = await self.backend.stderr_tail(child_dir(job))
                detail = crash_detail(job.exit_status or "unknown", tail)
            rec = self._launcher_record(job, decision.status or "crashed", duration, detail)
        if not decision.send:
            return rec
        if decision.attempts == 0:
            return await self._report(job, None, rec)
        return await self._deliver(job, handle, rec, attempts=decision.attempts)

    @staticmethod
    def _launcher_record(job: Job, status: Status, duration: int, detail: str | None) -> CompletionRecord:
        return CompletionRecord(
            delegation_id=job.delegation_id,
            capsule_name=job.name,
            capsule_version=job.version,
            session_id=job.session_id or "",
            status=status,
            workdir=job.workdir,
            duration_ms=duration,
            reported_by="launcher",
            detail=detail,
        )

    async def _deliver(
        self, job: Job, handle: SpawnerHandle | None, rec: CompletionRecord, *, attempts: int
    ) -> CompletionRecord:
        """Record, post (at most ``attempts`` times), record again. At most once across a crash."""
        if handle is None or not handle.addressed:
            return await self._report(job, None, rec)
        span = self.events.start(
            "roost.completion.deliver", subsystem="completion", **process_attrs(job, attempts=attempts)
        )
        job.delivery = "posting"
        with contextlib.suppress(Exception):
            await self.store.commit([JobRepository.upsert_op(job)])
        final = replace(rec, delivered=False, delivery_error=None)
        tries = 0
        for _ in range(attempts):
            tries += 1
            final = await self._report(job, handle, final)
            if final.delivered:
                break
        job.delivery = "delivered" if final.delivered else "failed"
        self.metrics.deliveries.labels(outcome=job.delivery).inc()
        if final.delivered:
            span.completed(**{"roost.completion.tries": tries})
        else:
            span.failed(
                ObservedError(name="DeliveryFailed", category="network", message=final.delivery_error),
                **{"roost.completion.tries": tries},
            )
            log.warning(
                "completion_undelivered",
                job_id=job.job_id,
                delegation_id=job.delegation_id,
                tries=tries,
                error=final.delivery_error,
            )
        return final

    async def _report(self, job: Job, handle: SpawnerHandle | None, rec: CompletionRecord) -> CompletionRecord:
        """Write ``delivered: false``, post (when addressed), rewrite with the result."""
        first = replace(rec, delivered=False, delivery_error=None)
        await self.backend.write_completion(child_dir(job), first)
        if handle is None or not handle.addressed:
            return first
        seal_key = self.door_key(handle.session_id)  # so the parent's door believes the trust
        error = await deliver(self.a2a, handle, first, window_secs=self.delivery_window_secs, seal_key=seal_key)
        final = replace(first, delivered=error is None, delivery_error=error)
        await self.backend.write_completion(child_dir(job), final)
        return final
