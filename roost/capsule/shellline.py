"""The ``shell`` trace line of one entrypoint run: what ran, how it ended, which limit it hit.

Why a ``shell`` line: a script capsule's entrypoint is the subprocess its host runs for a task,
as an agent runtime runs a ``shell.allow`` command for a turn, and the seed's ``shell`` line is
where a subprocess's exit and the ``capabilities.resources`` field it hit (``resource_limit``)
are recorded. One line per run, parented on the task; the task's and the session's
``shell_calls`` count them.

Pure: the caller passes the run's facts.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

from roost.capsule.entrypoint import EntrypointResult

__all__ = ["exit_code", "shell_line"]


def exit_code(returncode: int) -> int:
    """The seed's ``exit_code``: the status, or ``128 + signal`` for a signal kill."""
    return 128 - returncode if returncode < 0 else returncode


def shell_line(
    *,
    turn: int,
    task_id: str,
    argv: Sequence[str],
    result: EntrypointResult,
    duration_ms: int,
    resource_limit: str | None,
) -> dict[str, object]:
    """The ``shell`` payload (``resource_limit`` only when the evidence named one limit)."""
    payload: dict[str, object] = {
        "turn": turn,
        "task_id": task_id,
        "binary": os.path.realpath(argv[0]) if argv and os.path.isabs(argv[0]) else (argv[0] if argv else ""),
        "command": shlex.join(argv[1:]),
        "exit_code": exit_code(result.returncode),
        "stdout_bytes": result.stdout_bytes,
        "stderr_bytes": result.stderr_bytes,
        "duration_ms": duration_ms,
    }
    if resource_limit is not None:
        payload["resource_limit"] = resource_limit
    return payload
