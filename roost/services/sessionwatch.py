"""End a session when its process exits, for sessions roost did not launch itself.

A session may register with its ``pid``. roost believes that pid only when the process really
holds the TCP connection the registration arrived on (checked in the route with the socket
tables, so a caller cannot name somebody else's process), and then watches it with a pidfd:
when it exits, the session ends exactly as if it had deregistered, which closes the lifelines
of every child it delegated to. Children roost launched are watched by the launcher instead.

A session with neither (no verified pid, no job) holds a lease instead, renewed by its
authenticated calls; when it lapses the session ends with the reason recorded.

On start, running sessions with a recorded pid are re-watched; one whose process is gone (or
whose pid now names a different process, told apart by its start in clock ticks since boot,
:mod:`roost.system.procstart`) is ended at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import psutil
import structlog

from roost.backends.process.supervise import ProcessWatch
from roost.observe.events import EventBus
from roost.state.sessions import SessionRecord, SessionTable
from roost.system.blocking import BlockingExecutor
from roost.system.procstart import same_process

__all__ = [
    "SessionEnds",
    "SessionWatch",
    "observe_session_end",
    "pid_holds_connection",
]

log = structlog.get_logger("roost.sessions")


def pid_holds_connection(pid: int, peer: tuple[str, int], local: tuple[str, int]) -> bool:
    """Blocking: does process ``pid`` own the TCP socket ``peer`` → ``local``?"""
    try:
        conns = psutil.Process(pid).net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return False
    for c in conns:
        laddr, raddr = c.laddr, c.raddr
        if (
            isinstance(laddr, tuple)
            and isinstance(raddr, tuple)
            and laddr
            and raddr
            and (laddr[0], laddr[1]) == peer
            and raddr[1] == local[1]
        ):
            return True
    return False


def _unwatchable(rec: SessionRecord) -> bool:
    """No process roost can watch: no verified pid, and no job of the launcher behind it.
    Such a session holds a lease instead (``Referee.lease``)."""
    return rec.pid is None and rec.job_id is None


class SessionEnds(Protocol):
    """The session watch's view of the referee: leases, ends, and news of registrations."""

    @property
    def on_session_registered(self) -> list[Callable[[SessionRecord], None]]: ...

    def lease(self, rec: SessionRecord, now_ms: int | None = None) -> None: ...

    async def end_session(self, rec: SessionRecord, status: str, reason: str | None = None) -> bool: ...


def observe_session_end(events: EventBus) -> Callable[[SessionRecord], Awaitable[None]]:
    """The referee's session-end hook for ``roost.session.end``: every session end, with why (its
    own deregistration, a lapsed lease, the operator, its process gone)."""

    async def observe(rec: SessionRecord) -> None:
        attrs: dict[str, Any] = {
            "roost.session.id": rec.session_id,
            "roost.session.capsule": rec.coordinates,
            "roost.session.status": rec.status,
            "roost.session.reason": rec.end_reason or "deregistered",
        }
        span = events.start("roost.session.end", subsystem="session", **attrs)
        span.completed()

    return observe


class SessionWatch:
    """Ends a session whose process is gone; gives a session without a watchable process a lease.

    ``launched`` says whether a pid is a child the launcher supervises itself."""

    def __init__(
        self,
        *,
        sessions: SessionEnds,
        table: SessionTable,
        executor: BlockingExecutor,
        launched: Callable[[int], bool],
    ) -> None:
        self._sessions = sessions
        self._table = table
        self._executor = executor
        self._launched = launched
        self._watches: dict[str, ProcessWatch] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._sessions.on_session_registered.append(self._on_registered)
        for rec in list(self._table.iter_running()):
            if _unwatchable(rec):
                self._sessions.lease(rec)  # a fresh lease: nobody could renew it while we were away
            if rec.pid is None or self._launched(rec.pid):
                continue
            if await self._executor.run(same_process, rec.pid, rec.pid_start):
                self._watch(rec)
            else:
                log.info("session_process_gone", session_id=rec.session_id, pid=rec.pid)
                await self._sessions.end_session(rec, "failed")

    async def stop(self) -> None:
        for watch in self._watches.values():
            watch.close()
        self._watches.clear()
        for task in list(self._tasks):
            task.cancel()

    def _on_registered(self, rec: SessionRecord) -> None:
        if _unwatchable(rec):
            self._sessions.lease(rec)
        elif rec.pid is not None and not self._launched(rec.pid):
            self._watch(rec)

    def _watch(self, rec: SessionRecord) -> None:
        assert rec.pid is not None
        watch = ProcessWatch(rec.pid)
        watch.start()
        self._watches[rec.session_id] = watch
        task = asyncio.get_running_loop().create_task(self._await_exit(rec, watch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _await_exit(self, rec: SessionRecord, watch: ProcessWatch) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await watch.exited
            self._watches.pop(rec.session_id, None)
            if rec.running:
                log.info("session_process_exited", session_id=rec.session_id, pid=rec.pid)
                await self._sessions.end_session(rec, "failed")
