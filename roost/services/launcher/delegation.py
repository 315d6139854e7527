"""The parent's side of a delegation: its ``delegation_start`` and ``delegation`` trace lines.

A delegated job leaves two lines in its parent session's trace: ``delegation_start`` once the
child reported ready, and ``delegation`` when it ended (or was refused, or failed to start),
with its outcome and reason. Each is written once: a job the launcher re-adopted after a restart
first looks whether the line is already there, since a previous daemon may have written it
just before it died (``docs/architecture.md``, the job's life); a parent whose child runs on
another node has its trace there, and is read through the process backend.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from roost.backends.base import ChildDir, ProcessBackend
from roost.core.jobs import Job
from roost.observe.tracelines import TRACE_FILE, read_trace, trace_path
from roost.services.launcher.childrecords import READ_MAX
from roost.state.sessions import SessionRecord
from roost.system.blocking import BlockingExecutor

__all__ = ["DelegationTrace", "TraceSink"]

TraceSink = Callable[[SessionRecord, str, dict[str, object]], Awaitable[str | None]]
"""Appends one line to a session's trace (the daemon's trace writers); returns its event id."""


def relative(path: str, base: str | None) -> str:
    """``path`` relative to ``base`` (both absolute; the child dir is always under the parent's)."""
    try:
        return str(Path(path).relative_to(base or "/"))
    except ValueError:
        return path


class DelegationTrace:
    """Writes a job's lines into its parent's trace, each once."""

    def __init__(
        self,
        write: TraceSink,
        executor: BlockingExecutor,
        *,
        backend: ProcessBackend | None = None,
        jobs: Callable[[], Mapping[str, Job]] | None = None,
    ) -> None:
        self._write = write
        self._executor = executor
        # A parent whose child runs on another node has its trace there (nodes share no filesystem).
        self._backend = backend
        self._jobs = jobs

    def _remote_dir(self, parent: SessionRecord) -> ChildDir | None:
        if self._jobs is None:
            return None
        jobs = self._jobs()
        if parent.job_id is not None:
            job = jobs.get(parent.job_id)
        else:
            job = next((j for j in jobs.values() if j.session_id == parent.session_id), None)
        if job is None or job.node is None:
            return None
        return ChildDir(job.job_id, job.workdir, job.parent_workdir, job.process_uid, job.node)

    async def _remote_lines(self, dir: ChildDir, session_id: str) -> list[dict[str, object]]:
        """The parent's trace read on its node, from the start, in chunks."""
        assert self._backend is not None
        name = f".murmur/{session_id}/{TRACE_FILE}"
        data, pos = bytearray(), 0
        while True:
            start, chunk = await self._backend.read_file(dir, name, pos, READ_MAX)
            if start != pos or not chunk:
                break
            data += chunk
            pos += len(chunk)
        out: list[dict[str, object]] = []
        for raw in bytes(data).splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                out.append(line)
        return out

    async def has(self, parent: SessionRecord, event_type: str, delegation_id: str) -> bool:
        """Whether the parent's trace already holds that line for that delegation."""
        if parent.workdir is None:
            return False
        remote = self._remote_dir(parent) if self._backend is not None else None
        if remote is not None:
            lines = await self._remote_lines(remote, parent.session_id)
            return any(ln.get("event_type") == event_type and ln.get("delegation_id") == delegation_id for ln in lines)

        def scan() -> bool:
            path = trace_path(parent.workdir or "", parent.session_id)
            try:
                lines = read_trace(path)
            except OSError:
                return False
            return any(ln.get("event_type") == event_type and ln.get("delegation_id") == delegation_id for ln in lines)

        return await self._executor.run(scan)

    async def start_line(self, job: Job, parent: SessionRecord, *, readopted: bool) -> None:
        """``delegation_start`` for a child that reported ready (once)."""
        if job.start_written:
            return
        if readopted and await self.has(parent, "delegation_start", job.delegation_id):
            job.start_written = True
            return
        await self._write(
            parent,
            "delegation_start",
            {
                "delegation_id": job.delegation_id,
                "capsule": job.name,
                "version": job.version,
                "child_session_id": job.session_id,
                "child_workdir": relative(job.workdir, parent.workdir),
            },
        )
        job.start_written = True

    async def end_line(
        self, job: Job, parent: SessionRecord, duration: int, outcome: str, reason: str | None, *, readopted: bool
    ) -> None:
        """``delegation`` for a job that ended (once)."""
        if readopted and await self.has(parent, "delegation", job.delegation_id):
            job.end_written = True
            return
        await self._write(
            parent,
            "delegation",
            {
                "capsule": job.name,
                "version": job.version,
                "delegation_id": job.delegation_id,
                "child_session_id": job.session_id,
                "duration_ms": duration,
                "outcome": outcome,
                "reason": reason,
            },
        )
        job.end_written = True

    async def not_started(
        self,
        parent: SessionRecord,
        name: str,
        version: str,
        t0: float,
        outcome: str,
        reason: str | None,
    ) -> None:
        """``delegation`` for a launch that was refused or never got a child running
        (no delegation id or child session yet); ``t0`` is the launch's monotonic start."""
        await self._write(
            parent,
            "delegation",
            {
                "capsule": name,
                "version": version,
                "delegation_id": None,
                "child_session_id": None,
                "duration_ms": int((time.monotonic() - t0) * 1000),
                "outcome": outcome,
                "reason": reason,
            },
        )
