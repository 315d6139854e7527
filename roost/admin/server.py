"""The admin listener: an aiohttp app on a unix socket, owner-only, never on TCP.

Why a socket file and a peer-credential check instead of a token: a token must be stored,
rotated and kept out of logs; a socket that only the daemon's user can open (0600, in a
directory only it can enter) needs none of that. Every route is in the authorization table
(:mod:`roost.http.authz`, ``ADMIN_ROUTES``): ``SO_PEERCRED`` is checked on every request as a
second lock, so a socket whose mode was loosened by hand still answers no other user (403), and
a peer process that belongs to a job — whatever its uid, root included — is refused too
(:mod:`roost.system.jobpeer`). Root is let in otherwise: it can read the master key anyway.

Paths longer than the 107-byte ``sun_path`` limit are bound through ``/proc/self/fd/<dir>``,
so a deep state dir still works.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import structlog
from aiohttp import web

from roost.admin.bridge import JobSources
from roost.admin.context import CONTROL, EVENTS, JOBS, TABLE
from roost.admin.control import Control
from roost.admin.routes_cluster import routes as cluster_routes
from roost.admin.routes_control import routes as control_routes
from roost.admin.routes_jobs import routes as job_routes
from roost.admin.routes_records import routes as record_routes
from roost.admin.routes_sessions import routes as session_routes
from roost.admin.routes_stream import routes as stream_routes
from roost.core.authz import CallerFacts, Listener, Policy, Who
from roost.http.authz import authz_middleware
from roost.http.context import EXECUTOR, LAUNCHER, Services
from roost.http.middleware import MAX_BODY_BYTES, error_middleware
from roost.http.server import QuietRunner
from roost.observe.events import EventBus
from roost.state.sessions import SessionTable
from roost.system.blocking import BlockingExecutor
from roost.system.jobpeer import peer_pid, process_in_job
from roost.system.peercred import unix_peer_uid

__all__ = ["AdminServer", "AdminSocketError", "build_admin_app", "peer_uid", "unix_address"]

log = structlog.get_logger("roost.admin")

_SUN_PATH_MAX = 107


class AdminSocketError(RuntimeError):
    """The admin socket cannot be set up; the message is one sentence for the operator."""


def peer_uid(sock: socket.socket | None) -> int | None:
    """The uid of the process at the other end of a unix socket (``SO_PEERCRED``), or None."""
    return unix_peer_uid(sock)


@contextlib.contextmanager
def unix_address(path: Path) -> Iterator[str]:
    """An address for ``bind``/``connect`` to ``path``, going through /proc/self/fd when it is too long."""
    if len(os.fsencode(path)) <= _SUN_PATH_MAX:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


async def _job_facts(request: web.Request, policy: Policy, facts: CallerFacts) -> CallerFacts:
    """Whether the peer process belongs to a job (``SO_PEERCRED``'s pid, pinned by a pidfd)."""
    if policy.who is not Who.OPERATOR or facts.uid not in (facts.daemon_uid, 0):
        return facts
    transport = request.transport
    pid = peer_pid(transport.get_extra_info("socket") if transport is not None else None)
    launcher = request.app[LAUNCHER]
    cgroups = launcher.cgroups
    inside = await request.app[EXECUTOR].run(
        process_in_job, pid, launcher.job_roots(), cgroup_root=cgroups.root if cgroups is not None else None
    )
    if inside:
        log.warning("admin_peer_refused", peer_uid=facts.uid, peer_pid=pid, in_job=True, path=request.rel_url.path)
    return replace(facts, in_job=inside)


def build_admin_app(
    services: Services, *, control: Control, events: EventBus, jobs: JobSources, table: SessionTable
) -> web.Application:
    authz = authz_middleware(Listener.ADMIN, facts_hook=_job_facts)
    app = web.Application(middlewares=[authz, error_middleware], client_max_size=MAX_BODY_BYTES)
    services.install(app)
    app[CONTROL] = control
    app[EVENTS] = events
    app[JOBS] = jobs
    app[TABLE] = table
    for route_table in (control_routes, session_routes, job_routes, stream_routes, record_routes, cluster_routes):
        app.add_routes(route_table)
    return app


def _prepare_dir(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = directory.lstat()
    except OSError as exc:
        raise AdminSocketError(f"cannot use the admin socket directory {directory}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise AdminSocketError(f"the admin socket directory {directory} is not a directory")
    if st.st_uid not in (os.geteuid(), 0):
        raise AdminSocketError(f"the admin socket directory {directory} belongs to another user")
    if st.st_mode & 0o022:
        raise AdminSocketError(
            f"the admin socket directory {directory} is writable by group or others, so another user "
            f"could replace the socket; use a private directory (chmod 700 {directory}) or set admin_socket"
        )


def _clear_stale(path: Path) -> None:
    """Remove a socket left by a daemon that died; refuse if one still answers on it."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise AdminSocketError(f"{path} exists and is not a socket; move it away or set admin_socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    probe.settimeout(1.0)
    try:
        with unix_address(path) as addr:
            probe.connect(addr)
    except OSError as exc:
        if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
            raise AdminSocketError(f"cannot check the admin socket {path}: {exc.strerror or exc}") from None
        path.unlink(missing_ok=True)
        return
    finally:
        probe.close()
    raise AdminSocketError(f"another daemon answers on the admin socket {path}; stop it or use another state dir")


def bind_admin_socket(path: Path) -> socket.socket:
    """Create, bind (0600) and return the listening socket (blocking; run through the executor)."""
    _prepare_dir(path.parent)
    _clear_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        with unix_address(path) as addr:
            sock.bind(addr)
        os.chmod(path, 0o600)
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise AdminSocketError(f"cannot bind the admin socket {path}: {exc.strerror or exc}") from None
    return sock


class AdminServer:
    """Service object: ``start`` binds the socket and serves; ``stop`` closes it and removes the file."""

    def __init__(self, *, path: Path, executor: BlockingExecutor, app: Callable[[], web.Application]) -> None:
        self._socket_path = path
        self._executor = executor
        self._app = app
        self.path: Path | None = None
        self._runner: web.AppRunner | None = None
        self._inode: tuple[int, int] | None = None

    async def start(self) -> None:
        path = self._socket_path
        sock = await self._executor.run(bind_admin_socket, path)
        st = os.stat(path)
        self._inode = (st.st_dev, st.st_ino)
        self._runner = QuietRunner(self._app(), access_log=None, handle_signals=False, shutdown_timeout=5.0)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()
        self.path = path
        log.info("admin_listening", socket=str(path))

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.path is not None:
            # Only remove the file we bound: a successor daemon may already own the path.
            with contextlib.suppress(OSError):
                st = os.lstat(self.path)
                if (st.st_dev, st.st_ino) == self._inode:
                    os.unlink(self.path)
            self.path = None
