"""The launcher: ``POST /jobs`` → a supervised child with a lifeline, a deadline and one completion.

Life of a job (``docs/architecture.md`` draws it end to end):

1. Referee first (delegated: the same ``Referee.spawn`` as ``/spawn``, so a refusal has the same
   sentence and nothing is created; top-level: the one admission decision of
   :mod:`roost.core.admission`). Then the child directory, ``meta/job_id.txt`` and ``input.json``,
   the lifeline, and the process — all through the process backend
   (:mod:`roost.backends.base`); the approval is written to its stdin and stdin is closed.
2. The answer (201) waits for the child's first stdout line; a child that never gets there is
   killed with its group and recorded ``failed`` (:mod:`roost.services.launcher.runner`).
3. When the child exits: exactly one ``completion.json`` (the child's own, or the launcher's
   ``crashed``/``terminated`` record), at most one delivery to the parent's door (retried once),
   the parent's ``delegation`` line, and the job's final state (:mod:`roost.core.finalize`
   decides, :mod:`roost.services.launcher.finalizer` does).
4. A parent session's end closes its children's lifelines and forces them out after
   ``lifeline_grace_secs``; a child that ends that way leaves no completion.

This module is the job index and its policy: who may launch what, the quotas, find, cancel, and
what a restart re-adopts (:mod:`roost.services.launcher.reconcile` calls the public methods below). An
orderly daemon stop ends every running job (``terminated``, posted to nobody) and the backend;
a crash leaves both running for the next daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import structlog

from a2a.client import A2AClient
from a2a.protocol import traceparent
from a2a.protocol.traceparent import TraceParent
from roost.backends.base import ChildRef, ReportsLimits, RotatesLogs
from roost.backends.process.cgroups import HoldsJobCgroups, JobCgroups
from roost.core import ids
from roost.core.authz import may_see_job
from roost.core.errors import Conflict, IdentityRefused, NotFound
from roost.core.finalize import PARENT_ENDED_REASON
from roost.core.jobs import Job, StopReason
from roost.core.limits import HostMechanisms
from roost.core.requests import LaunchRequest
from roost.observe.events import ObservedError
from roost.services.launcher.context import LaunchServices
from roost.services.launcher.delegation import DelegationTrace, TraceSink
from roost.services.launcher.finalizer import Completer, child_dir, process_attrs
from roost.services.launcher.index import JobIndex, session_of
from roost.services.launcher.reconcile import ReachesLater, reconcile
from roost.services.launcher.runner import JobRunner
from roost.services.launcher.starter import LaunchTimeout, Starter
from roost.services.periodic import every
from roost.services.referee.service import wall_ms
from roost.state.config import Config
from roost.state.repos.jobs import JobRepository
from roost.state.repos.sessions import SessionRepository
from roost.state.sessions import SessionRecord

__all__ = ["PARENT_ENDED_REASON", "LaunchServices", "LaunchTimeout", "Launcher", "Viewer"]

log = structlog.get_logger("roost.launcher")

LOG_CHECK_SECS = 5.0
"""How often running children's ``launcher.log`` sizes are checked (``launcher_log_max_bytes``)."""


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who asks for a job without (or with) a credential: the kernel's uid, whether the caller is
    on this host, and how to learn whether its process belongs to a job (asked only for root)."""

    uid: int | None
    local: bool
    in_job: Callable[[], Awaitable[bool]] = field(default=lambda: _false())


async def _false() -> bool:
    return False


class Launcher:
    """The job index and its policy; one :class:`JobRunner` per running child."""

    def __init__(
        self,
        services: LaunchServices,
        *,
        trace: TraceSink,
        a2a: A2AClient,
        door_key: Callable[[str], bytes | None],
    ) -> None:
        self._config = services.config
        self._clock = services.clock
        self.referee = services.referee
        self.table = services.table
        self.store = services.store
        self.repo = JobRepository(services.store)
        self.executor = services.executor
        self.metrics = services.metrics
        self.events = services.events
        self.backend = services.backend
        self.trace = DelegationTrace(trace, services.executor, backend=services.backend, jobs=lambda: self.jobs)
        self.index = JobIndex(services.metrics)
        self.completer = Completer(
            backend=services.backend,
            table=services.table,
            store=services.store,
            metrics=services.metrics,
            events=services.events,
            a2a=a2a,
            door_key=door_key,
            trace=self.trace,
            set_state=self.index.set_state,
        )
        self.starter = Starter(
            services,
            trace=self.trace,
            index=self.index,
            spawn_task=self.spawn_task,
            on_running=self._on_running,
        )
        self._tasks: set[asyncio.Task[Any]] = set()
        # Where a session's work goes in its delegation tree: its job's span (the bus asks).
        services.events.session_trace = self.session_trace
        self.last_reconcile: dict[str, int] | None = None
        self._deferred: asyncio.Task[None] | None = None
        self._log_cap: asyncio.Task[None] | None = None

    @property
    def config(self) -> Config:
        return self._config()

    @property
    def delivery_window_secs(self) -> float:
        """How long one delivery retries a parent's door that does not answer."""
        return self.completer.delivery_window_secs

    @delivery_window_secs.setter
    def delivery_window_secs(self, secs: float) -> None:
        self.completer.delivery_window_secs = secs

    @property
    def cgroups(self) -> JobCgroups | None:
        """The backend's job cgroups on this host (None without them, or with a backend that
        holds none here)."""
        return self.backend.cgroups if isinstance(self.backend, HoldsJobCgroups) else None

    def limit_mechanisms(self) -> HostMechanisms | None:
        """How each resource limit is enforced where children run (None: the backend cannot say)."""
        return self.backend.limit_mechanisms() if isinstance(self.backend, ReportsLimits) else None

    @property
    def jobs(self) -> dict[str, Job]:
        """Jobs in memory by id (the running ones and the newest finished ones)."""
        return self.index.jobs

    def session_trace(self, session_id: str) -> TraceParent | None:
        """The trace context of a session's work: the span of the job that runs it, if any."""
        rec = self.table.get(session_id)
        job = self.jobs.get(rec.job_id) if rec is not None and rec.job_id is not None else None
        return traceparent.parse(job.traceparent) if job is not None else None

    def launched_pid(self, pid: int) -> bool:
        """Whether ``pid`` is a child this launcher started and is already watching."""
        return self.index.launched_pid(pid)

    def may_launch(self, uid: int | None) -> bool:
        """Whether sessions of ``uid`` may obtain launches (``launch_uids`` or a ``run_as`` user)."""
        return self.starter.may_launch(uid)

    def job_roots(self) -> frozenset[int]:
        """The root process of every unfinished job on this host (what a peer's ancestry is
        checked against: roost/system/jobpeer.py)."""
        return frozenset(j.pid for j in self.jobs.values() if j.pid is not None and j.node is None and not j.final)

    def named_sessions(self) -> set[str]:
        """Sessions retention must keep: every unfinished job's child and parent."""
        return self.index.named_sessions()

    def counts_by_state(self) -> dict[str, int]:
        """How many jobs in memory are in each state."""
        return self.index.counts_by_state()

    # -- service lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        await self.backend.open()
        if isinstance(self.backend, RotatesLogs):
            self._log_cap = asyncio.get_running_loop().create_task(
                every(
                    lambda: LOG_CHECK_SECS, self._cap_logs, failed="launcher_log_rotate_failed", logger="roost.launcher"
                )
            )
        self.referee.on_session_end.append(self._on_session_end)
        if isinstance(self.backend, ReachesLater) and not self.backend.reachable:
            # What still runs there cannot be asked yet: a child that merely could not be asked
            # must not be finalized lost. Reconcile when it answers; refuse launches until then.
            log.warning("reconcile_deferred", why=self.backend.unreachable_sentence())
            self._deferred = asyncio.get_running_loop().create_task(self._reconcile_when_reachable(self.backend))
            return
        self.last_reconcile = await reconcile(self, self.backend, self.table, self.events)

    async def _reconcile_when_reachable(self, backend: ReachesLater) -> None:
        await backend.wait_reachable()
        try:
            self.last_reconcile = await reconcile(self, self.backend, self.table, self.events)
        except Exception as exc:
            log.error("reconcile_failed", error=f"{type(exc).__name__}: {exc}"[:300])
            raise

    def _check_reconciled(self, what: str) -> None:
        """Refuse (409, one sentence) while a reconcile deferred at start-up has not finished."""
        task = self._deferred
        if task is None or (task.done() and not task.cancelled() and task.exception() is None):
            return
        if task.done():
            raise Conflict(
                f"{what} refused: the reconcile after this daemon's restart failed (its log says why); "
                "restart the daemon"
            )
        why = self.backend.unreachable_sentence() if isinstance(self.backend, ReachesLater) else None
        if why is not None:
            raise Conflict(why)
        raise Conflict(f"{what} refused for now: the daemon is still reconciling the jobs that ran before its restart")

    async def _cap_logs(self) -> None:
        """Rotate the ``launcher.log`` of every child still running past ``launcher_log_max_bytes``."""
        cap = self.config.launcher_log_max_bytes
        backend = self.backend
        if cap <= 0 or not isinstance(backend, RotatesLogs):
            return
        for job_id in list(self.index.runners):
            job = self.jobs.get(job_id)
            if job is not None and job.node is None:
                with contextlib.suppress(OSError):
                    if await backend.rotate_log(child_dir(job), cap):
                        log.info("launcher_log_rotated", job_id=job_id, max_bytes=cap)

    async def stop(self) -> None:
        """End every running job (``terminated``, posted to nobody), then the backend."""
        if self._log_cap is not None:
            self._log_cap.cancel()
        if self._deferred is not None and not self._deferred.done():
            self._deferred.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._deferred
        running = [self.jobs[j] for j in list(self.index.runners) if j in self.jobs]
        for job in running:
            if job.stop_reason is None:
                job.stop_reason = "shutdown"
        grace = self.config.stop_grace_secs
        await asyncio.gather(
            *(self.index.runners[j.job_id].stop(grace) for j in running if j.job_id in self.index.runners),
            return_exceptions=True,
        )
        if running:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(j.done.wait() for j in running)), 30)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=10)
        for runner in self.index.runners.values():
            runner.close()
        await self.backend.close()

    def spawn_task(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` in the background; the daemon's stop waits for it, a failure is logged."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("launcher_task_failed", error=repr(task.exception()))

    # -- POST /jobs ------------------------------------------------------------------------------
    async def launch(
        self,
        req: LaunchRequest,
        credential: str | None,
        *,
        loopback: bool,
        uid: int | None = None,
        operator: bool = False,
    ) -> Job:
        """Launch a job (:meth:`roost.services.launcher.starter.Starter.launch`)."""
        self._check_reconciled("a launch")
        return await self.starter.launch(req, credential, loopback=loopback, uid=uid, operator=operator)

    def redeem_ticket(self, ticket: str, name: str, version: str) -> Job:
        """The starting top-level job a registration approval was minted for, spent now
        (roost/services/launcher/tickets.py); the identity refusal for anything else."""
        job_id = self.starter.tickets.redeem(ticket)
        job = self.jobs.get(job_id) if job_id is not None else None
        if job is None or job.state != "starting" or (job.name, job.version) != (name, version):
            raise IdentityRefused()
        return job

    def _on_running(self, job: Job, runner: JobRunner) -> None:
        """A child reported ready: arm its deadline and watch for its exit."""
        runner.run(job.deadline_secs, lambda: self._on_deadline(job.job_id))
        self.spawn_task(self._supervise(job, runner))

    async def _supervise(self, job: Job, runner: JobRunner) -> None:
        await self.finalize(job, await runner.exited())

    async def finalize(self, job: Job, exit_status: str) -> None:
        """Everything that follows a child's exit, once: completion, delivery, trace, record."""
        # Checked and marked with no await between: a second caller (reconcile, a supervisor)
        # returns at once instead of finalizing the same job twice.
        if job.done.is_set() or job.finalizing:
            return
        job.finalizing = True
        try:
            await self._finalize_once(job, exit_status)
        finally:
            job.finalizing = False

    async def _finalize_once(self, job: Job, exit_status: str) -> None:
        span = self.events.start("roost.process.exit", **process_attrs(job, pid=job.pid, exit_code=exit_status))
        runner = self.index.runners.pop(job.job_id, None)
        if runner is not None:
            runner.close()
        # The job's main process is gone: nothing of the job may outlive it, in its group or out.
        await self.backend.finish_off(job.job_id, job.pid)
        if runner is not None:
            await runner.settle()
        job.exit_status = exit_status
        self.backend.lifeline_close(job.job_id)
        rec = session_of(self.table, job)
        own_end: str | None = None
        if rec is not None and not rec.running:
            own_end = rec.status  # the child ended its own session before it exited
        elif rec is not None:
            # The child's process is gone but its session was never ended (a crash): end it,
            # which closes the lifelines of its own children (the cascade).
            await self.referee.end_session(rec, "failed")
        try:
            self_ended = own_end is not None and rec is not None and rec.end_reason is None
            await self.completer.complete(job, own_end, readopted=job.readopted, self_ended=self_ended)
        except Exception:
            log.exception("completion_failed", job_id=job.job_id)
            if not job.final:
                self.index.set_state(job, "crashed")
        job.ended_ms = wall_ms()
        with contextlib.suppress(Exception):
            await self.store.commit([JobRepository.upsert_op(job)])
        self.index.remember(job)
        job.done.set()
        self.starter.job_spans.closed(job)
        self.metrics.capsule_exits.labels(reason=job.state).inc()
        ended: dict[str, Any] = {"roost.process.state": job.state, "roost.process.outcome": job.outcome}
        span.completed(**ended)
        log.info(
            "job_ended",
            job_id=job.job_id,
            capsule=f"{job.name}@{job.version}",
            state=job.state,
            outcome=job.outcome,
            exit_status=exit_status,
        )

    # -- after a restart (roost/services/launcher/reconcile.py) --------------------------------------------
    def adopt(self, job: Job) -> None:
        """Supervise a child another daemon instance started: re-arm its deadline from its
        ready time, relink it to its parent, write its start line if that never happened."""
        job.readopted = True
        if job.session_id is None:
            for rec in self.table.iter_running():
                if rec.job_id == job.job_id or rec.pid == job.pid:
                    job.session_id, job.capsule_url = rec.session_id, rec.capsule_url
                    break
        session = self.table.get(job.session_id) if job.session_id is not None else None
        if session is not None:
            if session.job_id is None:
                # Linked here if the crash came before the link was written: the session watch
                # must see a job behind it, not a session to lease.
                session.job_id = job.job_id
                self.store.enqueue([SessionRepository.job_op(session.session_id, job.job_id)])
            self.referee.supervised(session)
        if job.state == "starting":
            # It got as far as a session (or will never report to anyone): supervise it as running.
            self.index.set_state(job, "running")
            job.ready_ms = job.ready_ms or job.created_ms
        runner = JobRunner(self.backend, child_dir(job), self.spawn_task)
        runner.adopt(ChildRef(job.job_id, job.pid, job.pid_start, job.node))
        self.index.runners[job.job_id] = runner
        self.index.remember(job)
        elapsed = max(0.0, (wall_ms() - (job.ready_ms or job.created_ms)) / 1000)
        runner.run(job.deadline_secs - elapsed, lambda: self._on_deadline(job.job_id), drain=False)
        self.spawn_task(self._supervise(job, runner))
        if job.parent_id is not None and job.session_id is not None and not job.start_written:
            parent = self.table.get(job.parent_id)
            if parent is not None:
                self.spawn_task(self.trace.start_line(job, parent, readopted=True))
        self.store.enqueue([JobRepository.upsert_op(job)])
        log.info("job_readopted", job_id=job.job_id, pid=job.pid, session_id=job.session_id)

    async def finalize_lost(self, job: Job, exit_status: str) -> None:
        """Finalize a job whose child ended while no daemon was watching."""
        job.readopted = True
        self.index.remember(job)
        await self.finalize(job, exit_status)

    def parent_gone(self, job_id: str) -> None:
        """The job's parent session has ended: close the lifeline; force the child out later."""
        live = self.index.live(job_id)
        if live is None:
            return
        job, runner = live
        if job.stop_reason is None:
            job.stop_reason = "parent_ended"
        runner.parent_ended(self.config.lifeline_grace_secs)

    # -- stop: cancel, deadline, parent end ------------------------------------------------------
    def _on_deadline(self, job_id: str) -> None:
        live = self.index.live(job_id)
        if live is None:
            return
        job, runner = live
        if job.stop_reason is None:
            job.stop_reason = "deadline"
        log.info("job_deadline", job_id=job_id, deadline_secs=job.deadline_secs)
        self.spawn_task(runner.stop(self.config.stop_grace_secs))

    async def _on_session_end(self, rec: SessionRecord) -> None:
        """A session ended: close its children's lifelines; force them out after the grace."""
        for job_id in self.index.children_of(rec.session_id):
            self.parent_gone(job_id)

    async def cancel(self, job_id: str, credential: str | None, viewer: Viewer) -> Job:
        return await self._cancel(await self.find(job_id, credential, viewer))

    async def cancel_as_operator(self, job_id: str) -> Job:
        """Cancel any job, delegated or not (the admin socket; its peer uid is already checked)."""
        job = self.jobs.get(job_id)
        if job is None and ids.JOB_ID_RE.match(job_id):
            job = await self._load(job_id)
        if job is None:
            raise NotFound("job not found")
        return await self._cancel(job, "operator_cancel")

    async def _cancel(self, job: Job, why: StopReason = "cancel") -> Job:
        if job.final:
            return job
        if job.job_id not in self.index.runners:
            self._check_reconciled("a cancel")
        grace = self.config.stop_grace_secs
        span = self.events.start("roost.process.cancel", **process_attrs(job, pid=job.pid))
        if job.stop_reason is None:
            job.stop_reason = why
        runner = self.index.runners.get(job.job_id)
        killed = await runner.stop(grace) if runner is not None else False
        try:
            await asyncio.wait_for(job.done.wait(), grace + 60)
        except TimeoutError:
            span.failed(ObservedError(name="CancelTimeout", category="timeout"))
            raise
        canceled: dict[str, Any] = {"roost.process.state": job.state, "roost.process.sigkill": killed}
        span.completed(**canceled)
        log.info("job_canceled", job_id=job.job_id, sigkill=killed)
        return job

    # -- GET /jobs/{id} --------------------------------------------------------------------------
    async def find(self, job_id: str, credential: str | None, viewer: Viewer) -> Job:
        """The job, if the caller may see it (:func:`roost.core.authz.may_see_job`): its parent
        session's credential, else — on this host — its owner uid, or root not inside a job.

        Unknown and not-yours are the same 404, so the answer is no oracle for job ids.
        """
        session_id: str | None = None
        if credential is not None:
            session_id = self.referee.authenticate(credential).session_id
        elif not viewer.local:
            raise IdentityRefused()
        job = self.jobs.get(job_id)
        if job is None and ids.JOB_ID_RE.match(job_id):
            job = await self._load(job_id)
        if job is None:
            raise NotFound("job not found")
        caller_in_job = False
        if session_id is None and viewer.uid == 0:
            caller_in_job = await viewer.in_job()  # root inside a job is not the operator
        if not may_see_job(
            parent_id=job.parent_id,
            owner_uid=job.uid,
            session_id=session_id,
            caller_uid=viewer.uid,
            caller_in_job=caller_in_job,
        ):
            raise NotFound("job not found")
        return job

    async def stored_job(self, job_id: str) -> Job | None:
        """The job in memory, else as the store has it."""
        return self.jobs.get(job_id) or await self.repo.get(job_id)

    def stored_job_sync(self, job_id: str) -> Job | None:
        """:meth:`stored_job` for code already on the executor's thread (blocking)."""
        return self.jobs.get(job_id) or self.repo.get_sync(job_id)

    async def list_jobs(self, state: str | None = None) -> list[Job]:
        """Every job (in ``state``, if given), memory over the store (memory is ahead of the
        write-behind), oldest first."""
        merged = {j.job_id: j for j in await self.repo.newest(state)}
        merged.update({k: j for k, j in self.jobs.items() if state is None or j.state == state})
        if state is not None:
            merged = {k: j for k, j in merged.items() if j.state == state}
        return sorted(merged.values(), key=lambda j: (j.created_ms, j.job_id))

    async def unfinished(self) -> list[Job]:
        """Jobs the store says were starting or running (reconcile's list), oldest first."""
        return await self.repo.unfinished()

    async def _load(self, job_id: str) -> Job | None:
        job = await self.repo.get(job_id)
        if job is None:
            return None
        if job.final:
            rec = await self.backend.read_completion(child_dir(job))
            job.completion = rec.to_dict() if rec is not None else None
        return job
