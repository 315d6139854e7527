"""One job's child, from its start to its exit: the per-job half of the launcher.

A :class:`JobRunner` starts the child through the process backend, waits for its ready line
(the first stdout line: ``{"session_id": ..., "capsule_url": ...}``), keeps reading its stdout
into its log afterwards (the pipe must never fill up), arms its deadline, and stops it — by
SIGTERM then SIGKILL after a grace (a cancel, the deadline, the daemon's stop), or by closing its
lifeline and forcing it out after the lifeline grace (its parent session ended). It talks only
to the :class:`roost.backends.base.ProcessBackend`; what a job *is*, and what its end means,
is the launcher's (:mod:`roost.services.launcher.service`, :mod:`roost.core.finalize`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import structlog

from roost.backends.base import ChildDir, ChildHandle, ChildRef, ProcessBackend, StartSpec
from roost.core import ids

__all__ = ["JobRunner", "NotReady", "Ready", "containment_refusal", "parse_ready"]

log = structlog.get_logger("roost.launcher")

SpawnTask = Callable[[Coroutine[Any, Any, Any]], "asyncio.Task[Any]"]


@dataclass(frozen=True, slots=True)
class Ready:
    """The child's ready line: its session, and its door when it has one."""

    session_id: str
    capsule_url: str | None


@dataclass(frozen=True, slots=True)
class NotReady:
    """Why a child never got ready (it has been killed and has exited).

    ``why`` is the short cause; ``reason`` adds the child's last stderr lines, or is the
    capsule host's containment refusal (``containment``) when that is why.
    """

    why: str
    reason: str
    status: str
    timed_out: bool
    containment: bool


def containment_refusal(stderr_tail: list[str]) -> str | None:
    """The capsule host's E-CAP-003 sentence, when that is why the child never became ready."""
    for line in reversed(stderr_tail):
        at = line.find("E-CAP-003: ")
        if at >= 0:
            return line[at:]
    return None


def parse_ready(line: bytes) -> Ready | None:
    """The ready line, or None when the line is not one (no valid session id)."""
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
    return Ready(sid, url)


class JobRunner:
    """Start, ready handshake, output drain, deadline and stop of one job's child."""

    def __init__(self, backend: ProcessBackend, dir: ChildDir, spawn_task: SpawnTask) -> None:
        self.backend = backend
        self.dir = dir
        self._spawn_task = spawn_task
        self._child: ChildHandle | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self._tasks: list[asyncio.Task[Any]] = []

    @property
    def child(self) -> ChildHandle:
        assert self._child is not None, "the runner has no child yet"
        return self._child

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    @property
    def alive(self) -> bool:
        return self._child is not None and self._child.alive

    # -- start ---------------------------------------------------------------------------------
    async def start(self, spec: StartSpec) -> ChildHandle:
        """Start the child (raises the backend's start errors)."""
        self._child = await self.backend.start(spec)
        return self._child

    def adopt(self, ref: ChildRef) -> ChildHandle:
        """Watch a child another daemon instance started."""
        self._child = self.backend.adopt(ref)
        return self._child

    async def handshake(self, bound: float) -> Ready | NotReady:
        """Wait for the ready line; a child that does not give one is killed (with its group)."""
        child = self.child
        line, why = await self._first_line(bound)
        ready = parse_ready(line) if line else None
        if ready is not None and why is None:
            return ready
        if why is None:
            why = "the child's first stdout line was not a ready line carrying a session_id"
        child.kill()
        status = await asyncio.shield(child.exited)
        tail = await self.backend.stderr_tail(self.dir)
        refused = containment_refusal(tail)
        reason = why if not tail else f"{why}; its last stderr lines were:\n" + "\n".join(tail[-5:])
        return NotReady(
            why=why,
            reason=refused if refused is not None else reason,
            status=status,
            timed_out="did not report ready" in why,
            containment=refused is not None,
        )

    async def _first_line(self, bound: float) -> tuple[bytes | None, str | None]:
        """The first stdout line, or why there is none (exit, EOF, timeout)."""
        child = self.child
        read = asyncio.get_running_loop().create_task(child.readline())
        waitables: set[asyncio.Future[Any]] = {read, child.exited}
        done, _ = await asyncio.wait(waitables, timeout=bound, return_when=asyncio.FIRST_COMPLETED)
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
        return None, f"the child did not report ready within {bound:g}s (launch bound), so it was killed"

    # -- running -------------------------------------------------------------------------------
    def run(self, deadline_in: float, on_deadline: Callable[[], None], *, drain: bool = True) -> None:
        """Arm the deadline (``on_deadline`` runs when it passes) and, for a child this instance
        started, keep its stdout flowing into its log."""
        loop = asyncio.get_running_loop()
        self._timers.append(loop.call_later(max(0.0, deadline_in), on_deadline))
        if drain:
            self._tasks.append(self._spawn_task(self._drain()))

    async def _drain(self) -> None:
        """Later stdout lines go to the child's log."""
        child = self.child
        while True:
            try:
                line = await child.readline()
            except (ValueError, asyncio.LimitOverrunError):
                continue
            if not line:
                return
            batch = [line.decode("utf-8", "replace").rstrip("\n")]
            with contextlib.suppress(OSError):
                await self.backend.append_log(self.dir, batch)

    async def exited(self) -> str:
        """The child's exit status sentence, once it has exited."""
        return await asyncio.shield(self.child.exited)

    # -- stop ----------------------------------------------------------------------------------
    async def stop(self, grace: float) -> bool:
        """SIGTERM to the group, SIGKILL after ``grace``; True when SIGKILL was needed."""
        if self._child is None:
            return False
        return await self._child.stop(grace)

    def parent_ended(self, grace: float) -> None:
        """Close the lifeline (the child should end its session); force it out after ``grace``."""
        self.backend.lifeline_close(self.dir.job_id)
        child = self._child
        if child is None:
            return

        def force() -> None:
            if child.alive:
                log.warning("lifeline_grace_expired", job_id=self.dir.job_id, pid=child.pid)
                child.kill()

        self._timers.append(asyncio.get_running_loop().call_later(grace, force))

    def close(self) -> None:
        """Cancel the timers and release the child's handle (it is not signalled)."""
        for timer in self._timers:
            timer.cancel()
        if self._child is not None:
            self._child.close()

    async def settle(self, wait_secs: float = 1.0) -> None:
        """Let the output drain finish what the child wrote before it exited."""
        for task in self._tasks:
            if not task.done():
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(task), wait_secs)
