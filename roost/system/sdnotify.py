"""sd_notify in-tree: one AF_UNIX datagram to ``$NOTIFY_SOCKET`` per message.

Why not a PyPI helper: the stale ones swallow errors and the maintained ones link libsystemd;
the protocol is one datagram (``READY=1``, ``STATUS=…``, ``WATCHDOG=1``, ``STOPPING=1``,
``RELOADING=1``), and a leading ``@`` names the abstract namespace. Outside systemd (no
``$NOTIFY_SOCKET``) every call is a cheap no-op, so the daemon calls it unconditionally.
"""

from __future__ import annotations

import os
import socket

__all__ = ["notify", "watchdog_interval"]


def notify(*lines: str, env: dict[str, str] | None = None) -> bool:
    """Send ``lines`` (joined by newlines) to the service manager; False when there is none or it failed."""
    path = (env if env is not None else os.environ).get("NOTIFY_SOCKET", "")
    if not path or not lines:
        return False
    address = "\0" + path[1:] if path.startswith("@") else path
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto("\n".join(lines).encode("utf-8"), address)
    except OSError:
        return False
    return True


def watchdog_interval(env: dict[str, str] | None = None) -> float | None:
    """Seconds between ``WATCHDOG=1`` pings (half of ``$WATCHDOG_USEC``), or None when not asked for.

    ``$WATCHDOG_PID``, when set, must name this process: the variable may be inherited by a child.
    """
    e = env if env is not None else os.environ
    try:
        usec = int(e.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    pid = e.get("WATCHDOG_PID")
    if usec <= 0 or (pid and pid != str(os.getpid())):
        return None
    return usec / 2_000_000
