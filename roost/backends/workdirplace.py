"""Where a registering session's workdir is checked: on the disk of the host the session runs on.

At ``POST /register`` a session names its workdir, and the daemon accepts it only if it belongs
to the session's uid (docs/security.md, "Workdirs"). That is a question about one disk, so it is
asked where the session runs: a session that is a job the launcher placed on another node (the
Ray backend) has its workdir checked on that node, by the backend (its node's keeper runs the same
pure check there); every other session's on this host. A path that happens to exist on the
daemon's host proves nothing about the node, and the node's path need not exist here at all.

Which job a registration is: a delegated child's approval names it (its reservation's job id);
a top-level child of a job does not, so it is the running job on a node that has no session yet
and whose directory is (or holds) the workdir named.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from roost.backends.base import ChildDir, ProcessBackend
from roost.core.jobs import Job
from roost.system.blocking import BlockingExecutor
from roost.system.workdirs import registered_workdir

__all__ = ["RegisteredWorkdirs"]


class RegisteredWorkdirs:
    """Checks a registered workdir where its session runs (this host, or its job's node).

    ``jobs`` is the launcher's job index; without one (a backend whose children all run on this
    host) every check runs here, through the executor."""

    def __init__(
        self,
        executor: BlockingExecutor,
        backend: ProcessBackend | None = None,
        jobs: Callable[[], Mapping[str, Job]] | None = None,
    ) -> None:
        self._executor = executor
        self._backend = backend
        self._jobs = jobs

    def remote_job(self, workdir: str, job_id: str | None) -> Job | None:
        """The job on another node the registering session is, or None (it runs on this host)."""
        if self._jobs is None or self._backend is None:
            return None
        jobs = self._jobs()
        if job_id is not None:
            job = jobs.get(job_id)
            return job if job is not None and job.node is not None else None
        wanted = os.path.normpath(workdir)
        for job in jobs.values():
            if job.node is None or job.session_id is not None or job.final:
                continue
            if wanted == job.workdir or wanted.startswith(job.workdir.rstrip("/") + "/"):
                return job
        return None

    async def check(self, workdir: str, uid: int | None, job_id: str | None) -> str:
        """The normalised workdir if ``uid`` may use it where the session runs; else the refusal
        (:class:`roost.core.errors.BadRequest` or :class:`roost.system.workdirs.WorkdirRefused`)."""
        job = self.remote_job(workdir, job_id)
        if job is None or self._backend is None:
            return await self._executor.run(registered_workdir, workdir, uid)
        where = ChildDir(job.job_id, job.workdir, job.parent_workdir, job.process_uid, job.node)
        return await self._backend.check_workdir(where, workdir, uid)
