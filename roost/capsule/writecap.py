"""``capabilities.resources.max_workdir_bytes``: a cap on what a job keeps in its workdir, eventually.

Why measured and not a limit: ``RLIMIT_FSIZE`` (``max_file_size_bytes``) bounds one file, so six
15 MiB files pass a 16 MiB limit; a filesystem quota needs the operator's set-up. So while a task
runs, the capsule host measures the bytes under the workdir (its own records in ``.murmur``
excluded) every :data:`CHECK_EVERY_SECS` and, once they exceed the cap, stops the entrypoint's
whole tree; the task fails with a sentence that says so. Eventual by design: a task can write
for up to one period past the cap before it is stopped (docs/security.md, D4).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

__all__ = ["CHECK_EVERY_SECS", "WriteWatch", "bytes_under", "over_sentence"]

CHECK_EVERY_SECS = 1.0
RECORDS = ".murmur"


def bytes_under(root: Path) -> int:
    """Blocking: the apparent size of every regular file under ``root`` (links not followed),
    the host's own ``.murmur`` records left out."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if dirpath == str(root):
            dirnames[:] = [d for d in dirnames if d != RECORDS]
        for name in filenames:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(dirpath, name))
                if not os.path.islink(os.path.join(dirpath, name)):
                    total += st.st_size
    return total


def over_sentence(held: int, cap: int) -> str:
    return (
        f"task failed: the job holds {held} bytes in its workdir, over capabilities.resources.max_workdir_bytes "
        f"({cap}), so its entrypoint was stopped"
    )


class WriteWatch:
    """Measures ``root`` while a task runs; calls ``stop`` once when it holds more than ``cap``."""

    def __init__(self, root: Path, cap: int, stop: Callable[[], Awaitable[None]]) -> None:
        self.root = root
        self.cap = cap
        self._stop = stop
        self.over: int | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self.over is None:
            await asyncio.sleep(CHECK_EVERY_SECS)
            held = await asyncio.to_thread(bytes_under, self.root)
            if held > self.cap:
                self.over = held
                await self._stop()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
