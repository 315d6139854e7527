"""A process backend for tests: children that are scripts of events, directories in memory.

:class:`FakeBackend` implements :class:`roost.backends.base.ProcessBackend` (a test double of
that interface, nothing of the launcher's own): a :class:`FakeChild` prints the stdout lines it
is given, exits when told, reacts to SIGTERM and to its lifeline closing as configured, and
records what was done to it, so a test can drive a :class:`roost.services.launcher.runner.JobRunner`
through every path a real child can take without starting one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from roost.backends.base import (
    ChildDir,
    ChildRef,
    NodeRef,
    RunningChild,
    StartSpec,
)
from roost.core.completion import CompletionRecord
from roost.core.manifest import ResourceCaps
from roost.services.launcher.childrecords import LOG_FILE

__all__ = ["FakeBackend", "FakeChild", "FakeDir"]


class FakeChild:
    """A child that does what its test says.

    ``on_term``: ``"exit"`` (dies of SIGTERM) or ``"ignore"``; ``on_lifeline``: ``"exit"``
    (ends its session and exits 0 when its lifeline closes) or ``"ignore"``.
    """

    def __init__(self, job_id: str, pid: int, *, on_term: str = "exit", on_lifeline: str = "exit") -> None:
        self.job_id = job_id
        self.pid = pid
        self.pid_start: float | None = 1000.0 + pid
        self.node: NodeRef | None = None
        self.on_term = on_term
        self.on_lifeline = on_lifeline
        self._exited: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._stdout: asyncio.Queue[bytes] = asyncio.Queue()
        self.signals: list[str] = []
        self.closed = False
        self.stdin = b""

    # what the test does
    def say(self, line: bytes) -> None:
        self._stdout.put_nowait(line)

    def exit(self, status: str) -> None:
        if not self._exited.done():
            self._exited.set_result(status)
            self._stdout.put_nowait(b"")

    # ChildHandle
    @property
    def exited(self) -> asyncio.Future[str]:
        return self._exited

    @property
    def alive(self) -> bool:
        return not self._exited.done()

    @property
    def ref(self) -> ChildRef:
        return ChildRef(self.job_id, self.pid, self.pid_start, self.node)

    async def readline(self) -> bytes:
        line = await self._stdout.get()
        if line == b"":
            self._stdout.put_nowait(b"")  # EOF stays EOF
        if len(line) > 64 * 1024:
            raise ValueError("Separator is not found, and chunk exceed the limit")
        return line

    async def stop(self, grace: float) -> bool:
        if not self.alive:
            return False
        self.signals.append("SIGTERM")
        if self.on_term == "exit":
            self.exit("killed by SIGTERM")
            return False
        try:
            await asyncio.wait_for(asyncio.shield(self._exited), grace)
            return False
        except TimeoutError:
            self.kill()
            return True

    def kill(self) -> None:
        if self.alive:
            self.signals.append("SIGKILL")
            self.exit("killed by SIGKILL")

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeDir:
    """One job directory, in memory."""

    task: dict[str, str | None] | None = None
    completion: CompletionRecord | None = None
    stderr: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    session_end: str | None = None
    trace: dict[str, list[tuple[str, dict[str, object]]]] = field(default_factory=dict)


class FakeBackend:
    """Children and directories in memory; ``next_child`` shapes the next started child, which
    prints ``next_lines`` at once (and exits with ``next_exit`` after them, when set);
    ``start_error``, when set, is what starting a child raises instead."""

    def __init__(self) -> None:
        self.dirs: dict[str, FakeDir] = {}
        self.children: dict[str, FakeChild] = {}
        self.lifelines: set[str] = set()
        self.finished_off: list[tuple[str, int | None]] = []
        self.workdir_checks: list[tuple[str, str, int | None]] = []
        self.next_child: dict[str, str] = {}
        self.next_lines: list[bytes] = []
        self.next_exit: str | None = None
        self.start_error: Exception | None = None
        self.started = asyncio.Event()
        self.gate = asyncio.Semaphore(4)
        self._pid = 1000
        self.opened = False

    async def open(self) -> None:
        self.opened = True

    async def close(self) -> None:
        self.lifelines.clear()

    @property
    def containment(self) -> str | None:
        return None

    async def place(self, job_id: str, capsule: str, resources: ResourceCaps, uid: int | None) -> NodeRef | None:
        return None

    def start_gate(self, node: NodeRef | None) -> asyncio.Semaphore:
        return self.gate

    async def prepare_dir(self, dir: ChildDir, task: dict[str, str | None] | None, *, fresh: bool) -> ChildDir:
        self.dirs[dir.job_id] = FakeDir(task=task)
        return dir

    async def read_completion(self, dir: ChildDir) -> CompletionRecord | None:
        return self.dirs[dir.job_id].completion

    async def write_completion(self, dir: ChildDir, rec: CompletionRecord) -> None:
        self.dirs[dir.job_id].completion = rec

    async def stderr_tail(self, dir: ChildDir) -> list[str]:
        return list(self.dirs[dir.job_id].stderr)

    async def own_session_end(self, dir: ChildDir, session_id: str) -> str | None:
        return self.dirs[dir.job_id].session_end

    async def append_log(self, dir: ChildDir, lines: Sequence[str]) -> None:
        self.dirs[dir.job_id].log.extend(lines)

    async def append_trace(
        self, dir: ChildDir, session_id: str, lines: Sequence[tuple[str, dict[str, object]]]
    ) -> list[str]:
        kept = self.dirs[dir.job_id].trace.setdefault(session_id, [])
        kept.extend(lines)
        return [f"evt_{len(kept) - len(lines) + i}" for i in range(len(lines))]

    async def read_file(self, dir: ChildDir, name: str, offset: int, max_bytes: int) -> tuple[int, bytes]:
        data = "".join(f"stdout: {ln}\n" for ln in self.dirs[dir.job_id].log).encode() if name == LOG_FILE else b""
        start = max(0, len(data) - max_bytes) if offset < 0 else offset if offset <= len(data) else 0
        return start, data[start : start + max_bytes]

    async def list_files(self, dir: ChildDir, sub: str) -> list[str]:
        return []

    async def check_workdir(self, dir: ChildDir, workdir: str, uid: int | None) -> str:
        self.workdir_checks.append((dir.job_id, workdir, uid))
        return workdir

    def check_run_as(self, uid: int | None) -> None:
        return None

    async def start(self, spec: StartSpec) -> FakeChild:
        if self.start_error is not None:
            raise self.start_error
        self._pid += 1
        child = FakeChild(spec.dir.job_id, self._pid, **self.next_child)
        child.stdin = spec.stdin
        for line in self.next_lines:
            child.say(line)
        if self.next_exit is not None:
            child.exit(self.next_exit)
        self.children[spec.dir.job_id] = child
        self.lifelines.add(spec.dir.job_id)
        self.started.set()
        return child

    def lifeline_close(self, job_id: str) -> None:
        self.lifelines.discard(job_id)
        child = self.children.get(job_id)
        if child is not None and child.alive and child.on_lifeline == "exit":
            child.exit("exit status 0")

    async def held_lifelines(self) -> set[str]:
        return set(self.lifelines)

    async def finish_off(self, job_id: str, pid: int | None) -> None:
        self.finished_off.append((job_id, pid))

    async def is_running(self, ref: ChildRef) -> bool:
        child = self.children.get(ref.job_id)
        return child is not None and child.alive and child.pid == ref.pid

    def adopt(self, ref: ChildRef) -> FakeChild:
        child = self.children[ref.job_id]
        child.say(b"")  # an adopted child's stdout is not ours
        return child

    async def list_running(self, instance: str) -> list[RunningChild]:
        return [RunningChild(c.pid, j, c.pid) for j, c in self.children.items() if c.alive]

    async def end_orphan(self, found: RunningChild) -> None:
        self.children[found.job_id].kill()
