"""Each job's span from launch to completion, and each delegation's, on the event bus.

Why a span that outlives a request: a delegation tree is one trace only if every child's work
hangs under its parent's job. The job span (``roost.job.run``) is opened when the launcher has
the job's record, under the caller's ``traceparent`` (a top-level job) or under a delegation
span (``roost.delegation``) that is itself a child of the parent session's job span; it closes
when the job is final. Its ``traceparent`` is kept on the job (and in its row, so a daemon that
restarts closes the same span) and given to the child as ``TRACEPARENT``: the child's own spans,
its delegations, relayed sends and peer files all land in the same trace.

After a restart the open spans are gone from memory: the job's span is then reported when it
ends with the ids its row kept and its start at the daemon's restart; the delegation span of
that job is not reported again.
"""

from __future__ import annotations

from typing import Any

from a2a.protocol import traceparent
from a2a.protocol.traceparent import TraceParent
from roost.core.jobs import Job
from roost.observe.events import NO_PARENT, EventBus, ObservedError, Span

__all__ = ["JobSpans", "decided", "spawn_decision"]


def _attrs(prefix: str, job: Job) -> dict[str, Any]:
    out: dict[str, Any] = {
        f"{prefix}.job_id": job.job_id,
        f"{prefix}.name": job.name,
        f"{prefix}.version": job.version,
        f"{prefix}.delegation_id": job.delegation_id,
    }
    if job.parent_id is not None:
        out[f"{prefix}.parent_session_id"] = job.parent_id
    return out


class JobSpans:
    """Opens and closes the spans of jobs; owned by the launcher."""

    def __init__(self, events: EventBus) -> None:
        self.events = events
        self._open: dict[str, tuple[Job, Span | None, Span]] = {}

    def session_trace(self, session_id: str | None) -> TraceParent | None:
        """The trace context of a session's work: its job's span (None: no job of ours)."""
        return self.events.session_trace(session_id) if session_id is not None else None

    def opened(self, job: Job, caller: str | None) -> None:
        """Open the job's span (and, for a delegated job, its delegation span); sets
        ``job.traceparent``. ``caller`` is the request's ``traceparent`` header, if any."""
        parent = traceparent.parse(caller.strip().lower()) if caller else None
        if parent is None and job.parent_id is not None:
            parent = self.session_trace(job.parent_id)
        if parent is None:
            parent = TraceParent("00", traceparent.new_trace_id(), NO_PARENT, "01")
        delegation = None
        if job.parent_id is not None:
            delegation = self.events.start("roost.delegation.invoke", trace=parent, **_attrs("roost.delegation", job))
            span = self.events.start("roost.job.run", parent=delegation, **_attrs("roost.job", job))
        else:
            span = self.events.start("roost.job.run", trace=parent, **_attrs("roost.job", job))
        self._open[job.job_id] = (job, delegation, span)
        tp = span.traceparent()
        job.traceparent = tp.format() if tp is not None else None

    def abandoned(self, job_id: str) -> None:
        """A launch that failed before its child was supervised: close its spans, if open."""
        opened = self._open.get(job_id)
        if opened is not None:
            self.closed(opened[0])

    def closed(self, job: Job) -> None:
        """Close the job's spans with how it ended (opening its span first after a restart)."""
        _, delegation, span = self._open.pop(job.job_id, (job, None, None))
        if span is None:
            tp = traceparent.parse(job.traceparent)
            if tp is None:
                return
            root = TraceParent(tp.version, tp.trace_id, NO_PARENT, tp.flags)
            span = self.events.start("roost.job.run", trace=root, span_id=tp.parent_id, **_attrs("roost.job", job))
        ended: dict[str, Any] = {"roost.job.state": job.state}
        for key, value in (("session_id", job.session_id), ("outcome", job.outcome), ("reason", job.reason)):
            if value is not None:
                ended[f"roost.job.{key}"] = value
        as_delegation = {k.replace("roost.job.", "roost.delegation."): v for k, v in ended.items()}
        if job.state == "complete":
            span.completed(**ended)
            if delegation is not None:
                delegation.completed(**as_delegation)
            return
        error = ObservedError(
            name=f"job_{job.state}",
            category="aborted" if job.state == "terminated" else "tool",
            message=job.reason or f"the job ended {job.state}",
        )
        span.failed(error, **ended)
        if delegation is not None:
            delegation.failed(error, **as_delegation)


def spawn_decision(events: EventBus, capsule: str, trace: TraceParent | None) -> Span | None:
    """The span of one referee decision (``roost.referee.spawn``), under ``trace`` (the caller's
    or its session's job span); None when no exporter listens. Only then: at a fleet's spawn rate
    these events would push every other event out of the bus's ring, and the decisions are
    counted in ``roost_spawn_requests_total`` either way."""
    if events.sink is None:
        return None
    attrs: dict[str, Any] = {"roost.referee.capsule": capsule}
    return events.start("roost.referee.spawn", trace=trace, **attrs)


def decided(span: Span | None, session_id: str | None, refusal: tuple[str, str] | None) -> None:
    """End a decision span: allowed, or refused with the refusal's class and sentence (a
    refusal sentence names no token). ``session_id`` is the caller's session, once known."""
    if span is None:
        return
    if session_id is not None and span.trace_id is None:
        span.within(span.bus.session_trace(session_id))
    attrs: dict[str, Any] = {"roost.referee.decision": "allowed" if refusal is None else "refused"}
    if session_id is not None:
        attrs["roost.referee.session_id"] = session_id
    if refusal is None:
        span.completed(**attrs)
        return
    kind, sentence = refusal
    attrs["roost.referee.reason"] = sentence
    span.failed(ObservedError(name=kind, category="authorization", message=sentence), **attrs)
