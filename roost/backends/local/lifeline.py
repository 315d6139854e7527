"""Daemon side of the lifelines: the pipe, and finding (or starting) the holder that holds them.

The pipe is made close-on-exec at both ends; only the read end is made inheritable, and only in
the child (``pass_fds``). The write end goes to the lifeline holder, a process of its own
(roost/backends/local/holder.py is that process, and says why it exists), and the daemon closes
its own copy at once, so exactly one process holds each write end and no child ever inherits
one. :class:`HolderClient` is the daemon's end of the holder's socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import structlog

from roost.backends.local.holder import MAX_MSG, holder_address
from roost.system.blocking import BlockingExecutor

__all__ = ["HolderClient", "HolderError", "connect_holder", "make_pipe", "stop_holder"]

log = structlog.get_logger("roost.launcher")


def make_pipe() -> tuple[int, int]:
    """``(read, write)``, both close-on-exec and both ≥ 3 (a daemon always holds 0–2)."""
    return os.pipe2(os.O_CLOEXEC)


def _open_log(state_dir: Path) -> int:
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    return os.open(state_dir / "keeper.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)


def _spawn_holder(address: str, log_fd: int) -> subprocess.Popen[bytes]:
    """Start the holder from the event loop's thread, in a session of its own, so it outlives
    this process and no terminal signal reaches it."""
    return subprocess.Popen(
        [sys.executable, "-m", "roost.backends.local.holder", address.replace("\0", "@", 1)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log_fd,
        start_new_session=True,
        close_fds=True,
    )


async def connect_holder(state_dir: Path, executor: BlockingExecutor) -> HolderClient:
    """Reconnect to a holder that survived a previous daemon, or start a new one."""
    address = holder_address(state_dir)
    client = HolderClient(address)
    if client.try_connect():
        log.info("keeper_reconnected", address=address.replace("\0", "@"))
        return client
    log_fd = await executor.run(_open_log, state_dir)
    try:
        proc = _spawn_holder(address, log_fd)
    finally:
        os.close(log_fd)
    assert proc.stdout is not None
    line = await asyncio.wait_for(executor.run(proc.stdout.readline), 30)
    proc.stdout.close()
    if line.strip() != b"ready" or not client.try_connect():
        proc.kill()
        await executor.run(proc.wait)
        raise HolderError(f"the lifeline keeper did not start (see {state_dir / 'keeper.log'})")
    client.process = proc
    log.info("keeper_started", pid=proc.pid)
    return client


async def stop_holder(client: HolderClient, executor: BlockingExecutor) -> None:
    """Tell the holder to close everything and exit; reap it when this daemon started it."""
    client.exit()
    proc = client.process
    if isinstance(proc, subprocess.Popen):
        try:
            await executor.run(proc.wait, 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            await executor.run(proc.wait)


class HolderError(RuntimeError):
    """The holder could not be reached or started."""


class HolderClient:
    """The daemon's end of the holder's socket. Every method runs on the event loop."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._sock: socket.socket | None = None
        self._next_id = 0
        self._replies: dict[int, asyncio.Future[dict[str, object]]] = {}
        self.process: subprocess.Popen[bytes] | None = None
        """The holder process, when this daemon started it (None: it reconnected to one)."""

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def try_connect(self) -> bool:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.setblocking(False)
        try:
            sock.connect(self.address)
        except OSError:
            sock.close()
            return False
        self._sock = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._on_readable)
        return True

    def _on_readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        try:
            data = sock.recv(MAX_MSG)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._lost()
            return
        try:
            msg = json.loads(data)
        except ValueError:
            return
        fut = self._replies.pop(int(msg.get("id", -1)), None)
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def _lost(self) -> None:
        sock = self._sock
        self._sock = None
        if sock is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(sock.fileno())
            sock.close()
        for fut in self._replies.values():
            if not fut.done():
                fut.set_exception(HolderError("the lifeline keeper closed its connection"))
        self._replies.clear()

    def _send(self, msg: dict[str, object], fds: list[int] | None = None) -> None:
        sock = self._sock
        if sock is None:
            raise HolderError("the lifeline keeper is not connected")
        data = json.dumps(msg, separators=(",", ":")).encode()
        deadline = time.monotonic() + 5.0
        while True:
            try:
                if fds:
                    socket.send_fds(sock, [data], fds)
                else:
                    sock.send(data)
                return
            except BlockingIOError:
                # The holder reads as fast as it can; a full buffer clears in microseconds.
                if time.monotonic() > deadline:
                    raise HolderError("the lifeline keeper is not reading") from None
                time.sleep(0.0005)
            except OSError as exc:
                self._lost()
                raise HolderError(f"the lifeline keeper is gone: {exc}") from None

    def hold(self, key: str, fd: int, pid: int, start: float | None) -> None:
        self._send({"op": "hold", "key": key, "pid": pid, "start": start}, [fd])

    def close(self, key: str) -> None:
        with contextlib.suppress(HolderError):
            self._send({"op": "close", "key": key})

    async def list(self) -> list[dict[str, object]]:
        self._next_id += 1
        rid = self._next_id
        fut: asyncio.Future[dict[str, object]] = asyncio.get_running_loop().create_future()
        self._replies[rid] = fut
        self._send({"op": "list", "id": rid})
        msg = await asyncio.wait_for(fut, 10.0)
        held = msg.get("held")
        return held if isinstance(held, list) else []

    def exit(self) -> None:
        with contextlib.suppress(HolderError):
            self._send({"op": "exit"})
        self._lost()
