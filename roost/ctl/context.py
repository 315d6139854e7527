"""What every verb gets: how to print, and a client for the admin socket (built on first use).

A plain class rather than a dataclass: ``dataclasses`` imports ``inspect``, about 10 ms of
roostctl's start-up budget for nothing.
"""

from __future__ import annotations

from pathlib import Path

from roost.ctl.client import AdminClient
from roost.ctl.discovery import find_socket
from roost.ctl.output import Output

__all__ = ["Context"]


class Context:
    __slots__ = ("_client", "out", "socket", "state_dir", "timeout")

    def __init__(
        self, out: Output, socket: str | None = None, state_dir: str | None = None, timeout: float = 30.0
    ) -> None:
        self.out = out
        self.socket = socket
        self.state_dir = state_dir
        self.timeout = timeout
        self._client: AdminClient | None = None

    @property
    def socket_path(self) -> tuple[Path, str]:
        return find_socket(self.socket, self.state_dir)

    @property
    def client(self) -> AdminClient:
        if self._client is None:
            path, source = self.socket_path
            self._client = AdminClient(path, source=source, timeout=self.timeout)
        return self._client
