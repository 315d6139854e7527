"""The launcher's job index: every job in memory, and the runner of each one still running.

One record per job id — the :class:`~roost.core.jobs.Job` (what the store keeps) and, while
its child runs, its :class:`~roost.services.launcher.runner.JobRunner` — plus the two reservations a
launch holds from its checks until its child is supervised: a place in the caller's live-jobs
quota, and a top-level start slot under the host's ceiling. The newest finished jobs stay here
(:data:`KEEP_FINISHED`); older ones are read back from the store when asked for.
"""

from __future__ import annotations

from collections import OrderedDict

from roost.core.errors import Refused
from roost.core.jobs import Job, JobState
from roost.observe.metrics import Metrics
from roost.services.launcher.runner import JobRunner
from roost.services.referee.service import refusals
from roost.state.sessions import SessionRecord, SessionTable

__all__ = ["KEEP_FINISHED", "JobIndex", "session_of"]

KEEP_FINISHED = 2000


class JobIndex:
    """Jobs by id, runners by job id, and the launches under way."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.jobs: dict[str, Job] = {}
        self.runners: dict[str, JobRunner] = {}
        self._finished: OrderedDict[str, None] = OrderedDict()
        self._launching: dict[str, int | None] = {}  # job id → uid, from the quota check to supervision
        self._starting_top: set[str] = set()  # top-level launches from their ceiling check to supervision

    @property
    def starting_top(self) -> int:
        """Top-level launches under way: they count against the live-capsule ceiling until their
        child is supervised (or the launch failed)."""
        return len(self._starting_top)

    def hold_top_start(self, job_id: str) -> None:
        """A top-level launch passed the ceiling: hold its place until :meth:`launched`."""
        self._starting_top.add(job_id)

    def set_state(self, job: Job, state: JobState) -> None:
        """Move ``job`` to ``state``: the one place a job's state changes.

        The jobs-by-state gauge counts the jobs this index holds (and the finished ones it let
        go): one held here moves from its old state's count to the new one's; one not held yet
        is counted when it is remembered, in the state it has then.
        """
        if self.jobs.get(job.job_id) is job:
            gauge = self.metrics.jobs
            gauge.labels(state=job.state).dec()
            gauge.labels(state=state).inc()
        job.state = state

    def remember(self, job: Job) -> None:
        """Index ``job`` (counted in the gauge the first time); past :data:`KEEP_FINISHED`
        finished jobs, the oldest is let go."""
        held = self.jobs.get(job.job_id)
        if held is not job:
            if held is not None:
                self.metrics.jobs.labels(state=held.state).dec()
            self.metrics.jobs.labels(state=job.state).inc()
        self.jobs[job.job_id] = job
        if job.final:
            self._finished[job.job_id] = None
            while len(self._finished) > KEEP_FINISHED:
                old, _ = self._finished.popitem(last=False)
                self.jobs.pop(old, None)

    def live(self, job_id: str) -> tuple[Job, JobRunner] | None:
        """The job and its runner while its child runs and the job is not final."""
        job = self.jobs.get(job_id)
        runner = self.runners.get(job_id)
        if job is None or runner is None or job.final:
            return None
        return job, runner

    def children_of(self, session_id: str) -> list[str]:
        """Running jobs a session delegated."""
        return [j for j in self.runners if (job := self.jobs.get(j)) is not None and job.parent_id == session_id]

    def launched_pid(self, pid: int) -> bool:
        return any(runner.pid == pid for runner in self.runners.values())

    def named_sessions(self) -> set[str]:
        """The sessions unfinished jobs name: each one's child and each one's parent."""
        named: set[str] = set()
        for job in self.jobs.values():
            if not job.final:
                for sid in (job.session_id, job.parent_id):
                    if sid is not None:
                        named.add(sid)
        return named

    def counts_by_state(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for job in self.jobs.values():
            counts[job.state] = counts.get(job.state, 0) + 1
        return counts

    def take_quota(self, job_id: str, uid: int | None, limit: int) -> None:
        """Refuse past the caller's live-jobs quota, else count this launch against it."""
        live = sum(1 for j in self.runners if (job := self.jobs.get(j)) is not None and job.uid == uid)
        live += sum(1 for j, u in self._launching.items() if u == uid and j not in self.runners)
        if live >= limit:
            raise Refused(refusals.uid_jobs(uid, limit, live), "quota_jobs")
        self._launching[job_id] = uid

    def launched(self, job_id: str) -> None:
        """The launch is over (supervised, or failed): its quota place is the runner's now, or
        free, and a top-level one's place under the ceiling is its session's now, or free."""
        self._launching.pop(job_id, None)
        self._starting_top.discard(job_id)


def session_of(table: SessionTable, job: Job) -> SessionRecord | None:
    """The job's child's session: by its id once known, else by job id or pid."""
    if job.session_id is not None:
        return table.get(job.session_id)
    for rec in table.iter_running():
        if rec.job_id == job.job_id or (job.pid is not None and rec.pid == job.pid):
            return rec
    return None
