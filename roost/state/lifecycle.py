"""Where the daemon is in its life: serving or stopping, its address, and how a stop is asked for.

Why an object of its own: ``/readyz`` answers 503 from the moment a stop begins, admin streams
end when the daemon shuts down, a finished drain asks the serving loop to stop, and the status
route shows the uptime and URL. Each of those needs only this, not the daemon that owns it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from roost.state.config import Config

__all__ = ["Lifecycle", "url_for"]

log = structlog.get_logger("roost.daemon")


def url_for(host: str, port: int, *, tls: bool) -> str:
    """``http(s)://host:port`` with an IPv6 host in brackets."""
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}"


class Lifecycle:
    """``config``: the settings it reads need a restart to change (listeners, advertised URL)."""

    def __init__(self, config: Config) -> None:
        self.bind = config.bind
        self._listen = config.listen_address
        self._tls = config.tls_cert is not None
        self._advertise = config.advertise_url
        self.port: int | None = None
        self.network_port: int | None = None  # the ``listen`` listener's, when there is one
        self.started_at = time.time()
        self.stopping = False  # /readyz answers 503 from the moment a stop begins
        # What the check of the whole state database after an unclean stop found (roost.daemon.startup);
        # /readyz answers 503 while it is set.
        self.state_damage: str | None = None
        self.shutdown_event = asyncio.Event()  # ends admin streams so a stop is not held up by them
        self.background: set[asyncio.Task[Any]] = set()
        # Set by the serving loop (:func:`roost.daemon.serve.run`); None for a daemon built in-process.
        self.stop_callback: Callable[[str], None] | None = None

    @property
    def url(self) -> str:
        host = self.bind if ":" not in self.bind else f"[{self.bind}]"
        return f"http://{host}:{self.port}"

    @property
    def network_url(self) -> str | None:
        """The ``listen`` listener's URL (https with TLS), or None without one."""
        if self._listen is None or self.network_port is None:
            return None
        return url_for(self._listen[0], self.network_port, tls=self._tls)

    @property
    def advertise_url(self) -> str:
        """The URL children on other nodes are given: ``advertise_url``, else the local URL."""
        return self._advertise or self.url

    def state_damaged(self, sentence: str) -> None:
        self.state_damage = sentence

    def request_stop(self, reason: str) -> None:
        """Ask the serving loop to stop (a finished drain); a no-op for in-process daemons."""
        log.info("stop_requested", reason=reason)
        if self.stop_callback is not None:
            self.stop_callback(reason)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` in the background until it ends or the daemon stops."""
        task = asyncio.get_running_loop().create_task(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return task

    def begin_stop(self) -> None:
        """A stop begins: /readyz says so, and admin streams end."""
        self.stopping = True
        self.shutdown_event.set()

    def cancel_background(self) -> None:
        for task in list(self.background):
            task.cancel()
