"""Launching a job: who may launch what, the job's record, its child's start and ready line.

A launch forks once, into two named halves that each return what the launch was cleared to start
(:class:`Cleared`): a delegated launch is the referee's ``spawn`` (the same refusals as ``/spawn``,
nothing created on a refusal); a top-level one passes :func:`roost.core.admission.admit_top_level`
(draining, ``--spawn-allow``, the live-capsule ceiling) and the ``launch_uids`` rule. Then the backend
places the child, prepares its directory and starts it (:class:`roost.services.launcher.runner.JobRunner`),
and the answer waits for its ready line. A launch that fails after the referee granted it gives
the reservation back, ends the child's session if it had one, and writes the parent's
``delegation`` line with outcome ``failed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import structlog

from roost.backends.base import (
    CannotRunAs,
    ChildDirError,
    LimitsRefused,
    PlacementRefused,
    StartFailed,
)
from roost.core import ids
from roost.core.admission import Draining, admit_top_level
from roost.core.authz import launch_allowed
from roost.core.errors import BadGateway, BadRequest, Conflict, IdentityRefused, NotFound, Refused, RoostError
from roost.core.jobs import Job
from roost.core.refusals import for_launch
from roost.core.requests import LaunchRequest
from roost.observe.events import ObservedError, Span
from roost.observe.jobspans import JobSpans, decided, spawn_decision
from roost.services.launcher.context import Admitted, LaunchServices
from roost.services.launcher.delegation import DelegationTrace
from roost.services.launcher.finalizer import child_dir, process_attrs
from roost.services.launcher.index import JobIndex, session_of
from roost.services.launcher.runner import JobRunner, NotReady
from roost.services.launcher.spec import new_job, start_spec
from roost.services.launcher.tickets import RegistrationTickets
from roost.services.referee.service import wall_ms
from roost.state.config import Config
from roost.state.registry import ArtifactNotFound
from roost.state.repos.jobs import JobRepository
from roost.state.repos.sessions import SessionRepository
from roost.state.sessions import SessionRecord
from roost.system.runas import RunAsError, reach_problem, resolve_user
from roost.system.workdirs import check_workdir

if TYPE_CHECKING:
    from roost.state.registry import Artifact

__all__ = ["LaunchTimeout", "Starter"]

log = structlog.get_logger("roost.launcher")


class LaunchTimeout(RoostError):
    """The child did not report ready within the launch bound."""

    default_status = 504


class Cleared(NamedTuple):
    """What a launch's admission cleared it to start, delegated or top-level: the artifact, the
    parent (delegated), the referee's approval and the reservation behind it (``jti``), the
    child's trust and directory (``fresh``: it must not exist yet)."""

    artifact: Artifact
    parent: SessionRecord | None
    approval: str | None
    jti: str | None
    trust: str
    workdir: str
    fresh: bool
    run_uid: int | None = None


