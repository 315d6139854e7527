"""What ``roostctl doctor`` checks on a Ray node, run there by its keeper (blocking functions).

Why on the node and not on the daemon's host: nodes share no filesystem and need not share an
installation, so whether the capsule command the daemon would start (``capsule_command``, else
the node's own interpreter with ``-m roost.capsule``) runs *there* can only be learned there. The
check runs the command as a child would be started — its argv[0] found on the ``PATH`` the
daemon gives children, with ``--version`` and nothing else in its environment — so a missing
install, a broken interpreter or a wrong path shows as the error the child would have hit.
This module imports no ``ray``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

__all__ = ["VERSION_TIMEOUT_SECS", "check_command"]

VERSION_TIMEOUT_SECS = 20.0


def _resolve(exe: str, path: str) -> str | None:
    if "/" in exe:
        return exe if os.path.isfile(exe) and os.access(exe, os.X_OK) else None
    return shutil.which(exe, path=path)


def check_command(argv: list[str], path: str, *, run_version: bool) -> dict[str, Any]:
    """``{argv, found, version, error}`` for a command on this node: where its argv[0] resolves
    on ``path`` and, with ``run_version``, the first line ``argv + ["--version"]`` prints."""
    out: dict[str, Any] = {"argv": list(argv), "found": None, "version": None, "error": None}
    if not argv:
        out["error"] = "the command is empty"
        return out
    found = _resolve(argv[0], path)
    if found is None:
        where = "does not exist or is not executable" if "/" in argv[0] else f"is not on PATH ({path})"
        out["error"] = f"{argv[0]} {where} on this node"
        return out
    out["found"] = found
    if not run_version:
        return out
    try:
        done = subprocess.run(
            [found, *argv[1:], "--version"],
            env={"PATH": path},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=VERSION_TIMEOUT_SECS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        out["error"] = f"'{' '.join(argv)} --version' did not answer within {VERSION_TIMEOUT_SECS:g}s"
        return out
    except OSError as exc:
        out["error"] = f"'{' '.join(argv)} --version' could not start: {exc.strerror or exc}"
        return out
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        err = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = err[-1][:300] if err else "no output"
        out["error"] = f"'{' '.join(argv)} --version' exited {done.returncode}: {why}"
        return out
    out["version"] = lines[0][:200]
    return out
