"""Daemon side of the lifelines: the pipe, and finding (or starting) the keeper that holds them.

The pipe is made close-on-exec at both ends; only the read end is made inheritable, and only in
the child (``pass_fds``). The write end goes to the keeper (roost/backends/local/holder.py explains
why a separate process holds it) and the daemon closes its own copy at once, so exactly one
process holds each write end and no child ever inherits one.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import structlog

from roost.backends.local.holder import KeeperClient, KeeperError, keeper_address
from roost.system.blocking import BlockingExecutor

__all__ = ["connect_keeper", "make_pipe", "stop_keeper"]

log = structlog.get_logger("roost.launcher")


def make_pipe() -> tuple[int, int]:
    """``(read, write)``, both close-on-exec and both ≥ 3 (a daemon always holds 0–2)."""
    return os.pipe2(os.O_CLOEXEC)


def _open_log(state_dir: Path) -> int:
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    return os.open(state_dir / "keeper.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)


def _spawn_keeper(address: str, log_fd: int) -> subprocess.Popen[bytes]:
    """Start the keeper from the event loop's thread, in a session of its own, so it outlives
    this process and no terminal signal reaches it."""
    return subprocess.Popen(
        [sys.executable, "-m", "roost.backends.local.holder", address.replace("\0", "@", 1)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log_fd,
        start_new_session=True,
        close_fds=True,
    )


async def connect_keeper(state_dir: Path, executor: BlockingExecutor) -> KeeperClient:
    """Reconnect to a keeper that survived a previous daemon, or start a new one."""
    address = keeper_address(state_dir)
    client = KeeperClient(address)
    if client.try_connect():
        log.info("keeper_reconnected", address=address.replace("\0", "@"))
        return client
    log_fd = await executor.run(_open_log, state_dir)
    try:
        proc = _spawn_keeper(address, log_fd)
    finally:
        os.close(log_fd)
    assert proc.stdout is not None
    line = await asyncio.wait_for(executor.run(proc.stdout.readline), 30)
    proc.stdout.close()
    if line.strip() != b"ready" or not client.try_connect():
        proc.kill()
        await executor.run(proc.wait)
        raise KeeperError(f"the lifeline keeper did not start (see {state_dir / 'keeper.log'})")
    client.process = proc
    log.info("keeper_started", pid=proc.pid)
    return client


async def stop_keeper(client: KeeperClient, executor: BlockingExecutor) -> None:
    """Tell the keeper to close everything and exit; reap it when this daemon started it."""
    client.exit()
    proc = client.process
    if isinstance(proc, subprocess.Popen):
        try:
            await executor.run(proc.wait, 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            await executor.run(proc.wait)
