"""The daemon's trace sink: one line at a time into a session's ``trace.jsonl``, wherever it lives.

Why one place: the relay, the peer plane and the launcher all append to a session's trace.

* A session on this host: its ``trace.jsonl`` is written here, through an open writer per
  session. Writers are kept least recently used first and at most ``MAX_OPEN_TRACES`` stay open
  (the oldest is closed, and simply reopened if written again); a session's writer is closed
  when the session ends. Every write goes through the one executor.
* A session whose child runs on another node (a job the process backend placed there): nodes
  share no filesystem, so its lines go to that node and are appended there
  (:meth:`roost.backends.base.ProcessBackend.append_trace`, a node keeper's call). Lines for
  one session are queued and sent in batches, one batch in flight at a time, so they land in
  the order they were written and a burst costs one call, not one per line. Tokens are
  redacted here, before a line leaves this host.

Either way :meth:`TraceFiles.write` returns once the line is in the file (or failed, which is
logged and never fails the caller).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import structlog

from roost.observe.tracelines import TraceWriter, redact
from roost.state.sessions import SessionRecord
from roost.system.blocking import BlockingExecutor

if TYPE_CHECKING:
    from roost.core.jobs import ChildDir

__all__ = ["MAX_BATCH", "MAX_OPEN_TRACES", "NodeTraces", "TraceFiles", "TraceSink"]

log = structlog.get_logger("roost.daemon")

# Trace files the daemon keeps open at once (one descriptor each).
MAX_OPEN_TRACES = 256
# Lines sent to a node in one call, at most.
MAX_BATCH = 512

_Pending = tuple[str, dict[str, object], "asyncio.Future[str | None]"]


class NodeTraces(Protocol):
    """Where a session's trace lives when it is not on this host, and how lines get there."""

    def remote_dir(self, rec: SessionRecord) -> ChildDir | None:
        """The session's directory when its child runs on another node; None: on this host."""
        ...

    async def append_trace(
        self, dir: ChildDir, session_id: str, lines: Sequence[tuple[str, dict[str, object]]]
    ) -> list[str]: ...


@dataclass(eq=False)
class _Queue:
    """One remote session's lines waiting for their node, and the task sending them."""

    dir: ChildDir
    pending: list[_Pending] = field(default_factory=list)
    task: asyncio.Task[None] | None = None


class TraceFiles:
    """The trace sink: :meth:`write` one line to a session's trace, or get a local :meth:`writer`."""

    def __init__(self, executor: BlockingExecutor, nodes: NodeTraces | None = None) -> None:
        self._executor = executor
        self._nodes = nodes
        self._open: OrderedDict[str, TraceWriter] = OrderedDict()
        self._queues: dict[str, _Queue] = {}

    def _remote_dir(self, rec: SessionRecord) -> ChildDir | None:
        queue = self._queues.get(rec.session_id)
        if queue is not None:
            return queue.dir
        return self._nodes.remote_dir(rec) if self._nodes is not None else None

    def writer(self, rec: SessionRecord) -> TraceWriter | None:
        """The local writer for a session's ``trace.jsonl``; None when roost does not know its
        workdir, or when the session lives on another node (only :meth:`write` reaches it)."""
        if rec.workdir is None:
            return None
        writer = self._open.get(rec.session_id)
        if writer is not None:
            self._open.move_to_end(rec.session_id)
            return writer
        if self._remote_dir(rec) is not None:
            return None
        writer = self._open[rec.session_id] = TraceWriter(rec.workdir, rec.session_id, uid=rec.uid)
        if len(self._open) > MAX_OPEN_TRACES:
            _, evicted = self._open.popitem(last=False)
            self._executor.submit(evicted.close)
        return writer

    async def write(self, rec: SessionRecord, event_type: str, payload: dict[str, object]) -> str | None:
        """Append one line to the session's trace; returns its event id once it is written."""
        if rec.workdir is None:
            return None
        writer = self._open.get(rec.session_id)
        if writer is None:
            remote = self._remote_dir(rec)
            if remote is not None:
                return await self._send(rec.session_id, remote, event_type, payload)
            writer = self.writer(rec)
            if writer is None:
                return None
        else:
            self._open.move_to_end(rec.session_id)
        try:
            return await self._executor.run(writer.write, event_type, payload)
        except OSError as exc:
            log.warning("trace_write_failed", session_id=rec.session_id, event_type=event_type, error=str(exc))
            return None

    async def _send(self, session_id: str, dir: ChildDir, event_type: str, payload: dict[str, object]) -> str | None:
        """Queue a line for the session's node; one sender per session keeps them in order."""
        queue = self._queues.get(session_id)
        if queue is None:
            queue = self._queues[session_id] = _Queue(dir)
        line = redact(payload)
        assert isinstance(line, dict)
        done: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        queue.pending.append((event_type, line, done))
        if queue.task is None:
            queue.task = asyncio.get_running_loop().create_task(self._drain(session_id, queue))
        return await asyncio.shield(done)

    async def _drain(self, session_id: str, queue: _Queue) -> None:
        assert self._nodes is not None
        try:
            while queue.pending:
                batch, queue.pending = queue.pending[:MAX_BATCH], queue.pending[MAX_BATCH:]
                ids: Sequence[str | None]
                try:
                    ids = await self._nodes.append_trace(queue.dir, session_id, [(e, p) for e, p, _ in batch])
                except Exception as exc:  # a trace failure never fails the call it records
                    log.warning(
                        "trace_write_failed",
                        session_id=session_id,
                        event_type=batch[0][0],
                        lines=len(batch),
                        node=queue.dir.node.node_id if queue.dir.node else None,
                        error=str(exc) or type(exc).__name__,
                    )
                    ids = [None] * len(batch)
                for (_, _, done), eid in zip(batch, ids, strict=False):
                    if not done.done():
                        done.set_result(eid)
                for _, _, done in batch:
                    if not done.done():
                        done.set_result(None)
        finally:
            queue.task = None
            if self._queues.get(session_id) is queue and not queue.pending:
                del self._queues[session_id]

    async def close(self, rec: SessionRecord) -> None:
        """The session ended: close its writer, or wait until its queued lines reached its node
        (a session-end hook of the referee)."""
        writer = self._open.pop(rec.session_id, None)
        if writer is not None:
            await self._executor.run(writer.close)
        queue = self._queues.get(rec.session_id)
        if queue is not None and queue.task is not None:
            await asyncio.shield(queue.task)

    async def close_all(self) -> None:
        writers, self._open = list(self._open.values()), OrderedDict()
        for writer in writers:
            await self._executor.run(writer.close)
        tasks = [q.task for q in self._queues.values() if q.task is not None]
        if tasks:
            await asyncio.gather(*(asyncio.shield(t) for t in tasks), return_exceptions=True)


class TraceSink(Protocol):
    """What a service needs to record a trace line (:class:`TraceFiles` is the daemon's)."""

    async def write(self, rec: SessionRecord, event_type: str, payload: dict[str, object]) -> str | None: ...
