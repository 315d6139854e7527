"""The child side of the spawner lifeline.

Why: a delegated child must end when the process that launched it ends, however it ends. The
launcher hands the child the read end of a pipe it never writes to; EOF on it means "your
spawner is gone". The descriptor is validated strictly before any session exists (a wrong fd
would make the child either deaf or reading someone else's stream), marked close-on-exec so
the entrypoint never inherits it, and then watched with the event loop's reader callback
(no thread, no polling).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Callable

__all__ = ["ENV", "LifelineError", "LifelineWatch", "lifeline_refusal", "take_lifeline"]

ENV = "MURMUR_SPAWNER_LIFELINE"


class LifelineError(ValueError):
    """The variable does not name a usable lifeline; the message is the reason."""


def lifeline_refusal(reason: str) -> str:
    """The E-RUN-020 sentence for a lifeline refusal."""
    return (
        f"MURMUR_SPAWNER_LIFELINE does not carry this session's spawner lifeline: {reason}; a delegated "
        "child that cannot hear its spawner would keep running after the session that delegated to it "
        "has ended, so the launch is refused"
    )


def _kind(mode: int) -> str | None:
    if stat.S_ISFIFO(mode):
        return None
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a pipe"


def take_lifeline(raw: str | None) -> int | None:
    """Validate the variable's value and own the descriptor (CLOEXEC set); None when blank/absent."""
    if raw is None or not raw.strip():
        return None
    value = raw.strip()
    if not value.isascii() or not value.isdigit():
        raise LifelineError("it is not a decimal descriptor number")
    fd = int(value)
    if fd < 3:
        raise LifelineError(f"descriptor {fd} is a standard stream, and a lifeline is 3 or above")
    try:
        st = os.fstat(fd)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    except OSError as exc:
        if exc.errno == errno.EBADF:
            raise LifelineError(f"descriptor {fd} is not open") from None
        raise LifelineError(f"descriptor {fd} cannot be inspected ({exc.strerror})") from None
    kind = _kind(st.st_mode)
    if kind is not None:
        raise LifelineError(f"descriptor {fd} is {kind}, and a lifeline is a pipe's read end")
    if flags & os.O_ACCMODE != os.O_RDONLY:
        raise LifelineError(f"descriptor {fd} is open for writing, and a child holds only a read end")
    os.set_inheritable(fd, False)
    return fd


class LifelineWatch:
    """Calls ``on_eof`` once when the pipe reaches EOF (or cannot be read: treated as EOF)."""

    def __init__(self, fd: int, on_eof: Callable[[], None]) -> None:
        self.fd = fd
        self._on_eof = on_eof
        self._loop: asyncio.AbstractEventLoop | None = None
        self.fired = False

    def start(self) -> None:
        os.set_blocking(self.fd, False)
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.fd, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self.fd, 64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""  # unreadable: treat the spawner as gone
        if chunk:
            return  # bytes are discarded; only EOF means anything
        self.stop()
        if not self.fired:
            self.fired = True
            self._on_eof()

    def stop(self) -> None:
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self.fd)
            self._loop = None