class Starter:
    """Takes a launch from its request to a running, supervised child (or a clear refusal)."""

    def __init__(
        self,
        services: LaunchServices,
        *,
        trace: DelegationTrace,
        index: JobIndex,
        spawn_task: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
        on_running: Callable[[Job, JobRunner], None],
    ) -> None:
        self._config = services.config
        self._clock = services.clock
        self.referee = services.referee
        self.table = services.table
        self.store = services.store
        self.executor = services.executor
        self.metrics = services.metrics
        self.events = services.events
        self.backend = services.backend
        self._url = services.url
        self.trace = trace
        self.index = index
        self._spawn_task = spawn_task
        self._on_running = on_running
        self.tickets = RegistrationTickets()
        self.job_spans = JobSpans(services.events)

    @property
    def config(self) -> Config:
        return self._config()

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
        live-jobs quota) is taken with no await after the check, and given back when the launch
        ends: by then the child is supervised (and counted as such), or the launch failed.
        """
        job_id = ids.job_id()
        t0 = time.monotonic()
        started = False
        try:
            if credential is not None:
                cleared = await self._clear_delegated(req, credential, job_id, t0)
            else:
                cleared = await self._clear_top_level(req, job_id, loopback=loopback, uid=uid, operator=operator)
            formation = self._formation_of(cleared.parent) if cleared.parent is not None else req.formation_id
            job = new_job(job_id, req, cleared.artifact, cleared.parent, cleared.trust, cleared.workdir, uid, formation)
            job.run_uid = cleared.run_uid
            self.job_spans.opened(job, req.traceparent)
            artifact, parent, approval, jti = cleared.artifact, cleared.parent, cleared.approval, cleared.jti
            job = await self._start(Admitted(job, artifact, parent, approval, jti, t0, cleared.fresh, req.task))
            started = True
            return job
        except ArtifactNotFound as exc:
            # Upstream's /spawn and /register keep their 500 sentence; a launch is ours, and a
            # capsule nobody published is the caller's mistake, not a server error.
            raise NotFound(
                f"capsule {exc.name}@{exc.version} is not in the registry: nothing is published at those coordinates"
            ) from None
        finally:
            self.index.launched(job_id)
            if not started:
                self.job_spans.abandoned(job_id)  # a launch that failed after its span opened

    async def _clear_delegated(self, req: LaunchRequest, credential: str, job_id: str, t0: float) -> Cleared:
        """A session delegating: its quota, then the referee's spawn (the same refusals as
        ``/spawn``); the child's directory goes under the parent's workdir."""
        parent = self.referee.authenticate(credential)
        if not self.may_launch(parent.uid):
            # A session its uid registered for itself, outside launch_uids (or its child): it may
            # use /spawn as upstream runtimes do, but obtains no launch from this daemon.
            raise Refused(
                f"this session belongs to uid {parent.uid}, which is not in launch_uids, so it cannot obtain "
                "launches (POST /jobs); the operator may add the uid to launch_uids",
                "launch_uids",
            )
        if req.formation_id is not None:
            raise BadRequest(
                "formation_id is for top-level launches only: a delegated child joins its parent's formation"
            )
        self._check_switch(parent.uid)
        self.index.take_quota(job_id, parent.uid, self.config.uid_live_jobs_limit)
        if parent.workdir is None:
            raise Conflict(
                "this session registered without a workdir, so roost has nowhere to put a child "
                "directory; register with 'workdir' to delegate through POST /jobs"
            )
        decision = spawn_decision(
            self.events, f"{req.name}@{req.version}", self.events.session_trace(parent.session_id)
        )
        try:
            grant = await self.referee.spawn(credential, req.name, req.version, untrusted=req.untrusted, job_id=job_id)
        except Refused as exc:
            decided(decision, parent.session_id, (getattr(exc, "kind", "refused"), exc.message))
            self.metrics.spawn_decision(getattr(exc, "kind", "refused"))
            if not isinstance(exc, IdentityRefused):
                await self.trace.not_started(parent, req.name, req.version, t0, "refused", exc.message)
            raise
        self.metrics.spawn_decision("granted")
        decided(decision, parent.session_id, None)
        artifact = grant.artifact
        workdir = Path(parent.workdir) / ".murmur" / "children" / f"{artifact.name}-{ids.child_suffix()}"
        trust = "untrusted" if req.untrusted else parent.trust
        return Cleared(artifact, parent, grant.approval, grant.claims.jti, trust, str(workdir), fresh=True)

    async def _clear_top_level(
        self, req: LaunchRequest, job_id: str, *, loopback: bool, uid: int | None, operator: bool
    ) -> Cleared:
        """A launch with no parent: this host's caller only (the admin socket, or a user in
        ``launch_uids``), the one admission decision, its quota and a place under the ceiling."""
        cfg = self.config
        if not loopback:
            raise Refused("a top-level job may only be launched from this host (a loopback address)")
        if not operator and not launch_allowed(uid, cfg.launch_uids, os.geteuid()):
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
            live_capsules=self.table.live_capsules() + self.index.starting_top,
            max_live_capsules=cfg.max_live_capsules,
            registry=cfg.registry_name,
        )
        if refusal is not None:
            raise for_launch(refusal)
        self.index.take_quota(job_id, uid, self.config.uid_live_jobs_limit)
        self.index.hold_top_start(job_id)  # held across the registry await below, so the ceiling holds
        user = self._run_as_user(req.name, uid, operator=operator)
        run_uid = await self._run_as_uid(user) if user is not None else None
        if run_uid is not None:
            self._check_switch(run_uid)
        if req.workdir is not None:
            # The workdir must be the launching caller's own (docs/security.md) — or, for a job
            # run as the run_as user, that user's, who writes there.
            await self.executor.run(check_workdir, req.workdir, uid if run_uid is None else run_uid)
        elif uid != os.geteuid() and run_uid is None:
            raise Refused(
                "a top-level job launched by another user needs a 'workdir' of that user's own: "
                "roost keeps its own job directories private to the daemon's user"
            )
        artifact = await self.referee.resolve(req.name, req.version)
        if self.referee.draining:  # begun while the workdir or the registry was read
            raise for_launch(Draining())
        if req.workdir:
            workdir = str(Path(req.workdir))
        else:
            # The daemon's own job directories, by a path with no link in it: every write beneath
            # a workdir is made from / without following links (roost/system/fsutil.py).
            state = await self.executor.run(os.path.realpath, cfg.state_dir)
            workdir = str(Path(state) / "jobs" / job_id)
        if run_uid is not None and user is not None:
            problem = await self.executor.run(self._reach_problem, run_uid, artifact, workdir)
            if problem is not None:
                raise Conflict(f"run_as: the job would run as {user} (uid {run_uid}), but {problem}")
        return Cleared(artifact, None, None, None, "trusted", workdir, fresh=req.workdir is None, run_uid=run_uid)

    def _run_as_user(self, name: str, uid: int | None, *, operator: bool) -> str | None:
        """The ``run_as`` user of an operator's job of capsule ``name`` (the admin socket, or root
        or the daemon's own uid launching), or None."""
        cfg = self.config
        if not (operator or uid in (0, os.geteuid())):
            return None
        return cfg.run_as_capsules.get(name) or cfg.run_as

    async def _run_as_uid(self, user: str) -> int:
        try:
            uid: int = await self.executor.run(resolve_user, user)
        except RunAsError as exc:
            raise Conflict(str(exc)) from None
        return uid

    def _reach_problem(self, run_uid: int, artifact: Artifact, workdir: str) -> str | None:
        """Blocking: why ``run_uid`` could not run this job (:func:`roost.system.runas.reach_problem`)."""
        return reach_problem(run_uid, interpreter=self._interpreter(artifact), workdir=workdir)

    def _interpreter(self, artifact: Artifact) -> str | None:
        """Blocking (a PATH search): what the job's child execs first, the capsule host's command
        or the runtime's."""
        cfg = self.config
        command: str | None
        if artifact.manifest.entrypoint:
            command = cfg.capsule_command[0] if cfg.capsule_command else sys.executable
        else:
            command = cfg.runtime_command[0] if cfg.runtime_command else None
        if command is None or "/" in command:
            return command
        return shutil.which(command) or command

    def may_launch(self, uid: int | None) -> bool:
        """Whether sessions of ``uid`` may obtain launches: ``launch_uids``, or a ``run_as`` user
        (its jobs' sessions delegate as the operator's did)."""
        cfg = self.config
        if launch_allowed(uid, cfg.launch_uids, os.geteuid()):
            return True
        users = {u for u in (cfg.run_as, *cfg.run_as_capsules.values()) if u}
        for user in users:
            try:
                if resolve_user(user) == uid:
                    return True
            except RunAsError:
                continue
        return False

    def _formation_of(self, parent: SessionRecord) -> str | None:
        """A delegated child joins its parent's formation: the one the parent registered with,
        else the one of the job that launched the parent (roost/core/formation.py)."""
        if parent.formation_id is not None:
            return parent.formation_id
        job = self.index.jobs.get(parent.job_id) if parent.job_id is not None else None
        return job.formation_id if job is not None else None

    def _check_switch(self, uid: int | None) -> None:
        """Refuse at once (409, as a node that cannot take the child) a job whose uid the
        backend could never start a child as."""
        try:
            self.backend.check_run_as(uid)
        except CannotRunAs as exc:
            raise Conflict(str(exc)) from None

    async def _start(self, launch: Admitted) -> Job:
        """Place the child, then start it once its node's start gate has a free slot."""
        job = launch.job
        try:
            job.node = await self.backend.place(
                job.job_id,
                f"{job.name}@{job.version}",
                launch.artifact.manifest.capabilities.resources,
                job.process_uid,
            )
        except PlacementRefused as exc:
            self._release(launch.jti)
            if launch.parent is not None:
                await self.trace.not_started(launch.parent, job.name, job.version, launch.t0, "refused", str(exc))
            raise Conflict(str(exc)) from None
        async with self.backend.start_gate(job.node):
            return await self._start_gated(launch)

    async def _start_gated(self, launch: Admitted) -> Job:
        """Directory, process, ready line; then the job is running and supervised."""
        job = launch.job
        span = self.events.start("roost.process.start", **process_attrs(job))
        await self._prepare_dir(launch, span)
        try:
            runner = await self._spawn(launch, span)
            self.index.runners[job.job_id] = runner
            self.index.remember(job)
            first_commit = asyncio.get_running_loop().create_task(self.store.commit([JobRepository.upsert_op(job)]))
            ready = await runner.handshake(self.config.launch_timeout_secs)
        finally:
            self.tickets.drop(job.job_id)  # registered by now, or never will be
        with contextlib.suppress(Exception):
            await first_commit
        if isinstance(ready, NotReady):
            self._release(launch.jti)
            error_name = "ContainmentRefused" if ready.containment else "LaunchFailed"
            await self._fail_start(launch, span, ready.reason, exit_status=ready.status, error_name=error_name)
            if ready.timed_out:
                raise LaunchTimeout(ready.why)
            raise BadGateway(ready.reason)
        await self._running(launch, runner, ready.session_id, ready.capsule_url)
        started: dict[str, Any] = {
            "roost.process.pid": job.pid,
            "roost.process.session_id": job.session_id,
            "roost.process.state": job.state,
        }
        span.completed(**started)
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

    async def _prepare_dir(self, launch: Admitted, span: Span) -> None:
        """The child's directory, with its task; a directory that cannot be made ends the launch."""
        job = launch.job
        try:
            job.workdir = (await self.backend.prepare_dir(child_dir(job), launch.task, fresh=launch.fresh)).workdir
        except ChildDirError as exc:
            self._release(launch.jti)
            await self.backend.finish_off(job.job_id, None)
            span.failed(ObservedError(name="ChildDirError", category="validation", message=exc.detail))
            if launch.parent is not None:
                reason = f"the child directory could not be created: {exc.detail}"
                await self.trace.not_started(launch.parent, job.name, job.version, launch.t0, "failed", reason)
            raise Conflict(f"the job directory {job.workdir} could not be created: {exc.detail}") from None

    async def _spawn(self, launch: Admitted, span: Span) -> JobRunner:
        """Start the child process; the runner that now owns it."""
        job = launch.job
        runner = JobRunner(self.backend, child_dir(job), self._spawn_task)
        approval = launch.approval
        if approval is None and job.node is not None:
            # A top-level child on another node registers over the network, where /register
            # needs an approval: one bound to this job (roost/services/launcher/tickets.py).
            approval = self.tickets.mint(job.job_id)
        try:
            spec = start_spec(
                self.config,
                job,
                launch.artifact,
                launch.parent,
                approval,
                url=self._url(),
                instance=self.events.run_id,
            )
            child = await runner.start(spec)
        except (CannotRunAs, LimitsRefused) as exc:
            self._release(launch.jti)
            await self._fail_start(launch, span, str(exc), exit_status=None)
            raise Conflict(str(exc)) from None
        except StartFailed as exc:
            self._release(launch.jti)
            reason = f"the child could not be started ({exc.detail})"
            await self._fail_start(launch, span, reason, exit_status=None)
            raise BadGateway(reason) from None
        job.pid, job.pid_start = child.pid, child.pid_start
        return runner

    async def _running(self, launch: Admitted, runner: JobRunner, session_id: str, capsule_url: str | None) -> None:
        """The child reported ready: record it running, link its session, hand it to supervision."""
        job = launch.job
        job.session_id, job.capsule_url = session_id, capsule_url
        job.ready_ms = wall_ms()
        self.index.set_state(job, "running")
        rec = self.table.get(session_id)
        if rec is not None and rec.job_id is None:
            rec.job_id = job.job_id
            self.store.enqueue([SessionRepository.job_op(rec.session_id, job.job_id)])
        if rec is not None:
            self.referee.supervised(rec)  # a lease it took at /register would end it under the job
        if launch.parent is not None:
            await self.trace.start_line(job, launch.parent, readopted=job.readopted)
        self.store.enqueue([JobRepository.upsert_op(job)])
        self._on_running(job, runner)
        self.metrics.launch_seconds.observe(time.monotonic() - launch.t0)

    def _release(self, jti: str | None) -> None:
        """Give back a reservation whose child never registered (its slot would linger 60 s)."""
        if jti is not None:
            self.referee.release_slot(jti)

    async def _fail_start(
        self,
        launch: Admitted,
        span: Span,
        reason: str,
        *,
        exit_status: str | None,
        error_name: str = "LaunchFailed",
    ) -> None:
        job, parent = launch.job, launch.parent
        runner = self.index.runners.pop(job.job_id, None)
        if runner is not None:
            runner.close()
        self.backend.lifeline_close(job.job_id)
        await self.backend.finish_off(job.job_id, None)
        self.index.set_state(job, "failed")
        job.exit_status = exit_status
        job.outcome = "failed"
        job.reason = reason
        job.ended_ms = wall_ms()
        rec = session_of(self.table, job)
        if rec is not None and rec.running:
            await self.referee.end_session(rec, "failed")
        if parent is not None:
            await self.trace.not_started(parent, job.name, job.version, launch.t0, "failed", reason)
            job.end_written = True
        with contextlib.suppress(Exception):
            await self.store.commit([JobRepository.upsert_op(job)])
        self.index.remember(job)
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
