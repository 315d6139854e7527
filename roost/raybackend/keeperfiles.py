"""Record files a node keeper reads and writes in its children's directories, without links.

Why its own module: nodes share no filesystem, so every record of a Ray child (its log, its
completion record, its trace lines) lives under the keeper's own root and is reached only
through the keeper (roost/raybackend/nodekeeper.py runs these on a worker thread). Like the
local launcher's records (roost/launcher/records.py), nothing here follows a link: every path
is walked from a checked base with ``O_NOFOLLOW``.
"""

from __future__ import annotations

import os
import stat

from roost.fsutil import Place
from roost.ids import JOB_ID_RE

__all__ = ["check_job_id", "read_from"]


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
