"""A child's record files: what the launcher places in its directory before it starts, and
how they are read back by name, from an offset, without following a link.

* ``meta/job_id.txt`` and ``input.json`` (the child's task file): written atomically (temp file + rename) so
  the child never reads half a file. They are not fsynced: a machine crash loses the job itself
  with them, and an fsync pair would double the daemon's cost per launch.
* ``.murmur/launcher.log``: the child's stderr goes straight to this file (no daemon work per
  line, no pipe that can fill up); stdout after the ready line is appended as ``stdout: `` lines.
  The crash detail reads the last stderr lines back from it.

Reading by name: ``roostctl logs -f`` and ``roostctl job`` show a child's log and output files
wherever the child runs. A backend whose children live on other nodes answers these reads there
(its node keeper runs these functions on its own disk); the local backend runs them here. A name
is a relative path (``.murmur/launcher.log``, ``out/result.txt``) walked from the child's
directory with no link followed and no ``..`` allowed, so a child cannot point a reader elsewhere.

Everything here blocks: call it through an executor (the daemon's) or a worker thread (a keeper's).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from roost.core.completion import STDERR_LINES
from roost.observe.tracelines import TRACE_FILE
from roost.system.fsutil import Place, open_append_at, open_beneath, write_atomic_at

__all__ = [
    "INPUT_FILE",
    "JOB_ID_FILE",
    "LOG_FILE",
    "READ_MAX",
    "STDOUT_PREFIX",
    "TASK_FIELDS",
    "append_log",
    "input_envelope",
    "list_names",
    "open_log",
    "own_session_end",
    "place_of",
    "prepare_child_dir",
    "read_at",
    "record_parts",
    "stderr_tail",
]

JOB_ID_FILE = "meta/job_id.txt"
INPUT_FILE = "input.json"
LOG_FILE = ".murmur/launcher.log"
ROTATED_LOG = "launcher.log.1"
"""What :func:`rotate_log` keeps of the log, beside it in ``.murmur``."""
STDOUT_PREFIX = "stdout: "
TASK_FIELDS = ("objective", "instructions", "context", "output_format")


def input_envelope(job_id: str, payload: dict[str, str | None]) -> dict[str, object]:
    """The ``murmur.message.v1`` envelope of type ``murmur.code_task.request.v1``."""
    return {
        "schema": "murmur.message.v1",
        "type": "murmur.code_task.request.v1",
        "job_id": job_id,
        "payload": {key: payload.get(key) for key in TASK_FIELDS},
    }


def place_of(workdir: str, parent_workdir: str | None, uid: int | None) -> Place:
    """Where a job's directory is, as a checked base and the components below it.

    A delegated child's directory lies under its parent's registered workdir: the walk starts
    there, so a link planted anywhere below (``.murmur``, ``children``, the child directory
    itself) is refused rather than followed. A top-level job's directory is its own base.
    """
    if parent_workdir is not None:
        rel = os.path.relpath(workdir, parent_workdir)
        if not rel.startswith("..") and rel != ".":
            return Place(parent_workdir, tuple(rel.split(os.sep)), uid)
    return Place(workdir, (), uid)


def prepare_child_dir(
    place: Place,
    job_id: str,
    payload: dict[str, str | None] | None,
    *,
    fresh: bool,
) -> int:
    """Create the directory (0700; ``fresh`` = must not exist), write the inputs, open the log.

    Nothing is created or written through a link (docs/security.md); what is created belongs to
    the job's uid. Returns the log file's descriptor (the caller hands it to the child as
    stderr, then closes it).
    """
    owner = place.owner()
    if place.rel:
        parent = open_beneath(place.base, place.rel[:-1], create=True, owner=owner)
        try:
            if fresh:
                os.mkdir(place.rel[-1], 0o700, dir_fd=parent)
                made = True
            else:
                try:
                    os.mkdir(place.rel[-1], 0o700, dir_fd=parent)
                    made = True
                except FileExistsError:
                    made = False
            child = open_beneath(place.base, place.rel)
        finally:
            os.close(parent)
        if made and owner is not None:
            os.fchown(child, owner[0], owner[1])
    else:
        if fresh:
            Path(place.base).mkdir(parents=True, mode=0o700)
        child = open_beneath(place.base, ())
        if fresh and owner is not None:
            os.fchown(child, owner[0], owner[1])
    try:
        meta = open_beneath(place.base, (*place.rel, "meta"), create=True, owner=owner)
        try:
            write_atomic_at(meta, "job_id.txt", (job_id + "\n").encode(), durable=False, owner=owner)
        finally:
            os.close(meta)
        if payload is not None:
            data = json.dumps(input_envelope(job_id, payload), indent=2, ensure_ascii=False) + "\n"
            write_atomic_at(child, INPUT_FILE, data.encode("utf-8"), durable=False, owner=owner)
        logs = open_beneath(place.base, (*place.rel, ".murmur"), create=True, owner=owner)
        try:
            return open_append_at(logs, "launcher.log", owner=owner)
        finally:
            os.close(logs)
    finally:
        os.close(child)


def open_log(place: Place) -> int:
    """Open the child's ``.murmur/launcher.log`` for appending (its stderr goes there)."""
    logs = place.open_dir((".murmur",), create=True)
    try:
        return open_append_at(logs, "launcher.log", owner=place.owner())
    finally:
        os.close(logs)


