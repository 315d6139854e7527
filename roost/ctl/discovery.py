"""Where the admin socket is: ``--socket``, else ``--state-dir``, else ``$ROOST_SOCKET``, else
``$ROOST_STATE_DIR``, else the daemon's own defaults.

The daemon's default is ``<state dir>/admin.sock`` with the state dir ``$STATE_DIRECTORY`` under
systemd, else ``~/.murmur/roost``; the packaged unit uses ``/var/lib/mur-roost``. Without any
hint roostctl tries those in order and takes the first socket that exists, so both a user's
daemon and the system service are found with no flags.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["SOCKET_NAME", "candidates", "find_socket"]

SOCKET_NAME = "admin.sock"
SERVICE_STATE_DIR = Path("/var/lib/mur-roost")


def candidates(env: Mapping[str, str] | None = None) -> list[Path]:
    e = os.environ if env is None else env
    out: list[Path] = []
    sd = e.get("STATE_DIRECTORY")
    if sd:
        out.append(Path(sd.split(":")[0]) / SOCKET_NAME)
    home = e.get("HOME")
    if home and os.path.isabs(home):
        out.append(Path(home) / ".murmur" / "roost" / SOCKET_NAME)
    out.append(SERVICE_STATE_DIR / SOCKET_NAME)
    return out


def find_socket(
    socket: str | None = None, state_dir: str | None = None, env: Mapping[str, str] | None = None
) -> tuple[Path, str]:
    """The socket path and where it came from (shown by ``doctor`` and in unreachable errors)."""
    e = os.environ if env is None else env
    if socket:
        return Path(socket).expanduser(), "--socket"
    if state_dir:
        return Path(state_dir).expanduser() / SOCKET_NAME, "--state-dir"
    if e.get("ROOST_SOCKET"):
        return Path(e["ROOST_SOCKET"]).expanduser(), "ROOST_SOCKET"
    if e.get("ROOST_STATE_DIR"):
        return Path(e["ROOST_STATE_DIR"]).expanduser() / SOCKET_NAME, "ROOST_STATE_DIR"
    options = candidates(e)
    for path in options:
        if path.exists():
            return path, "default"
    return options[0], "default"
