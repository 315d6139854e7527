"""End a session when its process exits, for sessions roost did not launch itself.

A session may register with its ``pid``. roost believes that pid only when the process really
holds the TCP connection the registration arrived on (checked in the route with the socket
tables, so a caller cannot name somebody else's process), and then watches it with a pidfd:
when it exits, the session ends exactly as if it had deregistered, which closes the lifelines
of every child it delegated to. Children roost launched are watched by the launcher instead.

A session with neither (no verified pid, no job) holds a lease instead, renewed by its
authenticated calls; when it lapses the session ends with the reason recorded.

On start, running sessions with a recorded pid are re-watched; one whose process is gone (or
whose pid now names a different process, told apart by its start time) is ended at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import psutil
import structlog

from roost.launcher.supervise import ProcessWatch
from roost.sessions import SessionRecord

if TYPE_CHECKING:
    from roost.daemon import Roost

__all__ = ["SessionWatch", "pid_holds_connection"]

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


def _same_process(pid: int, start: float | None) -> bool:
    try:
        proc = psutil.Process(pid)
        if start is not None and abs(proc.create_time() - start) > 0.01:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, OSError):
        return False


def _unwatchable(rec: SessionRecord) -> bool:
    """No process roost can watch: no verified pid, and no job of the launcher behind it.
    Such a session holds a lease instead (``Referee.lease``)."""
    return rec.pid is None and rec.job_id is None


class SessionWatch:
    def __init__(self, roost: Roost) -> None:
        self.roost = roost
        self._watches: dict[str, ProcessWatch] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self.roost.referee.on_session_registered.append(self._on_registered)
        for rec in list(self.roost.table.iter_running()):
            if _unwatchable(rec):
                self.roost.referee.lease(rec)  # a fresh lease: nobody could renew it while we were away
            if rec.pid is None or self.roost.launcher.launched_pid(rec.pid):
                continue
            if await self.roost.executor.run(_same_process, rec.pid, rec.pid_start):
                self._watch(rec)
            else:
                log.info("session_process_gone", session_id=rec.session_id, pid=rec.pid)
                await self.roost.referee.end_session(rec, "failed")

    async def stop(self) -> None:
        for watch in self._watches.values():
            watch.close()
        self._watches.clear()
        for task in list(self._tasks):
            task.cancel()

    def _on_registered(self, rec: SessionRecord) -> None:
        if _unwatchable(rec):
            self.roost.referee.lease(rec)
        elif rec.pid is not None and not self.roost.launcher.launched_pid(rec.pid):
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
                await self.roost.referee.end_session(rec, "failed")
