"""Files the launcher places in a child's directory before the child starts, and reads after.

* ``meta/job_id.txt`` and ``input.json`` (the child's task file): written atomically (temp file + rename) so
  the child never reads half a file. They are not fsynced: a machine crash loses the job itself
  with them, and an fsync pair would double the daemon's cost per launch.
* ``.murmur/launcher.log``: the child's stderr goes straight to this file (no daemon work per
  line, no pipe that can fill up); stdout after the ready line is appended as ``stdout: `` lines.
  The crash detail reads the last stderr lines back from it.

Everything here blocks: call it through the daemon's executor.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from roost.completion import STDERR_LINES
from roost.errors import BadRequest
from roost.fsutil import write_atomic

__all__ = [
    "INPUT_FILE",
    "JOB_ID_FILE",
    "LOG_FILE",
    "STDOUT_PREFIX",
    "append_log",
    "input_envelope",
    "parse_task",
    "prepare_child_dir",
    "stderr_tail",
]

JOB_ID_FILE = "meta/job_id.txt"
INPUT_FILE = "input.json"
LOG_FILE = ".murmur/launcher.log"
STDOUT_PREFIX = "stdout: "
_TASK_FIELDS = ("objective", "instructions", "context", "output_format")


def parse_task(task: object) -> dict[str, str | None] | None:
    """A request's ``task`` as the code_task payload; a string is the objective."""
    if task is None:
        return None
    if isinstance(task, str):
        return {"objective": task, "instructions": None, "context": None, "output_format": None}
    if not isinstance(task, dict):
        raise BadRequest("task must be a string or an object with objective, instructions, context, output_format")
    unknown = sorted(set(task) - set(_TASK_FIELDS))
    if unknown:
        raise BadRequest(f"task has an unknown field '{unknown[0]}'")
    payload: dict[str, str | None] = {}
    for key in _TASK_FIELDS:
        value = task.get(key)
        if value is not None and not isinstance(value, str):
            raise BadRequest(f"task.{key} must be a string")
        payload[key] = value
    if not payload["objective"]:
        raise BadRequest("task.objective must be a non-empty string")
    return payload


def input_envelope(job_id: str, payload: dict[str, str | None]) -> dict[str, Any]:
    """The ``murmur.message.v1`` envelope of type ``murmur.code_task.request.v1``."""
    return {
        "schema": "murmur.message.v1",
        "type": "murmur.code_task.request.v1",
        "job_id": job_id,
        "payload": {key: payload.get(key) for key in _TASK_FIELDS},
    }


def prepare_child_dir(
    child_dir: Path,
    job_id: str,
    payload: dict[str, str | None] | None,
    *,
    fresh: bool,
) -> int:
    """Create the directory (0700; ``fresh`` = must not exist), write the inputs, open the log.

    Returns the log file's descriptor (the caller hands it to the child as stderr, then closes it).
    """
    if fresh:
        child_dir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        child_dir.mkdir(mode=0o700)
    else:
        child_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    meta = child_dir / "meta"
    meta.mkdir(exist_ok=True, mode=0o700)
    write_atomic(child_dir / JOB_ID_FILE, (job_id + "\n").encode())
    if payload is not None:
        data = json.dumps(input_envelope(job_id, payload), indent=2, ensure_ascii=False) + "\n"
        write_atomic(child_dir / INPUT_FILE, data.encode("utf-8"))
    log_path = child_dir / LOG_FILE
    log_path.parent.mkdir(exist_ok=True, mode=0o700)
    return os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)


def append_log(child_dir: str, lines: list[str]) -> None:
    """Append the child's later stdout lines to its log, marked so they are not read as stderr."""
    data = "".join(f"{STDOUT_PREFIX}{ln}\n" for ln in lines).encode("utf-8", "replace")
    fd = os.open(Path(child_dir) / LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def stderr_tail(child_dir: str, n: int = STDERR_LINES, max_bytes: int = 64 * 1024) -> list[str]:
    """The last ``n`` stderr lines of the child's log (stdout lines skipped); [] when unreadable."""
    try:
        with open(Path(child_dir) / LOG_FILE, "rb") as fh:
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
