"""The process backend: where a job's child runs, and everything that touches it or its directory.

The launcher decides (who may launch, what the job is, which completion is written and who is
told); a backend does. It starts the child, holds its lifeline, tells when it exits, stops it,
finishes off what it leaves behind, and reads and writes the job's directory. The launcher never
calls ``os``, opens a file of the child directory or touches a pid itself: everything below goes
through one :class:`ProcessBackend`, so a backend whose children run on other machines (with no
filesystem shared with the daemon) plugs in without the launcher changing.

The local backend (:mod:`roost.backends.local.backend`) runs children on this host: ``Popen`` on the
event loop's thread, a lifeline pipe whose write end the holder process holds, a pidfd per child,
cgroups (or a sweep of marked processes) to finish off leftovers, and link-free file access
beneath the parent's workdir (``docs/security.md``).

Contract every implementation keeps (the launcher relies on each point):

* Methods are called on the event loop's thread. None may block the loop: file, socket and
  process-table work goes to an executor or to another machine.
* A directory method never follows a symbolic link out of the job's directory, and whatever it
  creates belongs to the job's uid.
* A child's lifeline is held from the moment :meth:`ProcessBackend.start` returns until
  :meth:`ProcessBackend.lifeline_close` (or :meth:`ProcessBackend.close` at an orderly stop).
  A backend that cannot keep a lifeline across a daemon crash says so by ending its children
  when the daemon goes away; it never leaves one running without a lifeline.
* Errors the launcher must tell apart are the three :class:`BackendError` subclasses; their
  message is one sentence, never a traceback, never a token.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from roost.core.completion import CompletionRecord
from roost.core.jobs import ChildDir, NodeRef
from roost.core.limits import HostMechanisms
from roost.core.manifest import ResourceCaps

__all__ = [
    "BackendError",
    "CannotRunAs",
    "ChildDir",
    "ChildDirError",
    "ChildHandle",
    "ChildRef",
    "LimitsRefused",
    "NodeRef",
    "PlacementRefused",
    "ProcessBackend",
    "ReportsLimits",
    "RotatesLogs",
    "RunningChild",
    "StartFailed",
    "StartSpec",
]


@dataclass(frozen=True, slots=True)
class StartSpec:
    """Everything needed to start one child; built by the launcher, run by a backend.

    * ``argv`` — the command line, run as is (``roost-capsule run …`` for a script capsule).
    * ``env`` — the child's whole environment (it starts empty). The backend adds one
      name, ``MURMUR_SPAWNER_LIFELINE``: the number of the descriptor on which the child reads
      its lifeline (EOF = the parent session ended), and, for a script capsule's host,
      ``MURMUR_RESOURCE_LIMITS`` (see ``limits_mode``). A backend adds nothing else.
    * ``cwd`` — the child's working directory: ``dir.workdir``, already prepared with
      :meth:`ProcessBackend.prepare_dir`.
    * ``stdin`` — written to the child's stdin right after it starts, then stdin is closed
      (EOF). It carries the approval line of a delegated child: never put it in argv, the
      environment or a log.
    * ``uid`` — run the child as this uid (with its primary group, supplementary groups and
      ``HOME``); None: as the daemon's own uid.
    * ``resources`` — the manifest's resource caps. ``limits_in_child`` True means the child
      (a script capsule's host) sets them itself just before it execs its entrypoint, so the
      backend must not limit the child process itself (a cgroup around it is still fine).
    * ``limits_mode`` — the daemon's ``resource_limits`` (``enforce`` or ``advisory``): a backend
      that finds a declared limit it cannot enforce refuses the start under ``enforce``
      (:class:`LimitsRefused`, before any process exists) and tells the child what each limit is
      enforced by in ``MURMUR_RESOURCE_LIMITS`` (``roost/core/limits.py``; a script capsule's host
      only) — the one name besides the lifeline a backend may add to ``env``.
    * ``capsule`` — ``name@version``, for placement decisions and logs.
    * ``sha256`` — the digest of the capsule's artifact the referee resolved (a backend whose
      node has no copy of the registry fetches the artifact by it and checks it).
    * ``containment`` — the manifest's containment floor (``sealed`` needs the sandbox builder:
      roost/backends/process/privdrop.py).
    * ``instance`` — this daemon instance's id; the backend marks the child with it
      (``MURMUR_ROOST_INSTANCE`` is in ``env`` already) so :meth:`ProcessBackend.list_running`
      finds it after a crash.
    """

    dir: ChildDir
    argv: list[str]
    env: dict[str, str]
    cwd: str
    stdin: bytes
    uid: int | None
    resources: ResourceCaps
    limits_in_child: bool
    capsule: str
    instance: str
    sha256: str = ""
    containment: str = "advisory"
    limits_mode: str = "enforce"


@dataclass(frozen=True, slots=True)
class ChildRef:
    """What the job record remembers of a started child, enough to find it again later.

    ``pid`` and ``pid_start`` (when the process started, in clock ticks since boot:
    :func:`roost.system.procstart.process_identity`, which no wall-clock step moves) identify the
    process on ``node`` (None: this host): the pair is never reused, so a matching pid with
    another start is somebody else's process.
    """

    job_id: str
    pid: int | None
    pid_start: float | None
    node: NodeRef | None = None


@dataclass(frozen=True, slots=True)
class RunningChild:
    """A process :meth:`ProcessBackend.list_running` found: the child of ``job_id`` (or one of
    its descendants, which carry the same mark), its process group and its node."""

    pid: int
    job_id: str
    pgid: int
    node: NodeRef | None = None


class BackendError(Exception):
    """A backend could not do what was asked; ``str(exc)`` is one sentence for a client."""


class ChildDirError(BackendError):
    """The job's directory could not be created or written.

    ``detail`` is the short cause (``strerror`` for an OS error, e.g. "File exists"); the
    launcher puts it into its own sentence."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class PlacementRefused(BackendError):
    """No node can take the child (infeasible: at once; all busy: after a bounded wait).
    The message is the whole sentence; the launcher answers 409 with it."""


