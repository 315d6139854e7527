"""Where a launched session's trace lives: the trace sink's :class:`~roost.observe.tracesink.NodeTraces`
answered from the launcher's jobs, for a backend whose children run on other nodes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from roost.core.jobs import ChildDir, Job
from roost.state.sessions import SessionRecord

__all__ = ["JobNodes"]


class _TraceBackend(Protocol):
    async def append_trace(
        self, dir: ChildDir, session_id: str, lines: Sequence[tuple[str, dict[str, object]]]
    ) -> list[str]: ...


class JobNodes:
    """:class:`NodeTraces` from the launcher's jobs: a session launched as a job whose record
    names a node lives there (the job record's ``node``); its backend appends the lines."""

    def __init__(self, backend: _TraceBackend, jobs: Callable[[], Mapping[str, Job]]) -> None:
        self._backend = backend
        self._jobs = jobs

    def remote_dir(self, rec: SessionRecord) -> ChildDir | None:
        jobs = self._jobs()
        if rec.job_id is not None:
            job = jobs.get(rec.job_id)
        else:
            # A top-level child that did not name its job at register: its ready line did.
            job = next((j for j in jobs.values() if j.session_id == rec.session_id), None)
        if job is None or job.node is None:
            return None
        return ChildDir(job.job_id, job.workdir, job.parent_workdir, job.process_uid, job.node)

    async def append_trace(
        self, dir: ChildDir, session_id: str, lines: Sequence[tuple[str, dict[str, object]]]
    ) -> list[str]:
        return await self._backend.append_trace(dir, session_id, lines)
