"""The ``MURMUR_HOST_SOCKET`` server: the entrypoint's way to ask roost for something.

Why a socket instead of handing the entrypoint its credential: the credential is the session's
identity at the daemon; an entrypoint that held it could leak it to peers or logs. The host
keeps it and offers thin forwards instead. Each verb maps to one daemon endpoint; the JSON body
goes through unchanged apart from the credential header the host adds, and the daemon's status
and body come back unchanged — so the entrypoint sees exactly the daemon's sentences, and new
daemon fields need no change here.

The socket lives in a fresh 0700 directory and is itself 0600: only this user can reach it. And
only the session's own entrypoints: every request's peer process (``SO_PEERCRED``, pinned by a
pidfd) must descend from an entrypoint this host is running (the host is a child subreaper, so
the ancestry is sound), else 403 — another session's capsule of the same uid that finds this
socket cannot act as this session. What the host forwards carries ``x-roost-task-trust``, the
trust of the task that process runs, which the daemon uses only to lower what it stamps.
Errors the host itself produces (no daemon, daemon unreachable) carry ``x-roost-capsule-error``
so the client can tell them from the daemon's answers.

The job views the daemon answers (``/delegate``'s new job, ``GET /jobs/{id}``) are also shown to
the host, with the asking process: that is how the host knows which task started which delegation,
and which of them are still in flight (seed 000's ``task_canceled.delegation_ids``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from a2a.sse import accepts_event_stream
from roost.capsule.prepare import door_note
from roost.core.authz import CallerFacts, Listener, Policy
from roost.core.wire import CREDENTIAL_HEADER, HOST_ERROR_HEADER, TASK_TRUST_HEADER
from roost.http.authz import authz_middleware
from roost.http.middleware import error_middleware, read_body
from roost.http.server import QuietRunner
from roost.system.jobpeer import peer_pid
from roost.system.tlsclient import context_for, untrusted_sentence

__all__ = ["HOST_ERROR_HEADER", "ROUTES", "HostSocket", "JobSeen", "socket_dir"]

JobSeen = Callable[[int | None, dict[str, Any], bool], None]
"""Told of each job view the daemon answered: the asking process's pid, the view, and whether it
is the answer to a ``/delegate`` (a delegation that process's task just started)."""

SOCKET_NAME = "host.sock"
STREAM_IDLE_SECS = 90.0
_STREAM_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=5.0, sock_read=STREAM_IDLE_SECS)
MAX_PATH = 100  # sun_path is 108 bytes on Linux; keep a margin

# verb path on the host socket -> (method, daemon path)
ROUTES: dict[str, tuple[str, str]] = {
    "/send": ("POST", "/a2a/send"),
    "/get": ("POST", "/a2a/tasks/get"),
    "/share": ("POST", "/handles"),
    "/fetch": ("POST", "/peer-fetch"),
    "/delegate": ("POST", "/jobs"),
}


def socket_dir(records: Path) -> Path:
    """A fresh 0700 directory for the socket: under the records dir when the path fits, else runtime dir."""
    if len(str(records / "hs" / SOCKET_NAME)) <= MAX_PATH:
        d = records / "hs"
        d.mkdir(mode=0o700, parents=True, exist_ok=False)
        return d
    base = os.environ.get("XDG_RUNTIME_DIR")
    if not base or not os.path.isdir(base) or len(base) > MAX_PATH - 40:
        base = tempfile.gettempdir()
    return Path(tempfile.mkdtemp(prefix="roost-capsule-", dir=base))


