"""Record files a node keeper reads and writes in its children's directories, without links;
and :class:`ChildRecordsKeeper`, the keeper's methods for them.

Why its own module: nodes share no filesystem, so every record of a Ray child (its log, its
completion record, its trace lines) lives under the keeper's own root and is reached only
through the keeper (roost/backends/ray/node/keeper.py runs these on a worker thread). Like the
local launcher's records (roost/services/launcher/childrecords.py), nothing here follows a link: every path
is walked from a checked base with ``O_NOFOLLOW``.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

from roost.core.ids import JOB_ID_RE
from roost.observe.tracelines import append_lines
from roost.services.completionfile import CompletionRecord, read_completion, write_completion
from roost.services.launcher import childrecords
from roost.services.launcher.childrecords import list_names, read_at
from roost.system.fsutil import Place
from roost.system.workdirs import workdir_verdict

__all__ = ["ChildRecordsKeeper", "check_job_id", "read_from"]


def check_job_id(job_id: str) -> str:
    """``job_id`` when it is a job id (so it names one directory below the keeper's root)."""
    if not JOB_ID_RE.match(job_id):
        raise ValueError("not a job id")
    return job_id


def read_from(place: Place, name: str, offset: int, max_bytes: int) -> bytes:
    """Up to ``max_bytes`` of the regular file ``name`` (a relative path) from ``offset`` on;
    empty when it is missing, unreadable or not a regular file."""
    parts = tuple(p for p in name.split("/") if p)
    try:
        dfd = place.open_dir(parts[:-1])
    except OSError:
        return b""
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return b""
    finally:
        os.close(dfd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.pread(fd, max_bytes, max(0, offset))
    finally:
        os.close(fd)


class ChildRecordsKeeper:
    """The record methods of a node keeper (a mixin: ``jobs_root`` is the keeper's): every file
    of a child's directory the daemon reads or writes, run on a worker thread."""

    jobs_root: Path

    def place(self, job_id: str, uid: int | None) -> Place:
        return Place(str(self.jobs_root), (check_job_id(job_id),), uid)

    def workdir(self, job_id: str) -> str:
        return str(self.jobs_root / check_job_id(job_id))

    async def prepare(self, job_id: str, uid: int | None, task: dict[str, str | None] | None) -> str:
        """Make the child's directory with ``meta/job_id.txt`` and ``input.json``; its path."""
        place = self.place(job_id, uid)
        fd = await asyncio.to_thread(childrecords.prepare_child_dir, place, job_id, task, fresh=True)
        os.close(fd)
        return str(place.path)

    async def read_completion(self, job_id: str, uid: int | None) -> dict[str, Any] | None:
        rec = await asyncio.to_thread(read_completion, self.place(job_id, uid))
        return rec.to_dict() if rec is not None else None

    async def write_completion(self, job_id: str, uid: int | None, record: dict[str, Any]) -> None:
        rec = CompletionRecord.from_dict(record)
        await asyncio.to_thread(write_completion, self.place(job_id, uid), rec)

    async def stderr_tail(self, job_id: str, uid: int | None) -> list[str]:
        return await asyncio.to_thread(childrecords.stderr_tail, self.place(job_id, uid))

    async def own_session_end(self, job_id: str, uid: int | None, session_id: str) -> str | None:
        return await asyncio.to_thread(childrecords.own_session_end, self.place(job_id, uid), session_id)

    async def append_log(self, job_id: str, uid: int | None, lines: list[str]) -> None:
        await asyncio.to_thread(childrecords.append_log, self.place(job_id, uid), lines)

    async def read_log(self, job_id: str, uid: int | None, offset: int, max_bytes: int = 256 * 1024) -> bytes:
        """The child's log from ``offset`` on (for ``roostctl logs -f``)."""
        return await asyncio.to_thread(read_from, self.place(job_id, uid), childrecords.LOG_FILE, offset, max_bytes)

    async def read_file(
        self, job_id: str, uid: int | None, name: str, offset: int, max_bytes: int
    ) -> tuple[int, bytes]:
        """``(start, data)`` of one of the child's record files (``roostctl logs -f``, ``job``)."""
        return await asyncio.to_thread(read_at, self.place(job_id, uid), name, offset, max_bytes)

    async def list_files(self, job_id: str, uid: int | None, sub: str) -> list[str]:
        """The regular files in one directory of the child's (its ``out/``, its records dir)."""
        return await asyncio.to_thread(list_names, self.place(job_id, uid), sub)

    async def append_trace(
        self, job_id: str, uid: int | None, session_id: str, lines: list[tuple[str, dict[str, Any]]]
    ) -> list[str]:
        """Append the daemon's lines (already redacted) to the trace of a session whose workdir
        is this child's directory, in order, in one batch; their event ids."""
        workdir = str(self.place(job_id, uid).path)
        return await asyncio.to_thread(append_lines, workdir, session_id, [(e, p) for e, p in lines], uid=uid)

    async def check_workdir(self, job_id: str, workdir: str, uid: int | None) -> tuple[str, str]:
        """The ``/register`` ownership check of a workdir a session of this job names, on this
        node's disk (the same pure check the daemon runs on its own): a
        :func:`roost.system.workdirs.workdir_verdict`."""
        check_job_id(job_id)
        return await asyncio.to_thread(workdir_verdict, workdir, uid)
