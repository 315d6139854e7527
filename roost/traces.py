"""Open ``trace.jsonl`` writers, one per session, shared by every service that records a trace line.

Why one place: the relay, the peer plane and the launcher all append to a session's trace, and
each open writer holds a descriptor. Writers are kept least recently used first and at most
``MAX_OPEN_TRACES`` stay open (the oldest is closed, and simply reopened if written again);
a session's writer is closed when the session ends. Every write goes through the one executor.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

import structlog

from roost.blocking import BlockingExecutor
from roost.sessions import SessionRecord
from roost.trace import TraceWriter

__all__ = ["MAX_OPEN_TRACES", "TraceFiles", "TraceSink"]

log = structlog.get_logger("roost.daemon")

# Trace files the daemon keeps open at once (one descriptor each).
MAX_OPEN_TRACES = 256


class TraceFiles:
    """The trace sink: :meth:`write` one line to a session's trace, or get its :meth:`writer`."""

    def __init__(self, executor: BlockingExecutor) -> None:
        self._executor = executor
        self._open: OrderedDict[str, TraceWriter] = OrderedDict()

    def writer(self, rec: SessionRecord) -> TraceWriter | None:
        """The writer for a session's ``trace.jsonl``; None when roost does not know its workdir."""
        if rec.workdir is None:
            return None
        writer = self._open.get(rec.session_id)
        if writer is not None:
            self._open.move_to_end(rec.session_id)
            return writer
        writer = self._open[rec.session_id] = TraceWriter(rec.workdir, rec.session_id, uid=rec.uid)
        if len(self._open) > MAX_OPEN_TRACES:
            _, evicted = self._open.popitem(last=False)
            self._executor.submit(evicted.close)
        return writer

    async def write(self, rec: SessionRecord, event_type: str, payload: dict[str, object]) -> str | None:
        """Append one line to the session's trace through the executor; returns its event id."""
        writer = self.writer(rec)
        if writer is None:
            return None
        try:
            return await self._executor.run(writer.write, event_type, payload)
        except OSError as exc:
            log.warning("trace_write_failed", session_id=rec.session_id, event_type=event_type, error=str(exc))
            return None

    async def close(self, rec: SessionRecord) -> None:
        """The session ended: close its writer (a session-end hook of the referee)."""
        writer = self._open.pop(rec.session_id, None)
        if writer is not None:
            await self._executor.run(writer.close)

    async def close_all(self) -> None:
        writers, self._open = list(self._open.values()), OrderedDict()
        for writer in writers:
            await self._executor.run(writer.close)


class TraceSink(Protocol):
    """What a service needs to record a trace line (:class:`TraceFiles` is the daemon's)."""

    async def write(self, rec: SessionRecord, event_type: str, payload: dict[str, object]) -> str | None: ...