class HostSocket:
    """Serve the forwards on a unix socket. ``credential`` and ``traceparent`` are read per request."""

    def __init__(
        self,
        records: Path,
        *,
        daemon_url: str | None,
        credential: Callable[[], str | None],
        callers: Callable[[int | None], str | None],
        traceparent: Callable[[], str | None] = lambda: None,
        jobs: JobSeen | None = None,
        timeout_secs: float = 60.0,
    ) -> None:
        self.dir = socket_dir(records)
        self.path = self.dir / SOCKET_NAME
        self._owned_dir = not self.dir.is_relative_to(records)
        self._daemon_url = daemon_url.rstrip("/") if daemon_url else None
        self._credential = credential
        self._callers = callers
        self._traceparent = traceparent
        self._jobs = jobs
        self._timeout = aiohttp.ClientTimeout(total=timeout_secs, sock_connect=5.0)
        self._http: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None

    def build_app(self) -> web.Application:
        """The socket's application: the forwards, behind the authorization table's check."""
        authz = authz_middleware(Listener.HOST_SOCKET, facts_hook=self._entrypoint_facts)
        app = web.Application(middlewares=[authz, error_middleware], client_max_size=64 * 1024)
        for verb in ROUTES:
            app.router.add_post(verb, self._forward)
        app.router.add_get("/jobs/{job_id}", self._forward)
        return app

    async def start(self) -> None:
        self._runner = QuietRunner(self.build_app(), note=door_note, access_log=None, handle_signals=False)
        await self._runner.setup()
        old = os.umask(0o177)
        try:
            await web.UnixSite(self._runner, str(self.path)).start()
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._http is not None:
            await self._http.close()
            self._http = None
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            if self._owned_dir:
                shutil.rmtree(self.dir)
            else:
                self.dir.rmdir()

    async def _entrypoint_facts(self, request: web.Request, policy: Policy, facts: CallerFacts) -> CallerFacts:
        """Whether the peer process (``SO_PEERCRED``) descends from this session's running
        entrypoint; the trust of the task it runs rides along on the request."""
        return replace(facts, entrypoint=self._task_trust(request) is not None)

    def _task_trust(self, request: web.BaseRequest) -> str | None:
        return self._callers(self._peer(request))

    @staticmethod
    def _peer(request: web.BaseRequest) -> int | None:
        transport = request.transport
        return peer_pid(transport.get_extra_info("socket") if transport is not None else None)

    def _job_answer(self, request: web.Request, status: int, data: bytes) -> None:
        """Show the host a job view the daemon answered (``/delegate`` 201, ``GET /jobs`` 200)."""
        delegate = request.path == "/delegate"
        if self._jobs is None or status != (201 if delegate else 200) or not (delegate or request.method == "GET"):
            return
        try:
            view = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            return
        if isinstance(view, dict):
            self._jobs(self._peer(request), view, delegate)

    @staticmethod
    def _host_error(status: int, sentence: str) -> web.Response:
        return web.json_response({"error": sentence}, status=status, headers={HOST_ERROR_HEADER: "1"})

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET":
            method, path = "GET", f"/jobs/{request.match_info['job_id']}"
        else:
            method, path = ROUTES[request.path]
        if self._daemon_url is None:
            return self._host_error(503, "MURMUR_ROOST_URL is not set, so this session has no daemon to ask")
        credential = self._credential()
        if credential is None:
            return self._host_error(503, "this session is not registered with mur-roost, so it holds no credential")
        body: bytes | None = None
        if method == "POST":
            body = await read_body(request)
            if request.path == "/send":
                body = self._with_traceparent(body)
        headers = {CREDENTIAL_HEADER: credential, TASK_TRUST_HEADER: self._task_trust(request) or "untrusted"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self._http is None or self._http.closed:
            tls = context_for(self._daemon_url)  # the host checked MURMUR_ROOST_CA before it started
            self._http = aiohttp.ClientSession(
                timeout=self._timeout, connector=aiohttp.TCPConnector(ssl=tls) if tls else None
            )
        if request.path == "/send" and accepts_event_stream(request.headers.get("Accept")):
            headers["Accept"] = "text/event-stream"
            return await self._forward_stream(request, self._daemon_url + path, body, headers)
        try:
            async with self._http.request(method, self._daemon_url + path, data=body, headers=headers) as resp:
                data = await resp.read()
                ctype = resp.headers.get("Content-Type", "application/json")
                self._job_answer(request, resp.status, data)
                return web.Response(status=resp.status, body=data, headers={"Content-Type": ctype})
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            reason = untrusted_sentence(exc, self._daemon_url) or str(exc) or type(exc).__name__
            return self._host_error(502, f"could not reach mur-roost at {self._daemon_url}: {reason}")

    async def _forward_stream(
        self, request: web.Request, url: str, body: bytes | None, headers: dict[str, str]
    ) -> web.StreamResponse:
        """A streamed send: the daemon's events are passed on as they come (its refusals, before
        the stream, as they are). No total timeout: the relay's heartbeats keep an idle stream
        alive, and one silent for :data:`STREAM_IDLE_SECS` has failed."""
        assert self._http is not None
        try:
            resp = await self._http.post(url, data=body, headers=headers, timeout=_STREAM_TIMEOUT)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            reason = untrusted_sentence(exc, url) or str(exc) or type(exc).__name__
            return self._host_error(502, f"could not reach mur-roost at {self._daemon_url}: {reason}")
        try:
            ctype = resp.headers.get("Content-Type", "application/json")
            if resp.status != 200 or not ctype.startswith("text/event-stream"):
                return web.Response(status=resp.status, body=await resp.read(), headers={"Content-Type": ctype})
            out = web.StreamResponse(status=200, headers={"Content-Type": ctype, "Cache-Control": "no-cache"})
            await out.prepare(request)
            try:
                async for chunk in resp.content.iter_any():
                    await out.write(chunk)
                await out.write_eof()
            except (aiohttp.ClientError, TimeoutError, ConnectionError):
                pass  # either side went away: the stream ends here
            return out
        finally:
            resp.release()

    def _with_traceparent(self, body: bytes) -> bytes:
        """Continue the running task's trace when the entrypoint named none (W3C continuation)."""
        tp = self._traceparent()
        if tp is None:
            return body
        try:
            obj = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return body
        if isinstance(obj, dict) and not obj.get("traceparent"):
            obj["traceparent"] = tp
            return json.dumps(obj).encode()
        return body
