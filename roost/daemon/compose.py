"""The daemon's composition root: every service built with what it needs, started and stopped in order.

Start-up order: state dir (owner-only, locked) → key ring → SQLite (WAL) → load what is live →
services → bind → admin socket → announce. Stop: the listeners close, in-flight requests
finish, the services stop in reverse, the store is flushed. The process around it (signals,
systemd) is roost/daemon/serve.py.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import structlog
from aiohttp import web

from a2a.client import A2AClient
from roost.admin.bridge import JobSources
from roost.admin.control import Control
from roost.admin.server import AdminServer, AdminSocketError, build_admin_app
from roost.backends.bundle import BackendNeeds, BackendServices
from roost.backends.choose import choose_backend
from roost.core.egress import own_listeners
from roost.daemon.network import check_listeners, listeners, start_network_listener
from roost.daemon.startup import (
    StartupError,
    StateLock,
    check_after_unclean_stop,
    check_key_file,
    clean_stop_op,
    damaged_database,
    instance_id,
    newer_database,
    prepare_state_dir,
    say_keys_reset,
    take_clean_stop,
)
from roost.daemon.tracing import Tracing
from roost.http.app import build_app
from roost.http.context import Services
from roost.http.guard import ConnectionGuard
from roost.http.server import PolicedRunner, bound_port
from roost.observe.events import EventBus
from roost.observe.logs import configure_logging
from roost.observe.metrics import Metrics
from roost.observe.probes import Probes
from roost.observe.tracesink import TraceFiles
from roost.services.artifactserve import keeper_token
from roost.services.launcher.jobdirs import JobDirs
from roost.services.launcher.service import Launcher, LaunchServices
from roost.services.peer.plane import PeerPlane
from roost.services.peerauth import PeerAuth
from roost.services.referee.service import Referee, wall_ms
from roost.services.relay import Relay
from roost.services.retention import Retention
from roost.services.sessionwatch import SessionWatch, observe_session_end
from roost.state.config import Config
from roost.state.keys import KeyFileError, KeyHolder, KeyRing
from roost.state.lifecycle import Lifecycle
from roost.state.sessions import SessionTable
from roost.state.settings import Settings
from roost.state.store import Store, StoreDamaged, StoreError, StoreTooNew, is_damage
from roost.system.blocking import BlockingExecutor
from roost.system.hostaddrs import host_addresses

__all__ = ["Roost"]


log = structlog.get_logger("roost.daemon")


class Roost:
    """The composition root: builds every service with what it needs, starts and stops them in order.

    It holds no behaviour of its own. Built in steps — the state every service is built on, the
    process backend the configuration names, the services sessions call, the services that run
    jobs, the edges that serve them all — and started in steps: the state directory and keys,
    storage, services, listeners. Tests build it in-process with an injected clock and reach the
    services through its attributes (tests/support/daemon.py)."""

    def __init__(self, config: Config, *, clock: Callable[[], int] = wall_ms) -> None:
        self.clock = clock
        self._hold_state(config)
        backend = self._choose_backend(config)
        self._build_session_services(config, backend)
        self._build_job_services(config, backend)
        self._build_edges(config)

    # -- building ------------------------------------------------------------------------------
    def _hold_state(self, config: Config) -> None:
        """What outlives any request: the executor, the settings, the sessions, the keys, the
        store, the state directory's lock, the daemon's lifecycle, its metrics and events."""
        self.executor = BlockingExecutor()
        self.settings = Settings(config, executor=self.executor, configure_logs=configure_logging)
        self.metrics = Metrics()
        self.table = SessionTable()
        self.key_holder = KeyHolder(
            KeyRing.ephemeral(),
            state_dir=None if config.ephemeral_keys else config.state_dir,
            executor=self.executor,
        )
        self.store = Store(None if config.ephemeral_keys else config.db_path, self.executor)
        self.state_lock = StateLock(config.state_dir)
        self.lifecycle = Lifecycle(config)
        self.events = EventBus(clock=self.clock)
        self.tracing = Tracing(self.events, self.metrics)

    def _choose_backend(self, config: Config) -> BackendServices:
        """Where children run, and with it where a session's files, trace, door and workdir are."""
        return choose_backend(
            BackendNeeds(
                config=config,
                live=lambda: self.settings.config,
                executor=self.executor,
                table=self.table,
                jobs=lambda: self.launcher.jobs,  # built below, from the backend's process part
                daemon_url=lambda: self.lifecycle.advertise_url,
                node_token=lambda node_id: keeper_token(self.key_holder.ring, node_id),
            )
        )

    def _build_session_services(self, config: Config, backend: BackendServices) -> None:
        """What a session calls — the referee, the relay, the peer plane — with the A2A client and
        the trace sink they share, each given the part of the backend it uses."""
        clock = self.clock
        self.referee = Referee(
            settings=self.settings,
            table=self.table,
            store=self.store,
            keys=self.key_holder,
            executor=self.executor,
            clock=clock,
            workdirs=backend.check_workdir,
        )
        self.settings.on_reload.append(self.referee.forget_resolved)
        # One client (one connection pool) for every outbound A2A call the daemon makes.
        self.a2a = A2AClient(connect_timeout=5.0, total_timeout=config.peer_timeout_secs, route=backend.door_route)
        self.traces = TraceFiles(self.executor, backend.node_traces)
        self.referee.on_session_end.append(self.traces.close)
        self.referee.on_session_end.append(observe_session_end(self.events))
        self.peer_auth = PeerAuth(config.peer_auth, self.executor) if config.peer_auth else None
        self.relay = Relay(
            sessions=self.referee,
            doors=self.key_holder,
            table=self.table,
            a2a=self.a2a,
            events=self.events,
            metrics=self.metrics,
            traces=self.traces,
            may_launch=lambda uid: self.launcher.may_launch(uid),
            peer_auth=self.peer_auth,
        )
        self.referee.on_session_registered.append(self.relay.forget_doors)
        self.a2a.peer_check = self.relay.peer_refusal  # a send never reaches the daemon's own listeners
        self.peer_plane = PeerPlane(
            settings=self.settings,
            keys=self.key_holder,
            table=self.table,
            events=self.events,
            metrics=self.metrics,
            executor=self.executor,
            a2a=self.a2a,
            traces=self.traces,
            clock=clock,
            files=backend.session_files,
        )

    def _build_job_services(self, config: Config, backend: BackendServices) -> None:
        """What runs jobs and keeps the records tidy: the launcher over the backend's process
        part, the watch on sessions' processes, retention."""
        clock = self.clock
        self.launcher = Launcher(
            LaunchServices(
                config=lambda: self.settings.config,
                clock=clock,
                referee=self.referee,
                table=self.table,
                store=self.store,
                executor=self.executor,
                metrics=self.metrics,
                events=self.events,
                backend=backend.process,
                url=lambda: self.lifecycle.url,
            ),
            trace=self.traces.write,
            a2a=self.a2a,
            door_key=self.key_holder.door_key_for,
        )
        self.session_watch = SessionWatch(
            sessions=self.referee, table=self.table, executor=self.executor, launched=self.launcher.launched_pid
        )
        self.retention = Retention(
            settings=self.settings,
            table=self.table,
            store=self.store,
            clock=clock,
            named=self.launcher.named_sessions,
            job_dirs=JobDirs(config.state_dir, self.executor).remove,
        )

    def _build_edges(self, config: Config) -> None:
        """What operators and the HTTP routes reach — probes, the admin controls, the services
        the routes call — and the admin socket's server; the listeners come at start."""
        self.probes = Probes(metrics=self.metrics, table=self.table, jobs=self.launcher, referee=self.referee)
        self.control = Control(
            referee=self.referee,
            table=self.table,
            jobs=self.launcher,
            keys=self.key_holder,
            settings=self.settings,
            lifecycle=self.lifecycle,
            status_line=self.probes.status_line,
        )
        self.services = Services(
            referee=self.referee,
            relay=self.relay,
            peer_plane=self.peer_plane,
            launcher=self.launcher,
            probes=self.probes,
            settings=self.settings,
            keys=self.key_holder,
            executor=self.executor,
            metrics=self.metrics,
            lifecycle=self.lifecycle,
        )
        self.admin = AdminServer(path=config.admin_socket_path, executor=self.executor, app=self._admin_app)
        self.app: web.Application | None = None
        self._runner: web.AppRunner | None = None

    def _admin_app(self) -> web.Application:
        jobs = JobSources(launcher=self.launcher, table=self.table)
        return build_admin_app(self.services, control=self.control, events=self.events, jobs=jobs, table=self.table)

    # -- starting ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start, or raise :class:`StartupError` (one sentence, its own exit code)."""
        try:
            await self._start()
        except StartupError:
            self.state_lock.release()
            raise

    async def _start(self) -> None:
        cfg = self.settings.config
        check_listeners(cfg)
        reset = await self._take_state_dir(cfg)
        with _state_read(cfg.db_path):
            clean = await self._open_storage(cfg)
            if reset:
                say_keys_reset(self.table.running, len(self.table.reservations), self.key_holder.ring.key_id)
            for service in (self.relay, self.peer_plane, self.launcher, self.session_watch):
                await service.start()
        for forever in (self.referee.expire_forever(), self.retention.run_forever()):
            self.lifecycle.spawn(forever)
        self.lifecycle.port = await self._open_listeners(cfg)
        # The relay and push webhooks never dial the daemon's own listeners (roost/core/egress.py).
        own = listeners(cfg, self.lifecycle.port, self.lifecycle.network_port)
        self.relay.own = own_listeners(own, await self.executor.run(host_addresses))
        await self.probes.start()
        await self._say_started(cfg, clean)

    async def _take_state_dir(self, cfg: Config) -> bool:
        """The state directory made ours and locked, then the key ring loaded; whether the keys
        are being reset (``--reset-keys`` over a database without its key file)."""
        # Nothing in the state directory is read or written before the lock is held, whatever
        # the mode: with --ephemeral-keys the key and the database are in memory, but the lifeline
        # holder's socket, admin.sock and jobs/ are still there, and a second daemon must not touch them.
        await self.executor.run(prepare_state_dir, cfg.state_dir)
        await self.executor.run(self.state_lock.acquire)
        if cfg.ephemeral_keys:
            return False
        reset = await self.executor.run(check_key_file, cfg)
        try:
            await self.key_holder.load()
        except KeyFileError as exc:
            raise StartupError(str(exc)) from None
        return reset

    async def _open_storage(self, cfg: Config) -> bool:
        """The database opened and what is live loaded from it; whether the daemon before this
        one stopped in order."""
        await self.store.open()
        await self.executor.run(self.referee.load)
        clean = cfg.ephemeral_keys or await self.executor.run(take_clean_stop, self.store)
        self.events.run_id = await self.executor.run(instance_id, self.store, self.events.run_id)
        self.tracing.start(cfg)
        return clean

    async def _open_listeners(self, cfg: Config) -> int:
        """The TCP listener, the network listener (if any), then the admin socket; the bound port."""
        self.app = build_app(self.services)
        self.guard = ConnectionGuard(
            header_timeout_secs=cfg.header_timeout_secs, max_per_uid=cfg.max_connections_per_uid
        )
        self._runner = PolicedRunner(
            self.app,
            policy=self.guard,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=10.0,
            keepalive_timeout=cfg.keepalive_timeout_secs,
        )
        await self._runner.setup()
        # A deep accept queue: a flood of connections must not push /health's SYN out of it.
        site = web.TCPSite(self._runner, cfg.bind, cfg.port, reuse_address=True, backlog=4096)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            raise StartupError(f"failed to bind port {cfg.port}: {exc.strerror or exc}") from None
        try:
            self.lifecycle.network_port = await start_network_listener(cfg, self.executor, self._runner)
            try:
                await self.admin.start()
            except AdminSocketError as exc:
                raise StartupError(str(exc)) from None
        except StartupError:
            await self._runner.cleanup()
            self._runner = None
            raise
        return bound_port(site) or cfg.port

    async def _say_started(self, cfg: Config, clean: bool) -> None:
        """Where it listens; a check of the whole database after a crash (in the background); and
        a missing registry."""
        log.info(
            "listening",
            bind=cfg.bind,
            port=self.lifecycle.port,
            listen=cfg.listen,
            network_port=self.lifecycle.network_port,
            sessions=len(self.table.sessions),
            running=self.table.running,
            key_id=self.key_holder.ring.key_id,
            ephemeral_keys=cfg.ephemeral_keys,
        )
        if not clean:
            self.lifecycle.spawn(
                check_after_unclean_stop(self.store, self.executor, cfg.db_path, self.lifecycle.state_damaged)
            )
        if not await self.executor.run(cfg.registry_path.is_dir):
            # Not fatal (a registry may be mounted later), but every spawn would fail: say so now.
            log.warning(
                "registry_missing",
                registry_path=str(cfg.registry_path),
                fix="create it or set registry_path; 'roostctl doctor' checks it",
            )

    # -- stopping ------------------------------------------------------------------------------
    async def stop(self) -> None:
        self.lifecycle.begin_stop()
        await self.admin.stop()
        self.lifecycle.cancel_background()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        for service in (self.session_watch, self.launcher, self.peer_plane, self.relay):
            try:
                await service.stop()
            except Exception:
                log.exception("service_stop_failed", service=type(service).__name__)
        await self.probes.stop()
        await self.tracing.stop()
        await self.a2a.close()
        if self.peer_auth is not None:
            await self.peer_auth.close()
        await self.traces.close_all()
        if not self.settings.config.ephemeral_keys:
            with contextlib.suppress(StoreError):
                await self.store.commit([clean_stop_op(self.clock())])
        await self.store.close()
        self.executor.shutdown()
        self.state_lock.release()


@contextlib.contextmanager
def _state_read(db_path: Path) -> Iterator[None]:
    """A state database that cannot be read, or that SQLite reports as damaged, as the one
    start-up sentence for it (damage has its own exit code)."""
    try:
        yield
    except StoreDamaged as exc:
        raise damaged_database(db_path, exc.detail) from None
    except StoreTooNew as exc:
        raise newer_database(db_path, exc.found, exc.known) from None
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            raise damaged_database(db_path, str(exc)) from None
        raise StartupError(f"the state database {db_path} cannot be read: {exc}") from None
    except StoreError as exc:
        raise StartupError(str(exc)) from None
