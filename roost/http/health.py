"""``/livez`` and ``/readyz`` checks, Kubernetes style (``docs/operations.md``, Health).

Why two: liveness must not depend on anything that can flap (a restart storm helps no one), so
``/livez`` only proves the event loop answers. Readiness says whether new work should be sent
here: config loaded, state dir writable, launcher backend present, and not draining or stopping
(503 then, so a load balancer or ``systemctl`` health probe stops routing work to a daemon that
is on its way out). Machines read the status code; ``?verbose`` adds one line per check for
people.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass

from roost.state.config import Config

__all__ = ["Check", "readiness", "render"]


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str = ""


def _state_dir_writable(cfg: Config) -> Check:
    if cfg.ephemeral_keys:
        return Check("state-dir", True, "ephemeral keys: state is in memory")
    path = cfg.state_dir
    ok = os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)
    return Check("state-dir", ok, str(path) if ok else f"{path} is not a writable directory")


def _launcher_backend(cfg: Config) -> Check:
    cmd = cfg.capsule_command or (sys.executable, "-m", "roost.capsule")
    exe = cmd[0]
    found = shutil.which(exe) if os.sep not in exe else (exe if os.access(exe, os.X_OK) else None)
    return Check("launcher", found is not None, f"{exe} found" if found else f"{exe} is not executable or not on PATH")


def readiness(cfg: Config, *, draining: bool, stopping: bool, state_damage: str | None = None) -> list[Check]:
    """Every readiness check (blocking: it touches the file system; run it through the executor).

    ``state_damage``: what the check of the whole database after an unclean stop found."""
    checks = [Check("config", True, "loaded")]
    checks.append(_state_dir_writable(cfg))
    checks.append(Check("state-db", state_damage is None, state_damage or ""))
    checks.append(_launcher_backend(cfg))
    checks.append(Check("not-draining", not draining, "draining: running jobs finish, no new work" if draining else ""))
    checks.append(Check("not-stopping", not stopping, "the daemon is shutting down" if stopping else ""))
    return checks


def render(checks: list[Check], verbose: bool) -> tuple[int, str]:
    """HTTP status and body: ``ok`` or the failed checks; per-check lines with ``verbose``."""
    ok = all(c.ok for c in checks)
    if not verbose:
        if ok:
            return 200, "ok\n"
        failed = ", ".join(c.name for c in checks if not c.ok)
        return 503, f"not ready: {failed}\n"
    lines = [
        f"[{'+' if c.ok else '-'}]{c.name} {'ok' if c.ok else 'failed'}{': ' + c.detail if c.detail else ''}"
        for c in checks
    ]
    lines.append("readyz check passed" if ok else "readyz check failed")
    return (200 if ok else 503), "\n".join(lines) + "\n"
