"""The launcher: ``POST /jobs`` → a supervised child with a lifeline, a deadline and one completion.

Life of a job (``docs/architecture.md`` draws it end to end):

1. Referee first (delegated: the same ``Referee.spawn`` as ``/spawn``, so a refusal has the same
   sentence and nothing is created; top-level: the one admission decision of
   :mod:`roost.admission`). Then the child directory, ``meta/job_id.txt`` and ``input.json``,
   the lifeline, and the process — all through the process backend
   (:mod:`roost.launcher.backend`); the approval is written to its stdin and stdin is closed.
2. The answer (201) waits for the child's first stdout line; a child that never gets there is
   killed with its group and recorded ``failed`` (:mod:`roost.launcher.runner`).
3. When the child exits: exactly one ``completion.json`` (the child's own, or the launcher's
   ``crashed``/``terminated`` record), at most one delivery to the parent's door (retried once),
   the parent's ``delegation`` line, and the job's final state (:mod:`roost.launcher.finalize`
   decides, :mod:`roost.launcher.completer` does).
4. A parent session's end closes its children's lifelines and forces them out after
   ``lifeline_grace_secs``; a child that ends that way leaves no completion.

This module is the job index and its policy: who may launch what, the quotas, find, cancel, and
what a restart re-adopts (:mod:`roost.launcher.reconcile` calls the public methods below). An
orderly daemon stop ends every running job (``terminated``, posted to nobody) and the backend;
a crash leaves both running for the next daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from a2a.client import A2AClient
from a2a.ids import prefixed
from roost import ids
from roost.admission import admit_top_level
from roost.blocking import BlockingExecutor
from roost.completion import SpawnerHandle
from roost.config import Config
from roost.errors import BadGateway, Conflict, IdentityRefused, NotFound, Refused, RoostError
from roost.events import EventBus, ObservedError
from roost.launcher.backend import (
    CannotRunAs,
    ChildDirError,
    ChildRef,
    PlacementRefused,
    ProcessBackend,
    StartFailed,
    StartSpec,
)
from roost.launcher.completer import Completer, child_dir, process_attrs
from roost.launcher.delegation import DelegationTrace, TraceSink
from roost.launcher.finalize import PARENT_ENDED_REASON
from roost.launcher.jobs import Job, JobState, StopReason
from roost.launcher.reconcile import reconcile
from roost.launcher.request import LaunchRequest
from roost.launcher.runner import JobRunner, NotReady
from roost.launcher.spawn import capsule_host_env, child_argv, child_env
from roost.metrics import Metrics
from roost.referee import Referee, refusals, wall_ms
from roost.refusals import for_launch
from roost.registry import ArtifactNotFound
from roost.repos.jobs import JobRepository
from roost.repos.sessions import SessionRepository
from roost.sessions import SessionRecord, SessionTable
from roost.store import Store
from roost.workdirs import check_workdir

if TYPE_CHECKING:
    from roost.registry import Artifact

__all__ = ["PARENT_ENDED_REASON", "LaunchTimeout", "Launcher"]

log = structlog.get_logger("roost.launcher")

KEEP_FINISHED = 2000


class LaunchTimeout(RoostError):
    """The child did not report ready within the launch bound."""

    default_status = 504


class Launcher:
    """The job index and its policy; one :class:`JobRunner` per running child."""

    def __init__(
        self,
        *,
        config: Callable[[], Config],
        clock: Callable[[], int],
        referee: Referee,
        table: SessionTable,
        store: Store,
        executor: BlockingExecutor,
        metrics: Metrics,
        events: EventBus,
        trace: TraceSink,
        backend: ProcessBackend,
        a2a: A2AClient,
        url: Callable[[], str],
        door_key: Callable[[str], bytes | None],
    ) -> None:
        self._config = config
        self._clock = clock
        self.referee = referee
        self.table = table
        self.store = store
        self.repo = JobRepository(store)
        self.executor = executor
        self.metrics = metrics
        self.events = events
        self.backend = backend
        self._url = url
        self.trace = DelegationTrace(trace, executor)
        self.completer = Completer(
            backend=backend,
            table=table,
            store=store,
            metrics=metrics,
            events=events,
            a2a=a2a,
            door_key=door_key,
            trace=self.trace,
            set_state=self._set_state,
        )
        self.jobs: dict[str, Job] = {}
        self._finished: OrderedDict[str, None] = OrderedDict()
        self._runners: dict[str, JobRunner] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._starting_top = 0
        self._launching: dict[str, int | None] = {}  # job id → uid, from the quota check to supervision
        self.last_reconcile: dict[str, int] | None = None

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
    def cgroups(self) -> object | None:
        """The local backend's job cgroups (None without them, or with another backend)."""
        return getattr(self.backend, "cgroups", None)

    def launched_pid(self, pid: int) -> bool:
        """Whether ``pid`` is a child this launcher started and is already watching."""
        return any(runner.pid == pid for runner in self._runners.values())

    def counts_by_state(self) -> dict[str, int]:
        """How many jobs in memory are in each state."""
        counts: dict[str, int] = {}
        for job in self.jobs.values():
            counts[job.state] = counts.get(job.state, 0) + 1
        return counts

    # -- service lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        await self.backend.open()
        self.referee.on_session_end.append(self._on_session_end)
        self.last_reconcile = await reconcile(self, self.backend, self.table, self.events)

    async def stop(self) -> None:
        """End every running job (``terminated``, posted to nobody), then the backend."""
        running = [self.jobs[j] for j in list(self._runners) if j in self.jobs]
        for job in running:
            if job.stop_reason is None:
                job.stop_reason = "shutdown"
        grace = self.config.stop_grace_secs
        await asyncio.gather(
            *(self._runners[j.job_id].stop(grace) for j in running if j.job_id in self._runners),
            return_exceptions=True,
        )
        if running:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(j.done.wait() for j in running)), 30)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=10)
        for runner in self._runners.values():
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

    # -- bookkeeping -------------------------------------------------------------------------
    def _set_state(self, job: Job, state: JobState) -> None:
        if job.state != state:
            self.metrics.jobs.labels(state=job.state).dec()
        self.metrics.jobs.labels(state=state).inc()
        job.state = state

    def remember(self, job: Job) -> None:
        """Index ``job``; the newest finished jobs stay in memory, older ones only in the store."""
        self.jobs[job.job_id] = job
        if job.final:
            self._finished[job.job_id] = None
            while len(self._finished) > KEEP_FINISHED:
                old, _ = self._finished.popitem(last=False)
                self.jobs.pop(old, None)

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
        """Launch a job; ``uid`` is the caller's (used for a top-level job; a delegated one takes its parent's).

        What a check reserves (a top-level start slot under the ceiling, a place in the caller's
        live-jobs quota) is taken with no await after the check, and given back if the launch
        fails before the child is being supervised.
        """
        held: list[str] = []
        job_id = ids.job_id()
        try:
            return await self._launch(
                req, credential, loopback=loopback, uid=uid, operator=operator, job_id=job_id, held=held
            )
        except ArtifactNotFound as exc:
            # Upstream's /spawn and /register keep their 500 sentence; a launch is ours, and a
            # capsule nobody published is the caller's mistake, not a server error.
            raise NotFound(
                f"capsule {exc.name}@{exc.version} is not in the registry: nothing is published at those coordinates"
            ) from None
        finally:
            if "top" in held:
                self._starting_top -= 1
            self._launching.pop(job_id, None)

    async def _launch(
        self,
        req: LaunchRequest,
        credential: str | None,
        *,
        loopback: bool,
        uid: int | None,
        operator: bool,
        job_id: str,
        held: list[str],
    ) -> Job:
        cfg = self.config
        t0 = time.monotonic()
        parent: SessionRecord | None = None
        approval: str | None = None
        jti: str | None = None
        artifact: Artifact
        if credential is not None:
            parent = self.referee.authenticate(credential)
            self._check_switch(parent.uid)
            self._take_job_quota(job_id, parent.uid)
            if parent.workdir is None:
                raise Conflict(
                    "this session registered without a workdir, so roost has nowhere to put a child "
                    "directory; register with 'workdir' to delegate through POST /jobs"
                )
            try:
                grant = await self.referee.spawn(
                    credential, req.name, req.version, untrusted=req.untrusted, job_id=job_id
                )
            except Refused as exc:
                self.metrics.spawn_decision(getattr(exc, "kind", "refused"))
                if not isinstance(exc, IdentityRefused):
                    await self.trace.not_started(parent, req.name, req.version, t0, "refused", exc.message)
                raise
            self.metrics.spawn_decision("granted")
            artifact, approval, jti = grant.artifact, grant.approval, grant.claims.jti
            trust = "untrusted" if req.untrusted else parent.trust
            workdir = Path(parent.workdir) / ".murmur" / "children" / f"{artifact.name}-{ids.child_suffix()}"
            fresh = True
        else:
            if not loopback:
                raise Refused("a top-level job may only be launched from this host (a loopback address)")
            if not operator:
                allowed = cfg.launch_uids if cfg.launch_uids is not None else (os.geteuid(),)
                if uid is None or uid not in allowed:
                    raise Refused(
                        "a top-level job without a credential may be launched only from the admin socket "
                        f"or by a local user listed in launch_uids (uid {uid} is not)"
                    )
            self._check_switch(uid)
            self.table.prune(self._clock())
            refusal = admit_top_level(
                req.name,
                draining=self.referee.draining,
                spawn_allow=cfg.spawn_allow,
                live_capsules=self.table.live_capsules() + self._starting_top,
                max_live_capsules=cfg.max_live_capsules,
            )
            if refusal is not None:
                raise for_launch(refusal)
            self._take_job_quota(job_id, uid)
            self._starting_top += 1  # held across the registry await below, so the ceiling holds
            held.append("top")
            if req.workdir is not None:
                # The workdir must be the launching caller's own (docs/security.md).
                await self.executor.run(check_workdir, req.workdir, uid)
            elif uid != os.geteuid():
                raise Refused(
                    "a top-level job launched by another user needs a 'workdir' of that user's own: "
                    "roost keeps its own job directories private to the daemon's user"
                )
            artifact = await self.referee.resolve(req.name, req.version)
            trust = "trusted"
            fresh = req.workdir is None
            workdir = Path(req.workdir) if req.workdir else cfg.state_dir / "jobs" / job_id
        job = self._new_job(job_id, req, artifact, parent, trust, str(workdir), uid)
        return await self._start(job, artifact, parent, approval, jti, t0, fresh, req.task)

    @staticmethod
    def _new_job(
        job_id: str,
        req: LaunchRequest,
        artifact: Artifact,
        parent: SessionRecord | None,
        trust: str,
        workdir: str,
        uid: int | None,
    ) -> Job:
        dlg = ids.delegation_id()
        handle: SpawnerHandle | None = None
        if parent is not None:
            # Without a door (no capsule_url) the handle is unaddressed: the child still writes
            # its own completion.json when it ends its session; there is just nobody to post it to.
            handle = SpawnerHandle(
                session_id=parent.session_id,
                context_id=prefixed("ctx"),
                delegation_id=dlg,
                url=parent.capsule_url or None,
                # A completion address is a url and a trust together, or neither.
                trust=("untrusted" if trust == "untrusted" else "trusted") if parent.capsule_url else None,
            )
        return Job(
            job_id=job_id,
            delegation_id=dlg,
            name=artifact.name,
            version=artifact.version,
            sha256=artifact.sha256,
            workdir=workdir,
            trust=trust,
            deadline_secs=req.deadline_secs or float(artifact.manifest.lifecycle.delegation_deadline_secs),
            created_ms=wall_ms(),
            parent_id=parent.session_id if parent is not None else None,
            parent_workdir=parent.workdir if parent is not None else None,
            handle=handle.to_env() if handle is not None else None,
            uid=parent.uid if parent is not None else uid,
        )

    def _check_switch(self, uid: int | None) -> None:
        """Refuse at once a job whose uid the backend could never start a child as."""
        try:
            self.backend.check_run_as(uid)
        except CannotRunAs as exc:
            raise Refused(str(exc)) from None

    def _take_job_quota(self, job_id: str, uid: int | None) -> None:
        """Refuse past the caller's live-jobs quota, else count this launch against it."""
        limit = self.config.uid_live_jobs_limit
        live = sum(1 for j in self._runners if (job := self.jobs.get(j)) is not None and job.uid == uid)
        live += sum(1 for j, u in self._launching.items() if u == uid and j not in self._runners)
        if live >= limit:
            raise Refused(refusals.uid_jobs(uid, limit, live), "quota_jobs")
        self._launching[job_id] = uid

    async def _start(
        self,
        job: Job,
        artifact: Artifact,
        parent: SessionRecord | None,
        approval: str | None,
        jti: str | None,
        t0: float,
        fresh: bool,
        task: dict[str, str | None] | None,
    ) -> Job:
        """Place the child, then start it once its node's start gate has a free slot."""
        try:
            job.node = await self.backend.place(
                job.job_id, f"{job.name}@{job.version}", artifact.manifest.capabilities.resources, job.uid
            )
        except PlacementRefused as exc:
            self._release(jti)
            if parent is not None:
                await self.trace.not_started(parent, job.name, job.version, t0, "refused", str(exc))
            raise Conflict(str(exc)) from None
        async with self.backend.start_gate(job.node):
            return await self._start_gated(job, artifact, parent, approval, jti, t0, fresh, task)

    def _spec(self, job: Job, artifact: Artifact, parent: SessionRecord | None, approval: str | None) -> StartSpec:
        """The child's command line, environment and stdin."""
        cfg = self.config
        allow = list(artifact.manifest.capabilities.env.allow)
        if parent is not None:
            allowed = set(parent.manifest.capabilities.env.allow)
            allow = [n for n in allow if n in allowed]
        env = child_env(
            os.environ,
            allow=allow,
            roost_url=self._url(),
            job_id=job.job_id,
            registry_path=str(cfg.registry_path),
            spawner=job.handle,
        )
        env["MURMUR_ROOST_INSTANCE"] = self.events.run_id
        if artifact.manifest.entrypoint:
            env.update(capsule_host_env(cfg))
        return StartSpec(
            dir=child_dir(job),
            argv=child_argv(cfg, artifact.manifest, job.workdir, delegated=parent is not None),
            env=env,
            cwd=job.workdir,
            stdin=approval.encode() + b"\n" if approval is not None else b"",
            uid=job.uid,
            resources=artifact.manifest.capabilities.resources,
            limits_in_child=bool(artifact.manifest.entrypoint),
            capsule=f"{job.name}@{job.version}",
            instance=self.events.run_id,
            sha256=job.sha256,
        )

    async def _start_gated(
        self,
        job: Job,
        artifact: Artifact,
        parent: SessionRecord | None,
        approval: str | None,
        jti: str | None,
        t0: float,
        fresh: bool,
        task: dict[str, str | None] | None,
    ) -> Job:
        span = self.events.start("roost.process.start", **process_attrs(job))
        try:
            job.workdir = (await self.backend.prepare_dir(child_dir(job), task, fresh=fresh)).workdir
        except ChildDirError as exc:
            self._release(jti)
            await self.backend.finish_off(job.job_id, None)
            span.failed(ObservedError(name="ChildDirError", category="validation", message=exc.detail))
            if parent is not None:
                reason = f"the child directory could not be created: {exc.detail}"
                await self.trace.not_started(parent, job.name, job.version, t0, "failed", reason)
            raise Conflict(f"the job directory {job.workdir} could not be created: {exc.detail}") from None
        runner = JobRunner(self.backend, child_dir(job), self.spawn_task)
        try:
            child = await runner.start(self._spec(job, artifact, parent, approval))
        except CannotRunAs as exc:
            self._release(jti)
            await self._fail_start(job, parent, span, t0, str(exc), exit_status=None)
            raise Refused(str(exc)) from None
        except StartFailed as exc:
            self._release(jti)
            reason = f"the child could not be started ({exc.detail})"
            await self._fail_start(job, parent, span, t0, reason, exit_status=None)
            raise BadGateway(reason) from None
        job.pid, job.pid_start = child.pid, child.pid_start
        self._runners[job.job_id] = runner
        self.remember(job)
        self.metrics.jobs.labels(state="starting").inc()
        first_commit = asyncio.get_running_loop().create_task(self.store.commit([JobRepository.upsert_op(job)]))
        ready = await runner.handshake(self.config.launch_timeout_secs)
        with contextlib.suppress(Exception):
            await first_commit
        if isinstance(ready, NotReady):
            self._release(jti)
            await self._fail_start(
                job,
                parent,
                span,
                t0,
                ready.reason,
                exit_status=ready.status,
                error_name="ContainmentRefused" if ready.containment else "LaunchFailed",
            )
            if ready.timed_out:
                raise LaunchTimeout(ready.why)
            raise BadGateway(ready.reason)
        job.session_id, job.capsule_url = ready.session_id, ready.capsule_url
        job.ready_ms = wall_ms()
        self._set_state(job, "running")
        rec = self.table.get(job.session_id)
        if rec is not None and rec.job_id is None:
            rec.job_id = job.job_id
            self.store.enqueue([SessionRepository.job_op(rec.session_id, job.job_id)])
        if parent is not None:
            await self.trace.start_line(job, parent, readopted=job.readopted)
        self.store.enqueue([JobRepository.upsert_op(job)])
        runner.run(job.deadline_secs, lambda: self._on_deadline(job.job_id))
        self.spawn_task(self._supervise(job, runner))
        self.metrics.launch_seconds.observe(time.monotonic() - t0)
        span.completed(
            **_a(
                {
                    "roost.process.pid": job.pid,
                    "roost.process.session_id": job.session_id,
                    "roost.process.state": job.state,
                }
            )
        )
        log.info(
            "job_started",
            job_id=job.job_id,
            capsule=f"{job.name}@{job.version}",
            pid=job.pid,
            session_id=job.session_id,
            parent=job.parent_id,
            delegation_id=job.delegation_id,
        )
        return job

    def _release(self, jti: str | None) -> None:
        """Give back a reservation whose child never registered (its slot would linger 60 s)."""
        if jti is not None:
            self.referee.release_slot(jti)

    async def _fail_start(
        self,
        job: Job,
        parent: SessionRecord | None,
        span: Any,
        t0: float,
        reason: str,
        *,
        exit_status: str | None,
        error_name: str = "LaunchFailed",
    ) -> None:
        runner = self._runners.pop(job.job_id, None)
        if runner is not None:
            runner.close()
        self.backend.lifeline_close(job.job_id)
        await self.backend.finish_off(job.job_id, None)
        if job.state == "starting" and job.job_id in self.jobs:
            self._set_state(job, "failed")
        else:
            job.state = "failed"
        job.exit_status = exit_status
        job.outcome = "failed"
        job.reason = reason
        job.ended_ms = wall_ms()
        rec = self._session_of(job)
        if rec is not None and rec.running:
            await self.referee.end_session(rec, "failed")
        if parent is not None:
            await self.trace.not_started(parent, job.name, job.version, t0, "failed", reason)
            job.end_written = True
        with contextlib.suppress(Exception):
            await self.store.commit([JobRepository.upsert_op(job)])
        self.remember(job)
        job.done.set()
        self.metrics.capsule_exits.labels(reason="failed").inc()
        span.failed(
            ObservedError(
                name=error_name,
                category="tool" if error_name == "LaunchFailed" else "authorization",
                message=reason if error_name == "ContainmentRefused" else reason.split(";")[0],
            ),
            **{"roost.process.exit_code": exit_status},
        )
        log.warning(
            "job_failed_to_start", job_id=job.job_id, capsule=f"{job.name}@{job.version}", reason=reason.split(";")[0]
        )

    # -- exit, completion ------------------------------------------------------------------------
    async def _supervise(self, job: Job, runner: JobRunner) -> None:
        await self.finalize(job, await runner.exited())

    def _session_of(self, job: Job) -> SessionRecord | None:
        if job.session_id is not None:
            return self.table.get(job.session_id)
        for rec in self.table.iter_running():
            if rec.job_id == job.job_id or (job.pid is not None and rec.pid == job.pid):
                return rec
        return None

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
        runner = self._runners.pop(job.job_id, None)
        if runner is not None:
            runner.close()
        # The job's main process is gone: nothing of the job may outlive it, in its group or out.
        await self.backend.finish_off(job.job_id, job.pid)
        if runner is not None:
            await runner.settle()
        job.exit_status = exit_status
        self.backend.lifeline_close(job.job_id)
        rec = self._session_of(job)
        own_end: str | None = None
        if rec is not None and not rec.running:
            own_end = rec.status  # the child ended its own session before it exited
        elif rec is not None:
            # The child's process is gone but its session was never ended (a crash): end it,
            # which closes the lifelines of its own children (the cascade).
            await self.referee.end_session(rec, "failed")
        try:
            await self.completer.complete(job, own_end, readopted=job.readopted)
        except Exception:
            log.exception("completion_failed", job_id=job.job_id)
            if not job.final:
                self._set_state(job, "crashed")
        job.ended_ms = wall_ms()
        with contextlib.suppress(Exception):
            await self.store.commit([JobRepository.upsert_op(job)])
        self.remember(job)
        job.done.set()
        self.metrics.capsule_exits.labels(reason=job.state).inc()
        span.completed(**_a({"roost.process.state": job.state, "roost.process.outcome": job.outcome}))
        log.info(
            "job_ended",
            job_id=job.job_id,
            capsule=f"{job.name}@{job.version}",
            state=job.state,
            outcome=job.outcome,
            exit_status=exit_status,
        )

    # -- after a restart (roost/launcher/reconcile.py) --------------------------------------------
    def adopt(self, job: Job) -> None:
        """Supervise a child another daemon instance started: re-arm its deadline from its
        ready time, relink it to its parent, write its start line if that never happened."""
        job.readopted = True
        if job.session_id is None:
            for rec in self.table.iter_running():
                if rec.job_id == job.job_id or rec.pid == job.pid:
                    job.session_id, job.capsule_url = rec.session_id, rec.capsule_url
                    break
        if job.state == "starting":
            # It got as far as a session (or will never report to anyone): supervise it as running.
            job.state = "running"
            job.ready_ms = job.ready_ms or job.created_ms
        runner = JobRunner(self.backend, child_dir(job), self.spawn_task)
        runner.adopt(ChildRef(job.job_id, job.pid, job.pid_start, job.node))
        self._runners[job.job_id] = runner
        self.remember(job)
        self.metrics.jobs.labels(state=job.state).inc()
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
        self.remember(job)
        self.metrics.jobs.labels(state=job.state).inc()
        await self.finalize(job, exit_status)

    def parent_gone(self, job_id: str) -> None:
        """The job's parent session has ended: close the lifeline; force the child out later."""
        job = self.jobs.get(job_id)
        runner = self._runners.get(job_id)
        if job is None or runner is None or job.final:
            return
        if job.stop_reason is None:
            job.stop_reason = "parent_ended"
        runner.parent_ended(self.config.lifeline_grace_secs)

    # -- stop: cancel, deadline, parent end ------------------------------------------------------
    def _on_deadline(self, job_id: str) -> None:
        job = self.jobs.get(job_id)
        runner = self._runners.get(job_id)
        if job is None or runner is None or job.final:
            return
        if job.stop_reason is None:
            job.stop_reason = "deadline"
        log.info("job_deadline", job_id=job_id, deadline_secs=job.deadline_secs)
        self.spawn_task(runner.stop(self.config.stop_grace_secs))

    async def _on_session_end(self, rec: SessionRecord) -> None:
        """A session ended: close its children's lifelines; force them out after the grace."""
        for job_id in [j for j in self._runners if (job := self.jobs.get(j)) and job.parent_id == rec.session_id]:
            self.parent_gone(job_id)

    async def cancel(self, job_id: str, credential: str | None, *, loopback: bool) -> Job:
        return await self._cancel(await self.find(job_id, credential, loopback=loopback))

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
        grace = self.config.stop_grace_secs
        span = self.events.start("roost.process.cancel", **process_attrs(job, pid=job.pid))
        if job.stop_reason is None:
            job.stop_reason = why
        runner = self._runners.get(job.job_id)
        killed = await runner.stop(grace) if runner is not None else False
        try:
            await asyncio.wait_for(job.done.wait(), grace + 60)
        except TimeoutError:
            span.failed(ObservedError(name="CancelTimeout", category="timeout"))
            raise
        span.completed(**_a({"roost.process.state": job.state, "roost.process.sigkill": killed}))
        log.info("job_canceled", job_id=job.job_id, sigkill=killed)
        return job

    # -- GET /jobs/{id} --------------------------------------------------------------------------
    async def find(self, job_id: str, credential: str | None, *, loopback: bool) -> Job:
        """The job, if the caller may see it: its parent session's credential, or (top-level) loopback.

        Unknown and not-yours are the same 404, so the answer is no oracle for job ids.
        """
        owner: str | None = None
        if credential is not None:
            owner = self.referee.authenticate(credential).session_id
        elif not loopback:
            raise IdentityRefused()
        job = self.jobs.get(job_id)
        if job is None and ids.JOB_ID_RE.match(job_id):
            job = await self._load(job_id)
        if job is None or job.parent_id != owner:
            raise NotFound("job not found")
        return job

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


def _a(attrs: dict[str, Any]) -> dict[str, Any]:
    """Event attributes carry dotted keys, so they travel as a dict."""
    return attrs
