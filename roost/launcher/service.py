"""The launcher: ``POST /jobs`` → a supervised child with a lifeline, a deadline and one completion.

Life of a job (``docs/architecture.md`` draws it end to end):

1. Referee first (delegated: the same ``Referee.spawn`` as ``/spawn``, so a refusal has the same
   sentence and nothing is created; top-level: ``--spawn-allow``). Then the child directory,
   ``meta/job_id.txt`` and ``input.json``, the lifeline pipe, and the process — started on the
   event loop's thread, in its own process group, with a cleared environment; the approval is
   written to its stdin and stdin is closed.
2. The answer (201) waits for the child's first stdout line; a child that never gets there is
   killed with its group and recorded ``failed``.
3. A pidfd tells the loop when the child exits. Then exactly one ``completion.json`` (the
   child's own, or the launcher's ``crashed``/``terminated`` record), at most one delivery to the
   parent's door (retried once), the parent's ``delegation`` line, and the job's final state.
4. A parent session's end closes its children's lifelines (the keeper holds them) and forces
   them out after ``lifeline_grace_secs``; a child that ends that way leaves no completion.

Jobs are rows in SQLite; :mod:`roost.launcher.reconcile` re-adopts or finalizes them after a
restart. An orderly daemon stop ends every running job (``terminated``, posted to nobody) and
the keeper; a crash leaves both running for the next daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from a2a.ids import prefixed
from roost import ids
from roost.completion import (
    OPERATOR_CANCEL_DETAIL,
    TERMINATED_DETAIL,
    CompletionRecord,
    SpawnerHandle,
    crash_detail,
    deadline_detail,
    deliver,
)
from roost.errors import BadGateway, BadRequest, Conflict, IdentityRefused, NotFound, Refused, RoostError
from roost.events import ObservedError
from roost.identifiers import require_id
from roost.launcher import records
from roost.launcher.backend import (
    CannotRunAs,
    ChildDir,
    ChildDirError,
    ChildHandle,
    PlacementRefused,
    ProcessBackend,
    StartFailed,
    StartSpec,
)
from roost.launcher.jobs import Job, JobState, StopReason, state_for_status
from roost.launcher.spawn import capsule_host_env, child_argv, child_env
from roost.referee import refusals, wall_ms
from roost.registry import ArtifactNotFound
from roost.sessions import SessionRecord
from roost.trace import read_trace, trace_path
from roost.workdirs import check_workdir

if TYPE_CHECKING:
    from roost.daemon import Roost
    from roost.registry import Artifact

__all__ = ["LaunchRequest", "LaunchTimeout", "Launcher", "parse_request"]

log = structlog.get_logger("roost.launcher")

KEEP_FINISHED = 2000
PARENT_ENDED_REASON = "the session that delegated to this one ended, so its lifeline was closed"


def containment_refusal(stderr_tail: list[str]) -> str | None:
    """The capsule host's E-CAP-003 sentence, when that is why the child never became ready."""
    for line in reversed(stderr_tail):
        at = line.find("E-CAP-003: ")
        if at >= 0:
            return line[at:]
    return None


class LaunchTimeout(RoostError):
    """The child did not report ready within the launch bound."""

    default_status = 504


@dataclass(frozen=True, slots=True)
class LaunchRequest:
    """A ``POST /jobs`` body once validated (its wire schema is :class:`roost.api_models.JobRequest`)."""

    name: str
    version: str
    task: dict[str, str | None] | None
    deadline_secs: float | None
    untrusted: bool
    workdir: str | None


def parse_request(body: dict[str, Any]) -> LaunchRequest:
    """Validate a ``POST /jobs`` body (one sentence per mistake)."""
    name, version = body.get("name"), body.get("version")
    for key, value in (("name", name), ("version", version)):
        if value is None:
            raise BadRequest(f"invalid JSON: missing field '{key}'")
        if not isinstance(value, str):
            raise BadRequest(f"invalid JSON: field '{key}' must be a string")
    assert isinstance(name, str) and isinstance(version, str)
    require_id("name", name)
    require_id("version", version)
    deadline = body.get("deadline_secs")
    if deadline is not None and (
        isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not 0 < deadline <= 7 * 86400
    ):
        raise BadRequest("deadline_secs must be a number of seconds above 0 and at most 604800")
    untrusted = body.get("untrusted", False)
    if not isinstance(untrusted, bool):
        raise BadRequest("untrusted must be true or false")
    workdir = body.get("workdir")
    if workdir is not None and (not isinstance(workdir, str) or not os.path.isabs(workdir) or "\x00" in workdir):
        raise BadRequest("workdir must be an absolute path")
    return LaunchRequest(
        name=name,
        version=version,
        task=records.parse_task(body.get("task")),
        deadline_secs=float(deadline) if deadline is not None else None,
        untrusted=untrusted,
        workdir=os.path.normpath(workdir) if isinstance(workdir, str) else None,
    )