class CannotRunAs(BackendError):
    """The backend cannot start a child as the spec's uid (the message is the whole sentence)."""


class LimitsRefused(BackendError):
    """A declared ``capabilities.resources`` limit that no mechanism of the child's host can
    enforce, under ``resource_limits = "enforce"`` (the message is the whole sentence, naming
    the field); nothing was started."""


@runtime_checkable
class RotatesLogs(Protocol):
    """A backend that bounds a running child's ``.murmur/launcher.log`` (the local one): past
    ``max_bytes`` it keeps the last part in ``launcher.log.1`` and empties the log in place."""

    async def rotate_log(self, dir: ChildDir, max_bytes: int) -> bool: ...


@runtime_checkable
class ReportsLimits(Protocol):
    """A backend that can say how each resource limit is enforced where its children run (the
    local one: this host); ``GET /status`` and ``roostctl doctor`` show it."""

    def limit_mechanisms(self) -> HostMechanisms: ...


class StartFailed(BackendError):
    """The child process could not be started at all.

    ``detail`` names the command and the cause (``"/usr/bin/roost-capsule: No such file or
    directory"``); the launcher says "the child could not be started (<detail>)"."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@runtime_checkable
class ChildHandle(Protocol):
    """A started (or adopted) child, as long as the launcher supervises it.

    Attributes:
        job_id: the job the child belongs to.
        pid: the child's process id on its node.
        pid_start: when the process started (see :class:`ChildRef`); None when unknown.
        node: where it runs (None: this host).
        exited: resolves once, when the child's main process has ended, with a status
            sentence: ``"exit status N"``, ``"killed by SIGNAME"``, or — for a child this
            daemon instance did not start and so cannot reap — a sentence starting with
            ``"exit status unknown"``. Never fails, never cancelled by the backend.
    """

    job_id: str
    pid: int
    pid_start: float | None
    node: NodeRef | None

    @property
    def exited(self) -> asyncio.Future[str]: ...

    @property
    def alive(self) -> bool:
        """False once :attr:`exited` is resolved."""
        ...

    @property
    def ref(self) -> ChildRef:
        """What the job record keeps of this child."""
        ...

    async def readline(self) -> bytes:
        """The child's next stdout line, newline included; ``b""`` at end of file.

        A line longer than 64 KiB raises ``ValueError``; the next call reads on (what was still
        on its way of that line may come back as a line of its own). The first line is the
        ready line; the launcher keeps reading after it so the pipe never fills up. An adopted
        child has no stdout here: ``b""`` at once.
        """
        ...

    async def stop(self, grace: float) -> bool:
        """SIGTERM to the child's whole process group; SIGKILL ``grace`` seconds later if the
        main process is still there. Returns once it has exited; True when SIGKILL was needed.
        A no-op returning False for a child that already exited."""
        ...

    def kill(self) -> None:
        """SIGKILL to the child's whole process group, now; returns at once (await
        :attr:`exited` to know it is gone). Harmless after the exit."""
        ...

    def close(self) -> None:
        """Release what the backend holds for watching the child (pidfd, stdout pipe, timers).

        Called once the launcher is done with the handle (after the exit, or at an orderly
        stop). Does not signal the child."""
        ...


@runtime_checkable
class ProcessBackend(Protocol):
    """Starts, watches, stops and finishes off children; reads and writes their directories."""

    # -- lifecycle ------------------------------------------------------------------------
    async def open(self) -> None:
        """Get ready to start children (called once, before anything else): find the
        containment, reach (or start) whatever holds lifelines across a daemon crash."""
        ...

    async def close(self) -> None:
        """Orderly daemon stop, after every running child has been stopped: close every
        lifeline still held and let go of the lifeline holder."""
        ...

    @property
    def containment(self) -> str | None:
        """A short description of how leftovers are contained (e.g. the cgroup root), or None
        when only a sweep by mark is available. Logged at start; shown to operators."""
        ...

    # -- placement ------------------------------------------------------------------------
    async def place(self, job_id: str, capsule: str, resources: ResourceCaps, uid: int | None) -> NodeRef | None:
        """Choose the node the job's child will run on (None: this host); called first, before
        :meth:`prepare_dir`. Raises :class:`PlacementRefused`. Once it returned, every way the
        launch can fail ends with :meth:`finish_off` ``(job_id, None)``, which frees whatever
        the placement reserved (it is also freed on the normal end)."""
        ...

    def start_gate(self, node: NodeRef | None) -> asyncio.Semaphore:
        """The semaphore the launcher holds from :meth:`prepare_dir` until the child's ready line
        (or its failure): it bounds how many children start at once on ``node``. The same
        object for the same node every time."""
        ...

    # -- the child directory ----------------------------------------------------------------
    async def prepare_dir(self, dir: ChildDir, task: dict[str, str | None] | None, *, fresh: bool) -> ChildDir:
        """Create the job's directory (mode 0700; ``fresh``: it must not exist yet) and write
        ``meta/job_id.txt`` (the job id and a newline) and, when ``task`` is given,
        ``input.json`` (a ``murmur.message.v1`` envelope of type
        ``murmur.code_task.request.v1``, see :func:`roost.services.launcher.childrecords.input_envelope`),
        each atomically; create ``.murmur/launcher.log`` (the child's stderr goes there).

        Returns the directory actually used: a node that keeps child directories under a root
        of its own may put it elsewhere than ``dir.workdir`` asked (the launcher records the
        returned ``workdir`` and passes the returned value to every later call). The local
        backend returns ``dir``. Raises :class:`ChildDirError`."""
        ...

    async def read_completion(self, dir: ChildDir) -> CompletionRecord | None:
        """The directory's ``completion.json`` (the child's own or the launcher's), or None
        when there is none, it is unreadable, not a completion record, or a link."""
        ...

    async def write_completion(self, dir: ChildDir, rec: CompletionRecord) -> None:
        """Write ``completion.json`` atomically (durably: it is the record of how the job
        ended), replacing any. Raises ``OSError`` when it cannot."""
        ...

    async def stderr_tail(self, dir: ChildDir) -> list[str]:
        """The last stderr lines of the child (at most
        :data:`roost.services.completionfile.STDERR_LINES`, from ``.murmur/launcher.log``, skipping the
        ``stdout: `` lines :meth:`append_log` wrote); [] when there are none or they cannot
        be read."""
        ...

    async def own_session_end(self, dir: ChildDir, session_id: str) -> str | None:
        """The ``exit_status`` of the last ``session_end`` line in the child's own trace
        (``.murmur/<session_id>/trace.jsonl``), or None: how a child ended that this daemon
        instance could not reap."""
        ...

    async def append_log(self, dir: ChildDir, lines: Sequence[str]) -> None:
        """Append the child's later stdout lines to ``.murmur/launcher.log``, each as
        ``"stdout: <line>\\n"``. Raises ``OSError`` when it cannot (the launcher ignores it)."""
        ...

    async def append_trace(
        self, dir: ChildDir, session_id: str, lines: Sequence[tuple[str, dict[str, object]]]
    ) -> list[str]:
        """Append the daemon's ``lines`` (``(event_type, payload)``, payloads already redacted)
        to ``.murmur/<session_id>/trace.jsonl`` in the directory, in order, each parented to the
        session node (:func:`roost.observe.tracelines.append_lines`); their event ids. The trace sink calls it
        for a session whose workdir is on another node. Raises ``OSError`` when it cannot."""
        ...

    async def read_file(self, dir: ChildDir, name: str, offset: int, max_bytes: int) -> tuple[int, bytes]:
        """``(start, data)`` of the record file ``name`` (a relative path) in the directory, from
        ``offset`` (< 0: its last ``max_bytes``), read where the directory lives
        (:func:`roost.services.launcher.childrecords.read_at`); ``(0, b"")`` when it cannot be read."""
        ...

    async def list_files(self, dir: ChildDir, sub: str) -> list[str]:
        """The regular files in the directory's ``sub`` directory (sorted names); [] when none."""
        ...

    async def check_workdir(self, dir: ChildDir, workdir: str, uid: int | None) -> str:
        """The ``/register`` ownership check of a workdir a session of this job names, run where
        the directory lives (``dir.node``; :func:`roost.system.workdirs.registered_workdir`): the
        normalised workdir, else :class:`roost.core.errors.BadRequest` (not an existing directory)
        or :class:`roost.system.workdirs.WorkdirRefused`, with the same sentence as on this host."""
        ...

    # -- children -------------------------------------------------------------------------
    def check_run_as(self, uid: int | None) -> None:
        """Raise :class:`CannotRunAs` at once when no child could ever be started as ``uid``
        (e.g. a daemon that is not root, asked for another user's uid); return otherwise.
        Called before anything of the job exists, so a refusal leaves nothing behind."""
        ...

    async def start(self, spec: StartSpec) -> ChildHandle:
        """Start the child in a process group of its own, with its lifeline held.

        On return the child runs (or has already exited: :attr:`ChildHandle.exited` says so),
        ``spec.stdin`` has been written and closed, its resource caps are applied, and it is
        inside whatever contains its leftovers. Its stderr goes to ``.murmur/launcher.log``,
        its stdout to :meth:`ChildHandle.readline`. Raises :class:`CannotRunAs` (the uid is
        out of reach; nothing was started) or :class:`StartFailed` (nothing runs)."""
        ...

    def lifeline_close(self, job_id: str) -> None:
        """Close the job's lifeline (its child reads EOF and should end its session).
        Harmless when none is held."""
        ...

    async def held_lifelines(self) -> set[str]:
        """Job ids whose lifelines are still held (e.g. from before a daemon crash)."""
        ...

    async def finish_off(self, job_id: str, pid: int | None) -> None:
        """Kill whatever is left of a job whose main process has ended: with ``pid``, its
        process group first; then every process still contained for ``job_id`` (its cgroup,
        or every process marked with ``MURMUR_JOB_ID``). Waits until they are gone; logs what
        it killed; never raises."""
        ...

    # -- after a restart --------------------------------------------------------------------
    async def is_running(self, ref: ChildRef) -> bool:
        """Whether the recorded child still runs: same pid *and* same start time, not a
        zombie."""
        ...

    def adopt(self, ref: ChildRef) -> ChildHandle:
        """Watch a running child another daemon instance started (``ref`` passed
        :meth:`is_running`). Its exit status is not ours to read: :attr:`ChildHandle.exited`
        resolves with an ``"exit status unknown…"`` sentence."""
        ...

    async def list_running(self, instance: str) -> list[RunningChild]:
        """Every process still running that a child of daemon instance ``instance`` started
        (marked ``MURMUR_ROOST_INSTANCE``), children's descendants included."""
        ...

    async def end_orphan(self, found: RunningChild) -> None:
        """SIGKILL a process :meth:`list_running` found that no job accounts for (its whole
        group when it leads one). Never raises."""
        ...