def append_log(place: Place, lines: list[str]) -> None:
    """Append the child's later stdout lines to its log, marked so they are not read as stderr."""
    data = "".join(f"{STDOUT_PREFIX}{ln}\n" for ln in lines).encode("utf-8", "replace")
    fd = open_log(place)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def rotate_log(place: Place, max_bytes: int) -> bool:
    """Past ``max_bytes``, keep the log's last ``max_bytes`` in ``launcher.log.1`` and empty
    ``launcher.log`` in place (copy, then truncate: the child's stderr descriptor is ``O_APPEND``,
    so it goes on writing at the new end). Lines written between the copy and the truncation are
    lost; a log is bounded by about twice ``max_bytes`` plus what it gains between two checks."""
    logs = place.open_dir((".murmur",))
    try:
        try:
            fd = os.open("launcher.log", os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=logs)
        except FileNotFoundError:
            return False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size <= max_bytes:
                return False
            keep = os.pread(fd, max_bytes, st.st_size - max_bytes)
            cut = keep.find(b"\n")
            if 0 <= cut < len(keep) - 1:
                keep = keep[cut + 1 :]  # start at a line
            write_atomic_at(logs, ROTATED_LOG, keep, durable=False, owner=place.owner())
            os.ftruncate(fd, 0)
            return True
        finally:
            os.close(fd)
    finally:
        os.close(logs)


def stderr_tail(place: Place, n: int = STDERR_LINES, max_bytes: int = 64 * 1024) -> list[str]:
    """The last ``n`` stderr lines of the child's log (stdout lines skipped); [] when unreadable
    (or when the log was replaced by a link: nothing is read through one)."""
    try:
        logs = place.open_dir((".murmur",))
        try:
            fd = os.open("launcher.log", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=logs)
        finally:
            os.close(logs)
        with open(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return []
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            raw = fh.read()
    except OSError:
        return []
    lines = raw.decode("utf-8", "replace").splitlines()
    if len(raw) >= max_bytes and lines:
        lines = lines[1:]  # the first line may be cut
    return [ln for ln in lines if not ln.startswith(STDOUT_PREFIX)][-n:]


def own_session_end(place: Place, session_id: str, max_bytes: int = 64 * 1024) -> str | None:
    """The ``exit_status`` of the child's own ``session_end`` trace line (its last), or None.

    What the child itself recorded when it ended its session: the outcome of a re-adopted child,
    whose exit status this daemon instance cannot read. Reached like every other record here:
    no link is followed."""
    try:
        records_fd = place.open_dir((".murmur", session_id))
        try:
            fd = os.open(TRACE_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=records_fd)
        finally:
            os.close(records_fd)
        with open(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - max_bytes))
            tail = fh.read()
    except (OSError, ValueError):
        return None
    for raw in reversed(tail.splitlines()):
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict) and line.get("event_type") == "session_end":
            status = line.get("exit_status")
            return status if isinstance(status, str) else None
    return None


READ_MAX = 256 * 1024
"""The most one read returns (a follower reads on from where it got to)."""


def record_parts(name: str) -> tuple[str, ...]:
    """The components of a relative record name; ValueError for an absolute name, ``.``, ``..``."""
    if not name or name.startswith("/") or "\x00" in name:
        raise ValueError("a record name is a relative path")
    parts = tuple(name.split("/"))
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError("a record name has no empty, '.' or '..' component")
    return parts


def read_at(place: Place, name: str, offset: int, max_bytes: int = READ_MAX) -> tuple[int, bytes]:
    """``(start, data)``: up to ``max_bytes`` of the regular file ``name`` from ``start``.

    ``offset < 0`` asks for the file's last ``max_bytes`` (a tail). An ``offset`` beyond the end
    means the file was truncated or replaced since: the read starts over at 0. A missing or
    unreadable file, or one that is not a regular file, reads as ``(0, b"")``.
    """
    parts = record_parts(name)
    max_bytes = max(0, min(max_bytes, READ_MAX))
    try:
        dfd = place.open_dir(parts[:-1])
    except OSError:
        return 0, b""
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return 0, b""
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return 0, b""
        start = max(0, st.st_size - max_bytes) if offset < 0 else offset if offset <= st.st_size else 0
        return start, os.pread(fd, max_bytes, start)
    except OSError:
        return 0, b""
    finally:
        os.close(fd)


def list_names(place: Place, sub: str) -> list[str]:
    """The regular files directly in the directory ``sub`` (sorted names); [] when it is missing."""
    try:
        dfd = place.open_dir(record_parts(sub))
    except OSError:
        return []
    try:
        names: list[str] = []
        for name in sorted(os.listdir(dfd)):
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                names.append(name)
        return names
    finally:
        os.close(dfd)
