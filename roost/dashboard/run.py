"""Start the dashboard: bind loopback, print the URL first, open a browser, serve until Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import webbrowser
from pathlib import Path
from typing import Protocol

from aiohttp import web

from roost.dashboard.admin import AdminError, AdminSocket
from roost.dashboard.guard import Guard
from roost.dashboard.server import build_app
from roost.http.server import QuietRunner

__all__ = ["DashboardError", "Output", "serve"]


class DashboardError(Exception):
    """The dashboard cannot start; its message is the one sentence roostctl prints."""


class Output(Protocol):
    """Where the dashboard says things: roostctl's printer (the URL on stdout, the rest on stderr)."""

    def line(self, text: str) -> None: ...

    def info(self, text: str) -> None: ...


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise DashboardError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    sock.listen(64)
    return sock


async def _serve(out: Output, admin_path: Path, sock: socket.socket, open_browser: bool) -> None:
    admin = AdminSocket(admin_path)
    try:
        await admin.get("/status")
    except AdminError as exc:
        await admin.close()
        raise DashboardError(f"{exc.message}; is mur-roost running? (pass --socket or --state-dir)") from None
    guard = Guard(port=sock.getsockname()[1])
    # A request it cannot parse gets a short sentence and one line here, never its bytes back.
    runner = QuietRunner(
        build_app(guard, admin),
        note=lambda status, error: out.info(
            f"roostctl dashboard: answered a request it could not serve with HTTP {status} ({error})"
        ),
        access_log=None,
        handle_signals=False,
        shutdown_timeout=1.0,
    )
    await runner.setup()
    await web.SockSite(runner, sock).start()
    out.line(guard.url())
    out.info("roostctl dashboard: open the URL above (it holds this run's token); Ctrl-C stops it")
    if open_browser:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, webbrowser.open, guard.url())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        with contextlib.suppress(Exception):
            await runner.cleanup()


def serve(out: Output, admin_path: Path, *, port: int, open_browser: bool) -> int:
    """Serve until Ctrl-C; raise :class:`DashboardError` (one sentence) if it cannot start."""
    sock = _bind(port)
    asyncio.run(_serve(out, admin_path, sock, open_browser))
    return 0
