"""A tiny HTTP/1.1 client for the admin socket: a unix stream socket and a few lines of parsing.

Why not aiohttp, urllib or even ``http.client``: aiohttp costs ~0.35 s to import (most
of roostctl's start-up budget), urllib cannot dial a unix socket, and ``http.client`` drags in the ``email`` package
(~25 ms, a third of roostctl's start-up budget). The admin server is ours and speaks plain
HTTP/1.1 with ``Content-Length`` or chunked bodies, so that is all this reads. Every call opens
one connection (``Connection: close``); streams (``events -f``, ``logs -f``) are read line by line
from the chunked body.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from roost.ctl.errors import ApiError, CtlError, Unreachable

__all__ = ["AdminClient", "path_with_query", "quote_id"]

_SUN_PATH_MAX = 107
_MAX_HEAD = 64 * 1024


class _Response:
    """Status, headers and a body reader over one socket's buffered file."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._fh = sock.makefile("rb")
        status_line = self._fh.readline(_MAX_HEAD)
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise CtlError("the admin socket did not answer with HTTP")
        self.status = int(parts[1])
        self.headers: dict[str, str] = {}
        while True:
            line = self._fh.readline(_MAX_HEAD)
            if line in (b"\r\n", b"\n", b""):
                break
            key, _, value = line.decode("latin-1").partition(":")
            self.headers[key.strip().lower()] = value.strip()
        self.chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        self._left = int(self.headers.get("content-length", "-1"))

    def read(self) -> bytes:
        if self.chunked:
            return b"".join(self._chunks())
        if self._left >= 0:
            return self._fh.read(self._left)
        return self._fh.read()

    def _chunks(self) -> Iterator[bytes]:
        while True:
            size_line = self._fh.readline(_MAX_HEAD)
            if not size_line:
                return
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self._fh.readline()
                return
            data = self._fh.read(size)
            self._fh.read(2)  # CRLF after each chunk
            yield data

    def lines(self) -> Iterator[bytes]:
        buf = b""
        source = self._chunks() if self.chunked else iter(lambda: self._fh.read1(65536), b"")
        for data in source:
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                yield line
        if buf:
            yield buf

    def close(self) -> None:
        self._fh.close()
        self._sock.close()


def _connect(path: Path, timeout: float | None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    sock.settimeout(timeout)
    raw = os.fsencode(path)
    try:
        if len(raw) <= _SUN_PATH_MAX:
            sock.connect(raw)
        else:  # too long for sun_path: go through the directory's descriptor
            fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                sock.connect(f"/proc/self/fd/{fd}/{path.name}")
            finally:
                os.close(fd)
    except BaseException:
        sock.close()
        raise
    return sock


def path_with_query(path: str, **query: object) -> str:
    q = {k: ("1" if v is True else str(v)) for k, v in query.items() if v is not None and v is not False}
    return path + ("?" + urlencode(q) if q else "")


def quote_id(value: str) -> str:
    return quote(value, safe="")


class AdminClient:
    def __init__(self, path: Path, *, source: str = "default", timeout: float | None = 30.0) -> None:
        self.path = path
        self.source = source
        self.timeout = timeout

    def _unreachable(self, exc: OSError) -> Unreachable:
        why = exc.strerror or str(exc) or type(exc).__name__
        return Unreachable(
            f"the daemon is not reachable at {self.path} ({self.source}): {why}; is mur-roost running? "
            "(pass --socket or --state-dir, or set ROOST_SOCKET)"
        )

    def _send(self, method: str, path: str, body: object, timeout: float | None) -> _Response:
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nHost: roost\r\nAccept: application/json\r\nConnection: close\r\n"
        if body is not None:
            head += "Content-Type: application/json\r\n"
        head += f"Content-Length: {len(data)}\r\n\r\n"
        try:
            sock = _connect(self.path, timeout)
        except OSError as exc:
            raise self._unreachable(exc) from None
        try:
            sock.sendall(head.encode("latin-1") + data)
            return _Response(sock)
        except (OSError, ValueError) as exc:
            sock.close()
            if isinstance(exc, OSError):
                raise self._unreachable(exc) from None
            raise Unreachable(f"the daemon at {self.path} gave no valid answer") from None

    @staticmethod
    def _error(status: int, raw: bytes) -> ApiError:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            if isinstance(body.get("message"), str):
                return ApiError(status, body["message"], code=body["error"])
            return ApiError(status, body["error"])
        text = raw.decode("utf-8", "replace").strip() or f"HTTP {status}"
        return ApiError(status, text)

    def call(self, method: str, path: str, body: object = None) -> Any:
        """One request; the decoded JSON answer, or :class:`ApiError` / :class:`Unreachable`.

        The answer is typed where it is read: each caller annotates it with the route's answer
        type from :mod:`roost.core.admin_models` (a ``TypedDict``, so nothing is converted)."""
        resp = self._send(method, path, body, self.timeout)
        try:
            raw = resp.read()
        except OSError as exc:
            raise self._unreachable(exc) from None
        finally:
            resp.close()
        if resp.status >= 400:
            raise self._error(resp.status, raw)
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            raise CtlError(f"the daemon answered {path} with something that is not JSON") from None

    def stream(self, path: str) -> Iterator[Any]:
        """NDJSON objects from a chunked answer until the daemon ends it (no read timeout); the
        caller names their type (:mod:`roost.core.admin_models`), as for :meth:`call`."""
        resp = self._send("GET", path, None, None)
        try:
            if resp.status >= 400:
                raise self._error(resp.status, resp.read())
            for line in resp.lines():
                line = line.strip()
                if not line:
                    continue  # keep-alive
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    yield obj
        finally:
            resp.close()
