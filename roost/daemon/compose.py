"""The daemon process: wires config, keys, store, registry and referee, serves, and stops cleanly.

Start-up order: state dir (owner-only) → key ring → SQLite (WAL) → load sessions → bind →
announce. Stop: SIGTERM/SIGINT close the listener, let in-flight requests finish, flush the
store; a second signal forces the exit.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable

import structlog
from aiohttp import web

from a2a.client import A2AClient
from roost.admin.bridge import JobSources
from roost.admin.control import Control
from roost.admin.server import AdminServer, AdminSocketError, build_admin_app
from roost.backends.choose import process_backend
from roost.backends.jobnodes import JobNodes
from roost.backends.local.sessionfiles import LocalSessionFiles
from roost.backends.ray.doors import DoorCaller, DoorRoutes
from roost.backends.workdirplace import RegisteredWorkdirs
from roost.core.egress import own_listeners
from roost.daemon.lifecycle import Lifecycle
from roost.daemon.network import check_listeners, listeners, start_network_listener
from roost.daemon.startup import (
    StartupError,
    StateLock,
    check_after_unclean_stop,
    check_key_file,
    clean_stop_op,
    damaged_database,
    instance_id,
    prepare_state_dir,
    say_keys_reset,
    take_clean_stop,
)
from roost.http.app import build_app
from roost.http.context import Services
from roost.http.guard import ConnectionGuard
from roost.http.server import PolicedRunner, bound_port
from roost.observe.events import EventBus
from roost.observe.metrics import Metrics
from roost.observe.probes import Probes
from roost.observe.tracelines import TraceWriter
from roost.observe.tracesink import TraceFiles
from roost.services.artifactserve import keeper_token
from roost.services.launcher.jobdirs import JobDirs
from roost.services.launcher.service import Launcher, LaunchServices
from roost.services.peer.files import SessionFiles
from roost.services.peer.plane import PeerPlane
from roost.services.peerauth import PeerAuth
from roost.services.referee.service import Referee, wall_ms
from roost.services.relay import Relay
from roost.services.retention import Retention
from roost.services.sessionwatch import SessionWatch, observe_session_end
from roost.state.config import Config
from roost.state.keys import KeyFileError, KeyHolder, KeyRing
from roost.state.registry import Registry
from roost.state.sessions import SessionRecord, SessionTable
from roost.state.settings import Settings
from roost.state.store import Store, StoreDamaged, StoreError, is_damage
from roost.system.blocking import BlockingExecutor
from roost.system.hostaddrs import host_addresses

__all__ = ["Roost"]


log = structlog.get_logger("roost.daemon")


class Roost:
    """The composition root: builds every service with what it needs, starts and stops them in order.

    It holds no behaviour of its own; tests build it in-process with an injected clock and reach
    the services through its attributes."""

    def __init__(self, config: Config, *, clock: Callable[[], int] = wall_ms) -> None:
        self.clock = clock
        self.executor = BlockingExecutor()
        self.settings = Settings(config, executor=self.executor)
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
        backend = process_backend(
            config,
            self.executor,
            daemon_url=lambda: self.lifecycle.advertise_url,
            keeper_token=lambda node_id: keeper_token(self.key_holder.ring, node_id),
            live=lambda: self.settings.config,
        )
        # A registered workdir is checked on the disk of the host its session runs on
        # (a job on a Ray node: that node's), docs/security.md.
        workdirs = RegisteredWorkdirs(
            self.executor, backend, (lambda: self.launcher.jobs) if config.launcher == "ray" else None
        )
        self.referee = Referee(
            settings=self.settings,
            table=self.table,
            store=self.store,
            keys=self.key_holder,
            executor=self.executor,
            clock=clock,
            workdirs=workdirs.check,
        )
        self.settings.on_reload.append(self.referee.forget_resolved)
        self.events = EventBus(clock=clock)
        # A session whose child runs on another node has its trace there, and its door on that
        # node's loopback, reached through the node's keeper (docs/operations.md).
        nodes = JobNodes(backend, lambda: self.launcher.jobs) if config.launcher == "ray" else None
        doors = (
            DoorRoutes(backend, self.table, nodes.remote_dir, config.peer_timeout_secs)
            if nodes is not None and isinstance(backend, DoorCaller)
            else None
        )
        # One client (one connection pool) for every outbound A2A call the daemon makes.
        self.a2a = A2AClient(
            connect_timeout=5.0, total_timeout=config.peer_timeout_secs, route=doors.route if doors else None
        )
        self.traces = TraceFiles(self.executor, nodes)
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
            peer_auth=self.peer_auth,
        )
        self.referee.on_session_registered.append(self.relay.forget_doors)
        self.a2a.peer_check = self.relay.peer_refusal  # a send never reaches the daemon's own listeners
        # A session's exported files are read (and its fetches stored) where its workdir is:
        # this host, or the Ray node its job runs on.
        files: SessionFiles = LocalSessionFiles(self.executor)
        if config.launcher == "ray":
            from roost.backends.ray.peerfiles import RaySessionFiles

            files = RaySessionFiles.over(
                backend, files, lambda: self.launcher.jobs, timeout_secs=config.peer_timeout_secs
            )
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
            files=files,
        )
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
                backend=backend,
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

    # What tests and the launcher read of the daemon: each answers from the service that owns it.

    @property
    def config(self) -> Config:
        return self.settings.config

    @property
    def registry(self) -> Registry:
        return self.settings.registry

    @property
    def keys(self) -> KeyRing:
        return self.key_holder.ring

    @property
    def config_loader(self) -> Callable[[], Config] | None:
        return self.settings.loader

    @config_loader.setter
    def config_loader(self, loader: Callable[[], Config] | None) -> None:
        self.settings.loader = loader

    @property
    def stop_callback(self) -> Callable[[str], None] | None:
        return self.lifecycle.stop_callback

    @stop_callback.setter
    def stop_callback(self, callback: Callable[[str], None] | None) -> None:
        self.lifecycle.stop_callback = callback

    @property
    def port(self) -> int | None:
        return self.lifecycle.port

    @property
    def url(self) -> str:
        return self.lifecycle.url

    @property
    def stopping(self) -> bool:
        return self.lifecycle.stopping

    @property
    def network_port(self) -> int | None:
        return self.lifecycle.network_port

    @property
    def network_url(self) -> str | None:
        return self.lifecycle.network_url

    @property
    def advertise_url(self) -> str:
        return self.lifecycle.advertise_url

    def trace_writer(self, rec: SessionRecord) -> TraceWriter | None:
        return self.traces.writer(rec)

    async def start(self) -> None:
        """Start, or raise :class:`StartupError` (one sentence, its own exit code)."""
        try:
            await self._start()
        except StartupError:
            self.state_lock.release()
            raise

    async def _start(self) -> None:
        cfg = self.config
        check_listeners(cfg)
        # Nothing in the state directory is read or written before the lock is held, whatever
        # the mode: with --ephemeral-keys the key and the database are in memory, but the keeper
        # socket, admin.sock and jobs/ are still there, and a second daemon must not touch them.
        await self.executor.run(prepare_state_dir, cfg.state_dir)
        await self.executor.run(self.state_lock.acquire)
        reset = False
        if not cfg.ephemeral_keys:
            reset = await self.executor.run(check_key_file, cfg)
            try:
                await self.key_holder.load()
            except KeyFileError as exc:
                raise StartupError(str(exc)) from None
        try:
            await self.store.open()
            await self.executor.run(self.referee.load)
            clean = cfg.ephemeral_keys or await self.executor.run(take_clean_stop, self.store)
            self.events.run_id = await self.executor.run(instance_id, self.store, self.events.run_id)
            if reset:
                say_keys_reset(self.table.running, len(self.table.reservations), self.keys.key_id)
            for service in (self.relay, self.peer_plane, self.launcher, self.session_watch):
                await service.start()
        except StoreDamaged as exc:
            raise damaged_database(cfg.db_path, exc.detail) from None
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise damaged_database(cfg.db_path, str(exc)) from None
            raise StartupError(f"the state database {cfg.db_path} cannot be read: {exc}") from None
        except StoreError as exc:
            raise StartupError(str(exc)) from None
        for forever in (self.referee.expire_forever(), self.retention.run_forever()):
            self.lifecycle.spawn(forever)
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
        except StartupError:
            await self._runner.cleanup()
            self._runner = None
            raise
        # The admin socket, then the loop probes.
        try:
            await self.admin.start()
        except AdminSocketError as exc:
            await self._runner.cleanup()
            self._runner = None
            raise StartupError(str(exc)) from None
        await self.probes.start()
        self.lifecycle.port = bound_port(site) or cfg.port
        own = listeners(cfg, self.lifecycle.port, self.lifecycle.network_port)
        self.relay.own = own_listeners(own, await self.executor.run(host_addresses))
        log.info(
            "listening",
            bind=cfg.bind,
            port=self.port,
            listen=cfg.listen,
            network_port=self.network_port,
            sessions=len(self.table.sessions),
            running=self.table.running,
            key_id=self.keys.key_id,
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
        await self.a2a.close()
        if self.peer_auth is not None:
            await self.peer_auth.close()
        await self.traces.close_all()
        if not self.config.ephemeral_keys:
            with contextlib.suppress(StoreError):
                await self.store.commit([clean_stop_op(self.clock())])
        await self.store.close()
        self.executor.shutdown()
        self.state_lock.release()