@dataclass(eq=False)
class _Live:
    """What the loop holds for a job whose process is running."""

    child: ChildHandle
    timers: list[asyncio.TimerHandle] = field(default_factory=list)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)


class Launcher:
    def __init__(self, roost: Roost, backend: ProcessBackend) -> None:
        self.roost = roost
        self.backend = backend
        self.jobs: dict[str, Job] = {}
        self._finished: OrderedDict[str, None] = OrderedDict()
        self._live: dict[str, _Live] = {}
        self._children: dict[str, set[str]] = {}
        self._reconciled: set[str] = set()
        self._finalizing: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._starting_top = 0
        self._launching: dict[str, int | None] = {}  # job id → uid, from the quota check to supervision
        self.delivery_window_secs = 30.0
        self.last_reconcile: dict[str, int] | None = None
        self._stopping = False

    @property
    def cgroups(self) -> object | None:
        """The local backend's job cgroups (None without them, or with another backend)."""
        return getattr(self.backend, "cgroups", None)

    def launched_pid(self, pid: int) -> bool:
        """Whether ``pid`` is a child this launcher started and is already watching."""
        return any(live.child.pid == pid for live in self._live.values())

    # -- service lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        from roost.launcher.reconcile import reconcile

        roost = self.roost
        await self.backend.open()
        roost.referee.on_session_end.append(self._on_session_end)
        self.last_reconcile = await reconcile(self)

    async def stop(self) -> None:
        """End every running job (``terminated``, posted to nobody), then the keeper."""
        self._stopping = True
        running = [self.jobs[j] for j in list(self._live) if j in self.jobs]
        for job in running:
            if job.stop_reason is None:
                job.stop_reason = "shutdown"
        await asyncio.gather(
            *(
                self._live[j.job_id].child.stop(self.roost.config.stop_grace_secs)
                for j in running
                if j.job_id in self._live
            ),
            return_exceptions=True,
        )
        if running:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(j.done.wait() for j in running)), 30)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=10)
        for live in self._live.values():
            live.child.close()
        await self.backend.close()

    def _spawn_task(self, coro: Any) -> asyncio.Task[Any]:
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
            self.roost.metrics.jobs.labels(state=job.state).dec()
        self.roost.metrics.jobs.labels(state=state).inc()
        job.state = state

    def _remember(self, job: Job) -> None:
        self.jobs[job.job_id] = job
        if job.final:
            self._finished[job.job_id] = None
            while len(self._finished) > KEEP_FINISHED:
                old, _ = self._finished.popitem(last=False)
                self.jobs.pop(old, None)

    @staticmethod
    def _dir(job: Job) -> ChildDir:
        """The job's directory, as the backend is asked about it."""
        return ChildDir(job.job_id, job.workdir, job.parent_workdir, job.uid, job.node)

    def _attrs(self, job: Job, **more: Any) -> dict[str, Any]:
        out: dict[str, Any] = {
            "roost.process.job_id": job.job_id,
            "roost.process.delegation_id": job.delegation_id,
            "roost.process.capsule": f"{job.name}@{job.version}",
        }
        out.update({f"roost.process.{k}": v for k, v in more.items()})
        return out

    # -- POST /jobs ------------------------------------------------------------------------------
    async def launch(
        self,
        body: dict[str, Any],
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
                body, credential, loopback=loopback, uid=uid, operator=operator, job_id=job_id, held=held
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
        body: dict[str, Any],
        credential: str | None,
        *,
        loopback: bool,
        uid: int | None,
        operator: bool,
        job_id: str,
        held: list[str],
    ) -> Job:
        roost = self.roost
        cfg = roost.config
        req = parse_request(body)
        t0 = time.monotonic()
        parent: SessionRecord | None = None
        approval: str | None = None
        jti: str | None = None
        artifact: Artifact
        if credential is not None:
            parent = roost.referee.authenticate(credential)
            self._check_switch(parent.uid)
            self._take_job_quota(job_id, parent.uid)
            if parent.workdir is None:
                raise Conflict(
                    "this session registered without a workdir, so roost has nowhere to put a child "
                    "directory; register with 'workdir' to delegate through POST /jobs"
                )
            try:
                grant = await roost.referee.spawn(
                    credential, req.name, req.version, untrusted=req.untrusted, job_id=job_id
                )
            except Refused as exc:
                roost.metrics.spawn_decision(getattr(exc, "kind", "refused"))
                if not isinstance(exc, IdentityRefused):
                    await self._write_delegation_line(
                        parent, req.name, req.version, None, None, t0, "refused", exc.message
                    )
                raise
            roost.metrics.spawn_decision("granted")
            artifact, approval, jti = grant.artifact, grant.approval, grant.claims.jti
            trust = "untrusted" if req.untrusted else parent.trust
            child_dir = Path(parent.workdir) / ".murmur" / "children" / f"{artifact.name}-{ids.child_suffix()}"
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
            if roost.referee.draining:
                raise Refused("this daemon is draining: it finishes running jobs and starts no new ones")
            if req.name not in cfg.spawn_allow:
                raise Refused(refusals.not_in_spawn_allow(req.name))
            roost.table.prune(roost.clock())
            live = roost.table.live_capsules() + self._starting_top
            if live >= cfg.max_live_capsules:
                raise Refused(refusals.ceiling(cfg.max_live_capsules, live))
            self._take_job_quota(job_id, uid)
            self._starting_top += 1  # held across the registry await below, so the ceiling holds
            held.append("top")
            if req.workdir is not None:
                # The workdir must be the launching caller's own (docs/security.md).
                await roost.executor.run(check_workdir, req.workdir, uid)
            elif uid != os.geteuid():
                raise Refused(
                    "a top-level job launched by another user needs a 'workdir' of that user's own: "
                    "roost keeps its own job directories private to the daemon's user"
                )
            artifact = await roost.referee.resolve(req.name, req.version)
            trust = "trusted"
            fresh = req.workdir is None
            child_dir = Path(req.workdir) if req.workdir else cfg.state_dir / "jobs" / job_id
        deadline = req.deadline_secs or float(artifact.manifest.lifecycle.delegation_deadline_secs)
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
        job = Job(
            job_id=job_id,
            delegation_id=dlg,
            name=artifact.name,
            version=artifact.version,
            sha256=artifact.sha256,
            workdir=str(child_dir),
            trust=trust,
            deadline_secs=deadline,
            created_ms=wall_ms(),
            parent_id=parent.session_id if parent is not None else None,
            parent_workdir=parent.workdir if parent is not None else None,
            handle=handle.to_env() if handle is not None else None,
            uid=parent.uid if parent is not None else uid,
        )
        return await self._start(job, artifact, parent, approval, jti, t0, fresh, req.task)

    def _check_switch(self, uid: int | None) -> None:
        """Refuse at once a job whose uid the backend could never start a child as."""
        try:
            self.backend.check_run_as(uid)
        except CannotRunAs as exc:
            raise Refused(str(exc)) from None

    def _take_job_quota(self, job_id: str, uid: int | None) -> None:
        """Refuse past the caller's live-jobs quota, else count this launch against it."""
        limit = self.roost.config.uid_live_jobs_limit
        live = sum(1 for j in self._live if (job := self.jobs.get(j)) is not None and job.uid == uid)
        live += sum(1 for j, u in self._launching.items() if u == uid and j not in self._live)
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
                await self._write_delegation_line(parent, job.name, job.version, None, None, t0, "refused", str(exc))
            raise Conflict(str(exc)) from None
        async with self.backend.start_gate(job.node):
            return await self._start_gated(job, artifact, parent, approval, jti, t0, fresh, task)

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
        roost = self.roost
        cfg = roost.config
        span = roost.events.start("roost.process.start", **self._attrs(job))
        backend = self.backend
        try:
            job.workdir = (await backend.prepare_dir(self._dir(job), task, fresh=fresh)).workdir
        except ChildDirError as exc:
            self._release(jti)
            await backend.finish_off(job.job_id, None)
            span.failed(ObservedError(name="ChildDirError", category="validation", message=exc.detail))
            if parent is not None:
                await self._write_delegation_line(
                    parent,
                    job.name,
                    job.version,
                    None,
                    None,
                    t0,
                    "failed",
                    f"the child directory could not be created: {exc.detail}",
                )
            raise Conflict(f"the job directory {job.workdir} could not be created: {exc.detail}") from None
        allow = list(artifact.manifest.capabilities.env.allow)
        if parent is not None:
            allowed = set(parent.manifest.capabilities.env.allow)
            allow = [n for n in allow if n in allowed]
        argv = child_argv(cfg, artifact.manifest, job.workdir, delegated=parent is not None)
        env = child_env(
            os.environ,
            allow=allow,
            roost_url=roost.url,
            job_id=job.job_id,
            registry_path=str(cfg.registry_path),
            spawner=job.handle,
        )
        env["MURMUR_ROOST_INSTANCE"] = roost.events.run_id
        if artifact.manifest.entrypoint:
            env.update(capsule_host_env(cfg))
        spec = StartSpec(
            dir=self._dir(job),
            argv=argv,
            env=env,
            cwd=job.workdir,
            stdin=approval.encode() + b"\n" if approval is not None else b"",
            uid=job.uid,
            resources=artifact.manifest.capabilities.resources,
            limits_in_child=bool(artifact.manifest.entrypoint),
            capsule=f"{job.name}@{job.version}",
            instance=roost.events.run_id,
            sha256=job.sha256,
        )
        try:
            child = await backend.start(spec)
        except CannotRunAs as exc:
            self._release(jti)
            await self._fail_start(job, parent, span, t0, str(exc), exit_status=None)
            raise Refused(str(exc)) from None
        except StartFailed as exc:
            self._release(jti)
            reason = f"the child could not be started ({exc.detail})"
            await self._fail_start(job, parent, span, t0, reason, exit_status=None)
            raise BadGateway(reason) from None
        job.pid = child.pid
        job.pid_start = child.pid_start
        live = _Live(child=child)
        self._live[job.job_id] = live
        self._remember(job)
        self.roost.metrics.jobs.labels(state="starting").inc()
        if parent is not None:
            self._children.setdefault(parent.session_id, set()).add(job.job_id)
        first_commit = asyncio.get_running_loop().create_task(roost.store.commit([job.upsert_op()]))
        line, why = await self._await_ready(live)
        with contextlib.suppress(Exception):
            await first_commit
        ready = _parse_ready(line) if line else None
        if ready is None or why is not None:
            if why is None:
                why = "the child's first stdout line was not a ready line carrying a session_id"
            child.kill()
            status = await asyncio.shield(child.exited)
            self._release(jti)
            tail = await backend.stderr_tail(self._dir(job))
            refused = containment_refusal(tail)
            reason = why if not tail else f"{why}; its last stderr lines were:\n" + "\n".join(tail[-5:])
            if refused is not None:
                reason = refused
            await self._fail_start(
                job,
                parent,
                span,
                t0,
                reason,
                exit_status=status,
                error_name="LaunchFailed" if refused is None else "ContainmentRefused",
            )
            if "did not report ready" in why:
                raise LaunchTimeout(why)
            raise BadGateway(reason)
        job.session_id, job.capsule_url = ready
        job.ready_ms = wall_ms()
        self._set_state(job, "running")
        rec = roost.table.get(job.session_id)
        if rec is not None and rec.job_id is None:
            rec.job_id = job.job_id
            roost.store.enqueue([("UPDATE sessions SET job_id = ? WHERE session_id = ?", (job.job_id, rec.session_id))])
        if parent is not None:
            await self._write_start_line(job, parent)
        roost.store.enqueue([job.upsert_op()])
        live.timers.append(asyncio.get_running_loop().call_later(job.deadline_secs, self._on_deadline, job.job_id))
        live.tasks.append(self._spawn_task(self._drain_stdout(job, live)))
        self._spawn_task(self._supervise(job, live))
        roost.metrics.launch_seconds.observe(time.monotonic() - t0)
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

    async def _await_ready(self, live: _Live) -> tuple[bytes | None, str | None]:
        """The first stdout line, or why there is none (exit, EOF, timeout)."""
        loop = asyncio.get_running_loop()
        child = live.child
        timeout = self.roost.config.launch_timeout_secs
        read = loop.create_task(child.readline())
        waitables: set[asyncio.Future[Any]] = {read, child.exited}
        done, _ = await asyncio.wait(waitables, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if read in done:
            try:
                line = read.result()
            except (ValueError, asyncio.LimitOverrunError):
                return None, "the child's first stdout line was longer than 64 KiB"
            if line:
                return line, None
            status = await asyncio.shield(child.exited)
            return None, f"the child ended before it reported ready ({status})"
        if child.exited in done:
            # Exited; a ready line may still be buffered.
            try:
                line = await asyncio.wait_for(read, 1.0)
            except (TimeoutError, ValueError):
                line = b""
            if line:
                return line, None
            return None, f"the child ended before it reported ready ({child.exited.result()})"
        read.cancel()
        return None, f"the child did not report ready within {timeout:g}s (launch bound), so it was killed"

    def _release(self, jti: str | None) -> None:
        """Give back a reservation whose child never registered (its slot would linger 60 s)."""
        if jti is None:
            return
        self.roost.referee.release_slot(jti)

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
        roost = self.roost
        live = self._live.pop(job.job_id, None)
        if live is not None:
            self._close_live(live)
        self.backend.lifeline_close(job.job_id)
        await self.backend.finish_off(job.job_id, None)
        if parent is not None:
            self._children.get(parent.session_id, set()).discard(job.job_id)
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
            await roost.referee.end_session(rec, "failed")
        if parent is not None:
            await self._write_delegation_line(parent, job.name, job.version, None, None, t0, "failed", reason)
            job.end_written = True
        with contextlib.suppress(Exception):
            await roost.store.commit([job.upsert_op()])
        self._remember(job)
        job.done.set()
        roost.metrics.capsule_exits.labels(reason="failed").inc()
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

    async def _drain_stdout(self, job: Job, live: _Live) -> None:
        """Later stdout lines go to the child's log (the pipe must never fill up)."""
        child = live.child
        while True:
            try:
                line = await child.readline()
            except (ValueError, asyncio.LimitOverrunError):
                continue
            if not line:
                return
            batch = [line.decode("utf-8", "replace").rstrip("\n")]
            with contextlib.suppress(OSError):
                await self.backend.append_log(self._dir(job), batch)

    # -- exit, completion ------------------------------------------------------------------------
    async def _supervise(self, job: Job, live: _Live) -> None:
        status = await asyncio.shield(live.child.exited)
        await self._finalize(job, status)

    def _close_live(self, live: _Live) -> None:
        for timer in live.timers:
            timer.cancel()
        live.child.close()

    def _session_of(self, job: Job) -> SessionRecord | None:
        table = self.roost.table
        if job.session_id is not None:
            return table.get(job.session_id)
        for rec in table.iter_running():
            if rec.job_id == job.job_id or (job.pid is not None and rec.pid == job.pid):
                return rec
        return None

    async def _finalize(self, job: Job, exit_status: str) -> None:
        """Everything that follows a child's exit, once: completion, delivery, trace, record."""
        # Checked and marked with no await between: a second caller (reconcile, a supervisor)
        # returns at once instead of finalizing the same job twice.
        if job.done.is_set() or job.job_id in self._finalizing:
            return
        self._finalizing.add(job.job_id)
        try:
            await self._finalize_once(job, exit_status)
        finally:
            self._finalizing.discard(job.job_id)

    async def _finalize_once(self, job: Job, exit_status: str) -> None:
        roost = self.roost
        span = roost.events.start("roost.process.exit", **self._attrs(job, pid=job.pid, exit_code=exit_status))
        live = self._live.pop(job.job_id, None)
        if live is not None:
            self._close_live(live)
        # The job's main process is gone: nothing of the job may outlive it, in its group or out.
        await self.backend.finish_off(job.job_id, job.pid)
        if live is not None:
            for task in live.tasks:
                if not task.done():
                    with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                        await asyncio.wait_for(asyncio.shield(task), 1.0)
        job.exit_status = exit_status
        self.backend.lifeline_close(job.job_id)
        if job.parent_id is not None:
            self._children.get(job.parent_id, set()).discard(job.job_id)
        rec = self._session_of(job)
        own_end: str | None = None
        if rec is not None and not rec.running:
            own_end = rec.status  # the child ended its own session before it exited
        elif rec is not None:
            # The child's process is gone but its session was never ended (a crash): end it,
            # which closes the lifelines of its own children (the cascade).
            await roost.referee.end_session(rec, "failed")
        try:
            await self._complete(job, own_end)
        except Exception:
            log.exception("completion_failed", job_id=job.job_id)
            if not job.final:
                self._set_state(job, "crashed")
        job.ended_ms = wall_ms()
        with contextlib.suppress(Exception):
            await roost.store.commit([job.upsert_op()])
        self._remember(job)
        job.done.set()
        roost.metrics.capsule_exits.labels(reason=job.state).inc()
        span.completed(**_a({"roost.process.state": job.state, "roost.process.outcome": job.outcome}))
        log.info(
            "job_ended",
            job_id=job.job_id,
            capsule=f"{job.name}@{job.version}",
            state=job.state,
            outcome=job.outcome,
            exit_status=exit_status,
        )

    async def _complete(self, job: Job, own_end: str | None) -> None:
        roost = self.roost
        existing = await self.backend.read_completion(self._dir(job))
        handle = SpawnerHandle.parse(job.handle) if job.handle else None
        parent = roost.table.get(job.parent_id) if job.parent_id else None
        duration = max(0, wall_ms() - job.created_ms)
        if job.delegated and (job.stop_reason == "parent_ended" or parent is None or not parent.running):
            # The parent is gone: nobody to report to, and the design says no completion.json.
            self._set_state(job, state_for_status(existing.status) if existing else "terminated")
            job.completion = existing.to_dict() if existing else None
            job.outcome = existing.status if existing else "terminated"
            job.reason = PARENT_ENDED_REASON
            return
        # A re-adopted child's exit status is not ours to read: its own records say how it ended.
        unknown = (job.exit_status or "").startswith("exit status unknown")
        told: str | None = None
        if unknown and existing is None and job.session_id is not None:
            told = await self.backend.own_session_end(self._dir(job), job.session_id)
            if own_end is None and told is not None:
                own_end = "complete" if told == "ok" else "failed"
        outcome: str
        reason: str | None
        if job.stop_reason in ("cancel", "operator_cancel", "shutdown", "deadline") and not (
            existing and existing.delivered
        ):
            detail = {"deadline": deadline_detail(job.deadline_secs), "operator_cancel": OPERATOR_CANCEL_DETAIL}.get(
                job.stop_reason, TERMINATED_DETAIL
            )
            rec = self._launcher_record(job, "terminated", duration, detail)
            if job.stop_reason == "deadline":
                final = await self._deliver(job, handle, rec, attempts=2)
                outcome = "timed_out"
            else:
                final = await self._report(job, None, rec)
                outcome = "terminated"
            reason = detail
        elif existing is not None:
            final = existing
            if not existing.delivered and job.delivery == "none":
                final = await self._deliver(job, handle, existing, attempts=1 if existing.reported_by == "child" else 2)
            outcome = existing.status
            reason = existing.detail if existing.status in ("crashed", "terminated") else None
        elif own_end is not None and (handle is None or not handle.addressed):
            # Nobody to report to, so the child wrote no completion; it ended its own session,
            # so it did not crash: record how it ended.
            exited_ok = job.exit_status == "exit status 0" or (unknown and told in ("ok", None))
            ok = own_end == "complete" and exited_ok
            rec = self._launcher_record(job, "ok" if ok else "error", duration, None)
            final = await self._report(job, None, rec)
            outcome, reason = final.status, None
        else:
            tail = await self.backend.stderr_tail(self._dir(job))
            rec = self._launcher_record(job, "crashed", duration, crash_detail(job.exit_status or "unknown", tail))
            final = await self._deliver(job, handle, rec, attempts=2)
            outcome, reason = "crashed", rec.detail
        # The parent's `delegation` line lands before the job reads as final, so whoever sees a
        # final state also finds the delegation recorded in the parent's trace.
        job.completion = final.to_dict()
        job.outcome, job.reason = outcome, reason
        try:
            if parent is not None and not job.end_written:
                await self._write_end_line(job, parent, duration, outcome, reason)
        finally:
            self._set_state(job, state_for_status(final.status))

    def _launcher_record(self, job: Job, status: Any, duration: int, detail: str | None) -> CompletionRecord:
        return CompletionRecord(
            delegation_id=job.delegation_id,
            capsule_name=job.name,
            capsule_version=job.version,
            session_id=job.session_id or "",
            status=status,
            workdir=job.workdir,
            duration_ms=duration,
            reported_by="launcher",
            detail=detail,
        )

    async def _deliver(
        self, job: Job, handle: SpawnerHandle | None, rec: CompletionRecord, *, attempts: int
    ) -> CompletionRecord:
        """Record, post (at most ``attempts`` times), record again. At most once across a crash."""
        roost = self.roost
        if handle is None or not handle.addressed:
            return await self._report(job, None, rec)
        span = roost.events.start(
            "roost.completion.deliver", subsystem="completion", **self._attrs(job, attempts=attempts)
        )
        job.delivery = "posting"
        with contextlib.suppress(Exception):
            await roost.store.commit([job.upsert_op()])
        final = replace(rec, delivered=False, delivery_error=None)
        tries = 0
        for _ in range(attempts):
            tries += 1
            final = await self._report(job, handle, final)
            if final.delivered:
                break
        job.delivery = "delivered" if final.delivered else "failed"
        roost.metrics.deliveries.labels(outcome=job.delivery).inc()
        if final.delivered:
            span.completed(**_a({"roost.completion.tries": tries}))
        else:
            span.failed(
                ObservedError(name="DeliveryFailed", category="network", message=final.delivery_error),
                **{"roost.completion.tries": tries},
            )
            log.warning(
                "completion_undelivered",
                job_id=job.job_id,
                delegation_id=job.delegation_id,
                tries=tries,
                error=final.delivery_error,
            )
        return final

    async def _report(self, job: Job, handle: SpawnerHandle | None, rec: CompletionRecord) -> CompletionRecord:
        """Write ``delivered: false``, post (when addressed), rewrite with the result."""
        first = replace(rec, delivered=False, delivery_error=None)
        await self.backend.write_completion(self._dir(job), first)
        if handle is None or not handle.addressed:
            return first
        seal_key = self.roost.key_holder.door_key_for(handle.session_id)  # so the parent's door believes the trust
        error = await deliver(self.roost.a2a, handle, first, window_secs=self.delivery_window_secs, seal_key=seal_key)
        final = replace(first, delivered=error is None, delivery_error=error)
        await self.backend.write_completion(self._dir(job), final)
        return final

    # -- parent trace lines ------------------------------------------------------------------------
    async def _trace_has(self, parent: SessionRecord, event_type: str, delegation_id: str) -> bool:
        if parent.workdir is None:
            return False

        def scan() -> bool:
            path = trace_path(parent.workdir or "", parent.session_id)
            try:
                lines = read_trace(path)
            except OSError:
                return False
            return any(ln.get("event_type") == event_type and ln.get("delegation_id") == delegation_id for ln in lines)

        return await self.roost.executor.run(scan)

    async def _write_start_line(self, job: Job, parent: SessionRecord) -> None:
        if job.start_written:
            return
        if job.job_id in self._reconciled and await self._trace_has(parent, "delegation_start", job.delegation_id):
            job.start_written = True
            return
        await self.roost.write_trace(
            parent,
            "delegation_start",
            {
                "delegation_id": job.delegation_id,
                "capsule": job.name,
                "version": job.version,
                "child_session_id": job.session_id,
                "child_workdir": _relative(job.workdir, parent.workdir),
            },
        )
        job.start_written = True

    async def _write_end_line(
        self, job: Job, parent: SessionRecord, duration: int, outcome: str, reason: str | None
    ) -> None:
        if job.job_id in self._reconciled and await self._trace_has(parent, "delegation", job.delegation_id):
            job.end_written = True
            return
        await self.roost.write_trace(
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

    async def _write_delegation_line(
        self,
        parent: SessionRecord,
        name: str,
        version: str,
        delegation_id: str | None,
        child_session_id: str | None,
        t0: float,
        outcome: str,
        reason: str | None,
    ) -> None:
        await self.roost.write_trace(
            parent,
            "delegation",
            {
                "capsule": name,
                "version": version,
                "delegation_id": delegation_id,
                "child_session_id": child_session_id,
                "duration_ms": int((time.monotonic() - t0) * 1000),
                "outcome": outcome,
                "reason": reason,
            },
        )

    # -- stop: cancel, deadline, parent end ------------------------------------------------------
    def _on_deadline(self, job_id: str) -> None:
        job = self.jobs.get(job_id)
        live = self._live.get(job_id)
        if job is None or live is None or job.final:
            return
        if job.stop_reason is None:
            job.stop_reason = "deadline"
        log.info("job_deadline", job_id=job_id, deadline_secs=job.deadline_secs)
        self._spawn_task(live.child.stop(self.roost.config.stop_grace_secs))

    async def _on_session_end(self, rec: SessionRecord) -> None:
        """A session ended: close its children's lifelines; force them out after the grace."""
        for job_id in self._children.pop(rec.session_id, set()):
            self._parent_ended(job_id)

    def _parent_ended(self, job_id: str) -> None:
        job = self.jobs.get(job_id)
        live = self._live.get(job_id)
        if job is None or live is None or job.final:
            return
        if job.stop_reason is None:
            job.stop_reason = "parent_ended"
        self.backend.lifeline_close(job_id)
        child = live.child

        def force() -> None:
            if child.alive:
                log.warning("lifeline_grace_expired", job_id=job_id, pid=child.pid)
                child.kill()

        live.timers.append(asyncio.get_running_loop().call_later(self.roost.config.lifeline_grace_secs, force))

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
        job_id = job.job_id
        roost = self.roost
        span = roost.events.start("roost.process.cancel", **self._attrs(job, pid=job.pid))
        if job.stop_reason is None:
            job.stop_reason = why
        live = self._live.get(job_id)
        killed = False
        if live is not None:
            killed = await live.child.stop(roost.config.stop_grace_secs)
        try:
            await asyncio.wait_for(job.done.wait(), roost.config.stop_grace_secs + 60)
        except TimeoutError:
            span.failed(ObservedError(name="CancelTimeout", category="timeout"))
            raise
        span.completed(**_a({"roost.process.state": job.state, "roost.process.sigkill": killed}))
        log.info("job_canceled", job_id=job_id, sigkill=killed)
        return job

    # -- GET /jobs/{id} --------------------------------------------------------------------------
    async def find(self, job_id: str, credential: str | None, *, loopback: bool) -> Job:
        """The job, if the caller may see it: its parent session's credential, or (top-level) loopback.

        Unknown and not-yours are the same 404, so the answer is no oracle for job ids.
        """
        owner: str | None = None
        if credential is not None:
            owner = self.roost.referee.authenticate(credential).session_id
        elif not loopback:
            raise IdentityRefused()
        job = self.jobs.get(job_id)
        if job is None and ids.JOB_ID_RE.match(job_id):
            job = await self._load(job_id)
        if job is None or job.parent_id != owner:
            raise NotFound("job not found")
        return job

    async def _load(self, job_id: str) -> Job | None:
        rows = await self.roost.executor.run(self.roost.store.rows, "SELECT * FROM jobs WHERE job_id = ?", (job_id,))
        if not rows:
            return None
        job = Job.from_row(rows[0])
        if job.final:
            rec = await self.backend.read_completion(self._dir(job))
            job.completion = rec.to_dict() if rec is not None else None
        return job


def _a(attrs: dict[str, Any]) -> dict[str, Any]:
    """Event attributes carry dotted keys, so they travel as a dict."""
    return attrs


def _relative(path: str, base: str | None) -> str:
    """``path`` relative to ``base`` (both absolute; the child dir is always under the parent's)."""
    try:
        return str(Path(path).relative_to(base or "/"))
    except ValueError:
        return path


def _parse_ready(line: bytes) -> tuple[str, str | None] | None:
    import json

    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    sid = obj.get("session_id")
    if not isinstance(sid, str) or not ids.SESSION_ID_RE.match(sid):
        return None
    url = obj.get("capsule_url") or obj.get("url")
    if not isinstance(url, str) or not url:
        url = None
    elif "://" not in url:
        url = f"http://{url}"
    return sid, url
