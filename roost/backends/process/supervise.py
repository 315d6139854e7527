"""Watching a child's exit and stopping its process group.

A child is watched through a pidfd registered with the event loop: no thread per child (asyncio's
default child watcher in 3.11 starts one), no polling, and it works the same for a child this
daemon spawned (the fd turns readable, ``Popen.poll`` reaps it and gives the status) and for a
re-adopted child that another daemon instance spawned (readable on exit; the status is not ours
to read, so it is reported as unknown).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess

__all__ = ["ProcessWatch", "describe_status", "signal_group", "stop_group"]


def describe_status(rc: int | None) -> str:
    if rc is None:
        return "exit status unknown: the process was not started by this daemon instance"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"killed by {name}"
    return f"exit status {rc}"


class ProcessWatch:
    """Resolves :attr:`exited` with a status sentence when the process ends."""

    def __init__(self, pid: int, popen: subprocess.Popen[bytes] | None = None) -> None:
        self.pid = pid
        self.popen = popen
        self.returncode: int | None = None
        self.exited: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._pidfd: int | None = None

    def start(self) -> None:
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except ProcessLookupError:
            self._fire()
            return
        asyncio.get_running_loop().add_reader(self._pidfd, self._fire)

    def _fire(self) -> None:
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        if self.popen is not None:
            self.returncode = self.popen.poll()
            if self.returncode is None:  # readable before the zombie is visible: rare, wait it out
                self.returncode = self.popen.wait()
        if not self.exited.done():
            self.exited.set_result(describe_status(self.returncode if self.popen is not None else None))

    def close(self) -> None:
        if self._pidfd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    @property
    def alive(self) -> bool:
        return not self.exited.done()


def signal_group(pgid: int, sig: int) -> bool:
    """Signal a whole process group; False when it no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


async def stop_group(watch: ProcessWatch, grace: float) -> bool:
    """SIGTERM to the group, SIGKILL ``grace`` seconds later if the leader is still there.

    Returns True when SIGKILL was needed.
    """
    if not watch.alive:
        return False
    signal_group(watch.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.shield(watch.exited), grace)
        return False
    except TimeoutError:
        signal_group(watch.pid, signal.SIGKILL)
        await asyncio.shield(watch.exited)
        return True
