"""The local process backend: children on this host (:class:`roost.backends.base.ProcessBackend`).

How each duty is done here, and why, is told where the work lives: the command line, the
environment and ``Popen`` in :mod:`roost.backends.process.spawn`; the lifeline pipe and its holder in
:mod:`roost.backends.local.lifeline` and :mod:`roost.backends.local.holder`; the pidfd watch and group
signals in :mod:`roost.backends.process.supervise`; cgroups and the marker sweep in
:mod:`roost.backends.process.cgroups`; the child directory's files in :mod:`roost.services.launcher.childrecords`.
This module puts them together behind the backend's methods: blocking work goes through the
daemon's executor, ``Popen`` runs on the event loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

import psutil
import structlog

from roost.backends.base import (
    CannotRunAs,
    ChildDir,
    ChildDirError,
    ChildRef,
    NodeRef,
    RunningChild,
    StartFailed,
    StartSpec,
)
from roost.backends.local.lifeline import HolderClient, HolderError, connect_holder, make_pipe, stop_holder
from roost.backends.process.cgroups import JobCgroups
from roost.backends.process.joblimits import JobLimits, unbound_sentence
from roost.backends.process.privdrop import find_setpriv
from roost.backends.process.spawn import (
    CannotSwitchUser,
    ChildSpec,
    RunAs,
    apply_limits,
    can_switch_users,
    daemon_holds_setpcap,
    require_command,
    run_as,
    start_process,
    switch_refusal,
)
from roost.backends.process.supervise import ProcessWatch, signal_group, stop_group
from roost.core.completion import CompletionRecord
from roost.core.ids import JOB_ID_RE
from roost.core.limits import LIMITS_ENV, HostMechanisms, LimitPlan
from roost.core.manifest import ResourceCaps
from roost.observe.tracelines import append_lines
from roost.services.completionfile import read_completion, write_completion
from roost.services.launcher import childrecords
from roost.system.blocking import BlockingExecutor
from roost.system.fsutil import Place
from roost.system.procstart import process_identity, same_process
from roost.system.workdirs import registered_workdir

__all__ = ["LocalBackend", "LocalChild", "find_job_processes"]

log = structlog.get_logger("roost.launcher")

READY_LINE_MAX = 64 * 1024


def place_of(dir: ChildDir) -> Place:
    """The job's directory as this host writes into it: beneath its base, following no link."""
    return childrecords.place_of(dir.workdir, dir.parent_workdir, dir.uid)


class LocalChild:
    """A child on this host: a pidfd watch, and (when this instance started it) its stdout."""

    def __init__(self, job_id: str, watch: ProcessWatch, pid_start: float | None) -> None:
        self.job_id: str = job_id
        self.pid: int = watch.pid
        self.pid_start: float | None = pid_start
        self.node: NodeRef | None = None
        self._watch = watch
        self._popen = watch.popen
        self._transport: asyncio.ReadTransport | None = None
        self._reader: asyncio.StreamReader | None = None
        self._closed = False

    @property
    def exited(self) -> asyncio.Future[str]:
        return self._watch.exited

    @property
    def alive(self) -> bool:
        return self._watch.alive

    @property
    def ref(self) -> ChildRef:
        return ChildRef(self.job_id, self.pid, self.pid_start, None)

    async def readline(self) -> bytes:
        if self._reader is None:
            if self._closed or self._popen is None or self._popen.stdout is None:
                return b""
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(limit=READY_LINE_MAX)
            self._reader = reader
            self._transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), self._popen.stdout
            )
        return await self._reader.readline()

    async def stop(self, grace: float) -> bool:
        return await stop_group(self._watch, grace)

    def kill(self) -> None:
        if self._watch.alive:
            signal_group(self.pid, signal.SIGKILL)

    def close(self) -> None:
        self._closed = True
        if self._transport is not None:
            self._transport.close()
        self._watch.close()


