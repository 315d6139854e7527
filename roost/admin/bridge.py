"""The admin API's view of the launcher's jobs: list, show, launch, cancel, reconcile, log files.

Why a bridge: the launcher's own routes answer a job only to its parent session (or, for a
top-level job, to a loopback caller); the operator on the admin socket sees every job, so
listing and showing ask the launcher for its memory merged over the job repository. Launch
and cancel go through the launcher's public methods so the referee, lifelines and the
one-completion rule apply exactly as on ``POST /jobs``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from roost.backends.base import ChildDir
from roost.core.admin_models import JobView
from roost.core.errors import NotFound, Unavailable
from roost.core.jobs import Job
from roost.core.requests import LaunchRequest
from roost.core.wire import ACTIVE_JOB_STATES, JOB_STATES
from roost.services.launcher.childrecords import LOG_FILE
from roost.services.launcher.finalizer import child_dir
from roost.state.sessions import SessionRecord, SessionTable

if TYPE_CHECKING:
    from roost.services.launcher.service import Launcher

__all__ = [
    "ACTIVE_STATES",
    "JOB_STATES",
    "JobSources",
    "cancel",
    "counts_by_state",
    "get_job",
    "launch",
    "list_jobs",
    "log_paths",
    "log_target",
    "out_files",
    "reconcile_report",
    "remote_dir",
    "remote_log_names",
]

ACTIVE_STATES = frozenset(ACTIVE_JOB_STATES)
RESULT_FILE = "out/result.txt"


@dataclass(frozen=True, slots=True)
class JobSources:
    """Where the admin API's view of jobs and their logs comes from."""

    launcher: Launcher
    table: SessionTable


async def list_jobs(jobs: JobSources, state: str | None = None) -> list[JobView]:
    """Every job (memory over the store: memory is ahead of write-behind), oldest first."""
    return [j.view() for j in await jobs.launcher.list_jobs(state)]


def counts_by_state(jobs: JobSources) -> dict[str, int]:
    """Jobs per state among those the launcher holds in memory (every active job is there)."""
    return jobs.launcher.counts_by_state()


async def _job(jobs: JobSources, job_id: str) -> Job:
    job = await jobs.launcher.stored_job(job_id)
    if job is None:
        raise NotFound(f"job '{job_id}' was not found")
    return job


async def get_job(jobs: JobSources, job_id: str) -> JobView:
    """The job; for a child on another node also its ``out_files`` (names below its directory
    there), since ``roostctl job`` cannot list that directory itself."""
    job = await _job(jobs, job_id)
    view = job.view()
    files = await out_files(jobs, job)
    if files is not None:
        view["out_files"] = files
    return view


async def launch(jobs: JobSources, req: LaunchRequest) -> JobView:
    """A top-level launch on the operator's behalf: admitted like a loopback ``POST /jobs`` (the
    launcher's one admission decision refuses a draining daemon, with its own sentence)."""
    job = await jobs.launcher.launch(req, None, loopback=True, uid=os.geteuid(), operator=True)
    return job.view()


async def cancel(jobs: JobSources, job_id: str) -> JobView:
    job = await _job(jobs, job_id)
    if job.final:
        return job.view()
    return (await jobs.launcher.cancel_as_operator(job_id)).view()


def reconcile_report(jobs: JobSources) -> dict[str, object]:
    report = jobs.launcher.last_reconcile
    if report is None:
        raise Unavailable("the launcher has not reconciled yet")
    return dict(report)


def log_target(jobs: JobSources, ident: str) -> tuple[Job | None, SessionRecord | None]:
    """The job and session an id names (either may be missing, not both; blocking: the job may
    only be in the repository)."""
    rec = jobs.table.get(ident)
    job: Job | None = jobs.launcher.jobs.get(ident)
    if job is None and rec is None:
        job = jobs.launcher.stored_job_sync(ident)
    if job is None and rec is not None and rec.job_id is not None:
        job = jobs.launcher.stored_job_sync(rec.job_id)
    if rec is None and job is not None and job.session_id is not None:
        rec = jobs.table.get(job.session_id)
    if rec is None and job is None:
        raise NotFound(f"no job or session '{ident}' is known to this daemon")
    return job, rec


def remote_dir(job: Job | None) -> ChildDir | None:
    """The job's directory when its child runs on another node (read there, through the backend)."""
    if job is None or job.node is None:
        return None
    return child_dir(job)


def log_paths(jobs: JobSources, ident: str) -> list[Path]:
    """Log files of a job or session on this host (blocking): the child's ``.murmur/launcher.log``
    (stderr, and later stdout lines), any ``*.log`` in the session's records dir
    ``<workdir>/.murmur/<sid>/``, and the task's output ``out/result.txt`` once the capsule host
    has written it. A child on another node: :func:`remote_log_names`.
    """
    job, rec = log_target(jobs, ident)
    paths: list[Path] = []
    if job is not None:
        log = Path(job.workdir) / LOG_FILE
        if log.exists():
            paths.append(log)
    if rec is not None and rec.workdir:
        paths.extend(sorted((Path(rec.workdir) / ".murmur" / rec.session_id).glob("*.log")))
    workdir = job.workdir if job is not None else rec.workdir if rec is not None else None
    if workdir:
        result = Path(workdir) / RESULT_FILE
        if result.exists():
            paths.append(result)
    return paths


async def remote_log_names(jobs: JobSources, dir: ChildDir, rec: SessionRecord | None) -> list[str]:
    """The same log files as :func:`log_paths`, named relative to a remote child's directory."""
    names = [LOG_FILE]
    if rec is not None:
        sub = f".murmur/{rec.session_id}"
        names += [f"{sub}/{n}" for n in await jobs.launcher.backend.list_files(dir, sub) if n.endswith(".log")]
    return [*names, RESULT_FILE]


async def out_files(jobs: JobSources, job: Job) -> list[str] | None:
    """The task's output files (``out/…``) of a child on another node, read there; None for a
    child on this host (``roostctl`` lists those itself)."""
    dir = remote_dir(job)
    if dir is None:
        return None
    return [f"out/{n}" for n in await jobs.launcher.backend.list_files(dir, "out")]


def active(jobs: JobSources, ident: str) -> bool:
    """Whether the job or session still runs (a ``logs -f`` follows only while it does)."""
    rec = jobs.table.get(ident)
    if rec is not None:
        return rec.running
    job = jobs.launcher.jobs.get(ident)
    return job is not None and not job.final