def find_job_processes(instance: str) -> list[tuple[int, str, int]]:
    """``(pid, job_id, pgid)`` of processes launched by this daemon instance (blocking): this
    uid's, or any uid's for a root daemon."""
    me = os.getuid()
    out: list[tuple[int, str, int]] = []
    for proc in psutil.process_iter(["uids"]):
        try:
            if proc.pid == os.getpid() or proc.info["uids"] is None:
                continue
            # A root daemon's children run as their sessions' uids (docs/security.md).
            if me != 0 and proc.info["uids"].real != me:
                continue
            env = proc.environ()
        except (psutil.Error, OSError):
            continue
        job_id = env.get("MURMUR_JOB_ID", "")
        if JOB_ID_RE.match(job_id) and env.get("MURMUR_ROOST_INSTANCE") == instance:
            try:
                pgid = os.getpgid(proc.pid)
            except OSError:
                continue
            out.append((proc.pid, job_id, pgid))
    return out


def _prepare(place: Place, job_id: str, task: dict[str, str | None] | None, fresh: bool) -> None:
    os.close(childrecords.prepare_child_dir(place, job_id, task, fresh=fresh))


def _before_start(
    place: Place, spec: StartSpec, limits: JobLimits, plan: LimitPlan
) -> tuple[RunAs | None, int, JobCgroups | None, LimitPlan]:
    """Blocking: who the child runs as, its log opened for stderr, its cgroups made with their
    limits (the plan, less what could not be written: roost/backends/process/joblimits.py)."""
    try:
        user = run_as(spec.uid)
    except CannotSwitchUser as exc:
        raise CannotRunAs(str(exc)) from None
    try:
        require_command(spec.argv[0], spec.env.get("PATH", os.defpath))
    except FileNotFoundError as exc:
        raise StartFailed(f"{spec.argv[0]}: {exc.strerror}") from None
    cgroups, plan = limits.make(spec.dir.job_id, spec.resources, plan, spec.capsule)
    log_fd = childrecords.open_log(place)
    return user, log_fd, cgroups, plan


class LocalBackend:
    """Children on this host, their lifelines held by the holder process."""

    def __init__(self, executor: BlockingExecutor, *, state_dir: Path, job_cgroups: str, max_starting: int) -> None:
        self._executor = executor
        self._start_gate = asyncio.Semaphore(max_starting or max(2, os.cpu_count() or 2))
        self._state_dir = state_dir
        self._job_cgroups = job_cgroups
        self.holder: HolderClient | None = None
        # The job cgroups (v2, and v1 for what v2 lacks on a hybrid host), found at open.
        self.limits = JobLimits(None, None, off=job_cgroups == "off")
        # Root with CAP_SETUID/CAP_SETGID (read at open); a job of another uid is refused up front without.
        self._can_switch = True
        self._setpriv: str | None = None  # the privilege-dropping exec step, found at open
        self._setpcap = False  # whether this daemon may clear a child's bounding set
        # Write ends held here only when the holder is unavailable (then a crash ends the children).
        self._own_lifelines: dict[str, int] = {}

    # -- lifecycle ----------------------------------------------------------------------------
    async def open(self) -> None:
        self.limits = await self._executor.run(JobLimits.discover, self._job_cgroups)
        self._can_switch = await self._executor.run(can_switch_users)
        self._setpriv = await self._executor.run(find_setpriv)
        self._setpcap = await self._executor.run(daemon_holds_setpcap)
        if self._setpriv is None:
            log.warning("setpriv_missing", why="children keep the daemon's capabilities; install util-linux")
        elif os.geteuid() == 0 and not self._setpcap:
            log.warning(
                "setpcap_missing",
                why="a uid-0 child keeps the daemon's bounding set; add CAP_SETPCAP to CapabilityBoundingSet",
            )
        # Empty cgroups of jobs that ended without removing theirs (roost/backends/process/cgroups.py).
        swept = await self._executor.run(self.limits.sweep_empty)
        log.info("job_containment", **self.limits.describe(), swept=swept)
        try:
            self.holder = await connect_holder(self._state_dir, self._executor)
        except (HolderError, OSError, TimeoutError) as exc:
            # Without a holder the daemon holds the write ends itself (a crash then ends the children).
            log.error("keeper_unavailable", error=str(exc))
            self.holder = None

    async def close(self) -> None:
        if self.holder is not None:
            await stop_holder(self.holder, self._executor)
            self.holder = None
        for fd in self._own_lifelines.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._own_lifelines = {}

    @property
    def cgroups(self) -> JobCgroups | None:
        """The v2 job cgroups on this host (None: the marker sweep finishes jobs off)."""
        return self.limits.cgroups

    @property
    def containment(self) -> str | None:
        return str(self.cgroups.root) if self.cgroups is not None else None

    def limit_mechanisms(self) -> HostMechanisms:
        """How each resource limit is enforced on this host (roost/core/limits.py)."""
        return self.limits.mechanisms()

    # -- placement ------------------------------------------------------------------------------
    async def place(self, job_id: str, capsule: str, resources: ResourceCaps, uid: int | None) -> NodeRef | None:
        return None

    def start_gate(self, node: NodeRef | None) -> asyncio.Semaphore:
        """``Popen`` blocks the event loop until the vforked child has exec'd, which under a
        storm of launches on a busy host means waiting for a CPU. Admitting only
        ``max_starting`` children between spawn and ready keeps that wait short."""
        return self._start_gate

    # -- the child directory --------------------------------------------------------------------
    async def prepare_dir(self, dir: ChildDir, task: dict[str, str | None] | None, *, fresh: bool) -> ChildDir:
        try:
            await self._executor.run(_prepare, place_of(dir), dir.job_id, task, fresh)
        except OSError as exc:
            raise ChildDirError(exc.strerror or str(exc)) from None
        return dir

    async def read_completion(self, dir: ChildDir) -> CompletionRecord | None:
        return await self._executor.run(read_completion, place_of(dir))

    async def write_completion(self, dir: ChildDir, rec: CompletionRecord) -> None:
        await self._executor.run(write_completion, place_of(dir), rec)

    async def stderr_tail(self, dir: ChildDir) -> list[str]:
        return await self._executor.run(childrecords.stderr_tail, place_of(dir))

    async def own_session_end(self, dir: ChildDir, session_id: str) -> str | None:
        return await self._executor.run(childrecords.own_session_end, place_of(dir), session_id)

    async def rotate_log(self, dir: ChildDir, max_bytes: int) -> bool:
        return await self._executor.run(childrecords.rotate_log, place_of(dir), max_bytes)

    async def append_log(self, dir: ChildDir, lines: Sequence[str]) -> None:
        await self._executor.run(childrecords.append_log, place_of(dir), list(lines))

    async def append_trace(
        self, dir: ChildDir, session_id: str, lines: Sequence[tuple[str, dict[str, object]]]
    ) -> list[str]:
        return await self._executor.run(append_lines, dir.workdir, session_id, list(lines), uid=dir.uid)

    async def read_file(self, dir: ChildDir, name: str, offset: int, max_bytes: int) -> tuple[int, bytes]:
        return await self._executor.run(childrecords.read_at, place_of(dir), name, offset, max_bytes)

    async def list_files(self, dir: ChildDir, sub: str) -> list[str]:
        return await self._executor.run(childrecords.list_names, place_of(dir), sub)

    async def check_workdir(self, dir: ChildDir, workdir: str, uid: int | None) -> str:
        return await self._executor.run(registered_workdir, workdir, uid)

    # -- children -------------------------------------------------------------------------------
    def check_run_as(self, uid: int | None) -> None:
        refusal = switch_refusal(uid, me=os.geteuid(), capable=self._can_switch)
        if refusal is not None:
            raise CannotRunAs(refusal)

    async def start(self, spec: StartSpec) -> LocalChild:
        job_id = spec.dir.job_id
        # The limits policy first: a limit nothing here can enforce refuses before anything is made.
        plan = self.limits.decide(spec.resources, spec.limits_mode, spec.capsule)
        user, log_fd, cgroups, plan = await self._executor.run(
            _before_start, place_of(spec.dir), spec, self.limits, plan
        )
        read_fd, write_fd = make_pipe()
        env = dict(spec.env)
        env["MURMUR_SPAWNER_LIFELINE"] = str(read_fd)
        if spec.limits_in_child:  # a capsule host reports them in effective_grants
            env[LIMITS_ENV] = plan.to_env()
        child = ChildSpec(
            argv=spec.argv,
            env=env,
            cwd=spec.cwd,
            lifeline_fd=read_fd,
            stderr_fd=log_fd,
            user=user,
            setpriv=self._setpriv,
            sealed=spec.containment == "sealed",
            setpcap=self._setpcap,
        )
        try:
            popen = start_process(child)
            # Inline, before anything else can run on this loop: the child has only just exec'd
            # its host, which forks nothing before it has registered.
            unlimited = self.limits.enter(job_id, popen.pid, cgroups, plan)
        except OSError as exc:
            os.close(write_fd)
            raise StartFailed(f"{spec.argv[0]}: {exc.strerror or exc}") from None
        finally:
            os.close(read_fd)
            os.close(log_fd)
        if unlimited and plan.mode == "enforce":
            # Its limits would not bind it: end it before it has done anything.
            signal_group(popen.pid, signal.SIGKILL)
            os.close(write_fd)
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                popen.wait(timeout=5)
            raise StartFailed(unbound_sentence(unlimited))
        # Its start in clock ticks since boot: a wall-clock step cannot make it a stranger.
        pid_start = process_identity(popen.pid)
        # A script capsule's host sets its entrypoint's rlimits itself, just before exec; limiting
        # the host would starve it (it needs more address space than a small limit allows).
        failed = [] if spec.limits_in_child else apply_limits(popen.pid, spec.resources)
        if failed:
            log.warning("resource_limits_not_applied", job_id=job_id, limits=",".join(failed))
        self._lifeline_hold(job_id, write_fd, popen.pid, pid_start)
        watch = ProcessWatch(popen.pid, popen)
        watch.start()
        # The approval: one line on stdin, then EOF. Never argv, never the environment.
        assert popen.stdin is not None
        try:
            if spec.stdin:
                popen.stdin.write(spec.stdin)
            popen.stdin.close()
        except OSError:
            pass
        return LocalChild(job_id, watch, pid_start)

    def _lifeline_hold(self, job_id: str, fd: int, pid: int, start: float | None) -> None:
        if self.holder is not None and self.holder.connected:
            try:
                self.holder.hold(job_id, fd, pid, start)
                os.close(fd)
                return
            except HolderError as exc:
                log.error("keeper_hold_failed", job_id=job_id, error=str(exc))
        self._own_lifelines[job_id] = fd

    def lifeline_close(self, job_id: str) -> None:
        fd = self._own_lifelines.pop(job_id, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.holder is not None:
            self.holder.close(job_id)

    async def held_lifelines(self) -> set[str]:
        held: set[str] = set()
        if self.holder is not None and self.holder.connected:
            with contextlib.suppress(Exception):
                held = {str(h.get("key")) for h in await self.holder.list()}
        return held

    async def finish_off(self, job_id: str, pid: int | None) -> None:
        """Its group, then its cgroup (``cgroup.kill``), else every process carrying its
        ``MURMUR_JOB_ID`` (roost/backends/process/cgroups.py)."""
        if pid is not None:
            signal_group(pid, signal.SIGKILL)  # whatever it left behind in its group
        try:
            left, how = await self._executor.run(self.limits.finish, job_id)
        except OSError as exc:
            log.warning("job_finish_off_failed", job_id=job_id, error=exc.strerror)
            return
        if left:
            log.info("job_leftovers_killed", job_id=job_id, count=left, by=how)

    # -- after a restart --------------------------------------------------------------------------
    async def is_running(self, ref: ChildRef) -> bool:
        return await self._executor.run(same_process, ref.pid, ref.pid_start)

    def adopt(self, ref: ChildRef) -> LocalChild:
        assert ref.pid is not None
        watch = ProcessWatch(ref.pid, None)
        watch.start()
        return LocalChild(ref.job_id, watch, ref.pid_start)

    async def list_running(self, instance: str) -> list[RunningChild]:
        found = await self._executor.run(find_job_processes, instance)
        return [RunningChild(pid=pid, job_id=job_id, pgid=pgid) for pid, job_id, pgid in found]

    async def end_orphan(self, found: RunningChild) -> None:
        with contextlib.suppress(OSError):
            if found.pgid == found.pid:
                os.killpg(found.pgid, signal.SIGKILL)
            else:
                os.kill(found.pid, signal.SIGKILL)
