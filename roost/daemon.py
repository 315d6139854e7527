"""The daemon process: wires config, keys, store, registry and referee, serves, and stops cleanly.

Start-up order: state dir (owner-only) → key ring → SQLite (WAL) → load sessions → bind →
announce. Stop: SIGTERM/SIGINT close the listener, let in-flight requests finish, flush the
store; a second signal forces the exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sqlite3
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import psutil
import structlog
from aiohttp import web

from a2a.client import A2AClient
from roost import sdnotify
from roost.admin import control as admin_control
from roost.admin.server import AdminServer, AdminSocketError
from roost.artifacts import keeper_token
from roost.blocking import BlockingExecutor
from roost.config import Config
from roost.events import EventBus
from roost.http.app import build_app
from roost.http.guard import ConnectionGuard
from roost.http.server import PolicedRunner
from roost.keys import KEY_FILE_NAME, KeyFileError, KeyRing
from roost.launcher.service import Launcher
from roost.logs import configure_logging
from roost.metrics import Metrics
from roost.network import check_listeners, start_network_listener, url_for
from roost.peer.plane import PeerPlane
from roost.probes import Probes, status_line
from roost.raybackend.choose import process_backend
from roost.referee import Referee, wall_ms
from roost.registry import Registry
from roost.relay import Relay
from roost.retention import Retention
from roost.sessions import SessionRecord, SessionTable
from roost.sessionwatch import SessionWatch
from roost.startup import (
    EXIT_NO_KEY,
    StartupError,
    StateLock,
    damaged_database,
    prepare_state_dir,
)
from roost.store import Store, StoreDamaged, StoreError
from roost.trace import TraceWriter

__all__ = ["Roost", "StartupError", "run"]

# Serving allocates young objects fast and frees nearly all of them by reference counting, while
# what it keeps is a few large containers (pending slots under a flood: hundreds of thousands of
# items) that every full collection walks item by item, 30-40 ms at 500k slots, and that a new
# slot re-tracks into the youngest generation after each one. Collecting the young generation
# every 20,000 allocations instead of 700, and the oldest after 20 middle ones instead of 10, cuts
# those pauses from one every few seconds to one every few minutes under such a flood. A young
# reference cycle still goes at the next young collection (about a second under load); one that
# lived long enough to be promoted waits for a full one.
GC_THRESHOLDS = (20_000, 20, 20)

log = structlog.get_logger("roost.daemon")

# Trace files the daemon keeps open at once (one descriptor each); the least recently written
# is closed first, and simply reopened if it is written again.
MAX_OPEN_TRACES = 256


class Roost:
    """Everything one daemon instance holds. Tests build it in-process with an injected clock."""

    def __init__(self, config: Config, *, clock: Callable[[], int] = wall_ms) -> None:
        self.config = config
        self.clock = clock
        self.executor = BlockingExecutor()
        self.metrics = Metrics()
        self.table = SessionTable()
        self.registry = Registry(config.registry_path)
        self.keys: KeyRing = KeyRing.ephemeral()
        self.store = Store(None if config.ephemeral_keys else config.db_path, self.executor)
        self.state_lock = StateLock(config.state_dir)
        self.referee = Referee(
            config=config,
            table=self.table,
            store=self.store,
            registry=self.registry,
            keys=self.keys,
            executor=self.executor,
            clock=clock,
        )
        self.events = EventBus(clock=clock)
        # One client (one connection pool) for every outbound A2A call the daemon makes.
        self.a2a = A2AClient(connect_timeout=5.0, total_timeout=config.peer_timeout_secs)
        # Open trace writers, least recently used first; each holds one descriptor.
        self._traces: OrderedDict[str, TraceWriter] = OrderedDict()
        self.referee.on_session_end.append(self._close_trace)
        self.referee.on_session_end.append(self._observe_session_end)
        self.relay = Relay(self)
        self.peer_plane = PeerPlane(self)
        self.launcher = Launcher(
            self,
            process_backend(
                config,
                self.executor,
                daemon_url=lambda: self.advertise_url,
                keeper_token=lambda node_id: keeper_token(self.keys, node_id),
            ),
        )
        self.session_watch = SessionWatch(self)
        self.retention = Retention(self)
        self.app: web.Application | None = None
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self.network_port: int | None = None  # the ``listen`` listener's, when there is one
        self.started_at = time.time()
        self.admin = AdminServer(self)
        self.probes = Probes(self)
        self.stopping = False  # /readyz answers 503 from the moment a stop begins
        self.shutdown_event = asyncio.Event()  # ends admin streams so a stop is not held up by them
        self.background: set[asyncio.Task[Any]] = set()
        # Loop time at which a drain stops the daemon even with work left (None: wait for it).
        self.drain_deadline: float | None = None
        # Re-reads the config file on SIGHUP / POST /reload; None when there is nothing to re-read.
        self.config_loader: Callable[[], Config] | None = None
        self.stop_callback: Callable[[str], None] | None = None
        # Operator actions that must not interleave with themselves (roost/admin/control.py).
        self.rotate_lock = asyncio.Lock()
        self.reload_lock = asyncio.Lock()

    @staticmethod
    def process_start_time(pid: int | None) -> float | None:
        if pid is None:
            return None
        try:
            return float(psutil.Process(pid).create_time())
        except (psutil.Error, OSError):
            return None

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
        if not cfg.ephemeral_keys:
            # Nothing in the state directory is read or written before the lock is held.
            await self.executor.run(prepare_state_dir, cfg.state_dir)
            await self.executor.run(self.state_lock.acquire)
            reset = await self.executor.run(self._check_key_file)
            try:
                self.keys = await self.executor.run(KeyRing.load_or_create, cfg.state_dir)
            except KeyFileError as exc:
                raise StartupError(str(exc)) from None
            self.referee.keys = self.keys
        try:
            await self.store.open()
            await self.executor.run(self.referee.load)
            self.events.run_id = await self.executor.run(self._instance_id)
            if not cfg.ephemeral_keys and reset:
                self._say_what_the_reset_revoked()
            for service in (self.relay, self.peer_plane, self.launcher, self.session_watch):
                await service.start()
        except StoreDamaged as exc:
            raise damaged_database(cfg.db_path, exc.detail) from None
        except sqlite3.DatabaseError as exc:
            if _is_damage(exc):
                raise damaged_database(cfg.db_path, str(exc)) from None
            raise StartupError(f"the state database {cfg.db_path} cannot be read: {exc}") from None
        except StoreError as exc:
            raise StartupError(str(exc)) from None
        for forever in (self.referee.expire_forever(), self.retention.run_forever()):
            sweep = asyncio.get_running_loop().create_task(forever)
            self.background.add(sweep)
            sweep.add_done_callback(self.background.discard)
        self.app = build_app(self)
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
            self.network_port = await start_network_listener(self, self._runner)
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
        addresses = self._runner.addresses
        self.port = int(addresses[0][1]) if addresses else cfg.port
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
        if not await self.executor.run(cfg.registry_path.is_dir):
            # Not fatal (a registry may be mounted later), but every spawn would fail: say so now.
            log.warning(
                "registry_missing",
                registry_path=str(cfg.registry_path),
                fix="create it or set registry_path; 'roostctl doctor' checks it",
            )

    def _check_key_file(self) -> bool:
        """Refuse a database without its key file, unless ``--reset-keys``; True if resetting.

        A new key revokes every credential, approval and handle the database's sessions hold,
        so that is never done silently."""
        cfg = self.config
        has_key = (cfg.state_dir / KEY_FILE_NAME).exists()
        if has_key and not cfg.db_path.exists():
            # Not a refusal (a fresh database is harmless), but never silent: the state is gone.
            log.warning("state_database_missing", path=str(cfg.db_path), key_file=KEY_FILE_NAME)
            print(
                f"mur-roost: {cfg.db_path} is missing although {KEY_FILE_NAME} is there: starting with "
                "empty state (no sessions, jobs or spent approvals are known)",
                file=sys.stderr,
                flush=True,
            )
        if has_key or not cfg.db_path.exists():
            return False
        if cfg.db_path.stat().st_size == 0:
            return False
        if not cfg.reset_keys:
            raise StartupError(
                f"the state directory {cfg.state_dir} has a database (roost.db) but no {KEY_FILE_NAME}: a new "
                "key would revoke every credential, spawn approval and peer handle stored with it; restore "
                f"{KEY_FILE_NAME} from a backup, or pass --reset-keys to start with a new key anyway",
                EXIT_NO_KEY,
            )
        return True

    def _say_what_the_reset_revoked(self) -> None:
        running = self.table.running
        pending = len(self.table.reservations)
        log.warning("keys_reset", sessions_revoked=running, approvals_revoked=pending, key_id=self.keys.key_id)
        print(
            f"mur-roost: --reset-keys: started with a new key; the credentials of {running} running "
            f"session(s), {pending} pending spawn approval(s) and every peer handle are revoked",
            file=sys.stderr,
            flush=True,
        )

    def _instance_id(self) -> str:
        """The daemon instance id (``runId`` of every event), kept across restarts."""
        rows = self.store.rows("SELECT value FROM meta WHERE key = 'instance_id'")
        if rows:
            return str(rows[0]["value"])
        run_id = self.events.run_id
        self.store.write_sync([("INSERT INTO meta (key, value) VALUES ('instance_id', ?)", (run_id,))])
        return run_id

    def trace_writer(self, rec: SessionRecord) -> TraceWriter | None:
        """The writer for a session's ``trace.jsonl``; None when roost does not know its workdir."""
        if rec.workdir is None:
            return None
        writer = self._traces.get(rec.session_id)
        if writer is not None:
            self._traces.move_to_end(rec.session_id)
            return writer
        writer = self._traces[rec.session_id] = TraceWriter(rec.workdir, rec.session_id, uid=rec.uid)
        if len(self._traces) > MAX_OPEN_TRACES:
            _, evicted = self._traces.popitem(last=False)
            self.executor.submit(evicted.close)
        return writer

    async def _observe_session_end(self, rec: SessionRecord) -> None:
        """``roost.session.end``: every session end, with why (its own deregistration, a lapsed
        lease, the operator, its process gone)."""
        attrs: dict[str, Any] = {
            "roost.session.id": rec.session_id,
            "roost.session.capsule": rec.coordinates,
            "roost.session.status": rec.status,
            "roost.session.reason": rec.end_reason or "deregistered",
        }
        span = self.events.start("roost.session.end", subsystem="session", **attrs)
        span.completed()

    async def _close_trace(self, rec: SessionRecord) -> None:
        writer = self._traces.pop(rec.session_id, None)
        if writer is not None:
            await self.executor.run(writer.close)

    async def write_trace(self, rec: SessionRecord, event_type: str, payload: dict[str, object]) -> str | None:
        """Append one line to the session's trace through the executor; returns its event id."""
        writer = self.trace_writer(rec)
        if writer is None:
            return None
        try:
            return await self.executor.run(writer.write, event_type, payload)
        except OSError as exc:
            log.warning("trace_write_failed", session_id=rec.session_id, event_type=event_type, error=str(exc))
            return None

    @property
    def url(self) -> str:
        host = self.config.bind if ":" not in self.config.bind else f"[{self.config.bind}]"
        return f"http://{host}:{self.port}"

    @property
    def network_url(self) -> str | None:
        """The ``listen`` listener's URL (https with TLS), or None without one."""
        address = self.config.listen_address
        if address is None or self.network_port is None:
            return None
        return url_for(address[0], self.network_port, tls=self.config.tls_cert is not None)

    @property
    def advertise_url(self) -> str:
        """The URL children on other nodes are given: ``advertise_url``, else the local URL."""
        return self.config.advertise_url or self.url

    def request_stop(self, reason: str) -> None:
        """Ask the serving loop to stop (a finished drain); a no-op for in-process daemons."""
        log.info("stop_requested", reason=reason)
        if self.stop_callback is not None:
            self.stop_callback(reason)

    async def reload(self) -> dict[str, object]:
        """SIGHUP / ``POST /reload``: RELOADING=1, re-read config and registry, READY=1 again."""
        sdnotify.notify("RELOADING=1", f"MONOTONIC_USEC={time.monotonic_ns() // 1000}")
        try:
            return await admin_control.reload(self)
        finally:
            sdnotify.notify("READY=1", f"STATUS={status_line(self)}")

    async def stop(self) -> None:
        self.stopping = True
        self.shutdown_event.set()
        await self.admin.stop()
        for task in list(self.background):
            task.cancel()
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
        writers, self._traces = list(self._traces.values()), OrderedDict()
        for writer in writers:
            await self.executor.run(writer.close)
        await self.store.close()
        self.executor.shutdown()
        self.state_lock.release()


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
    """SQLite's own verdict that the file is damaged or not a database at all."""
    name = getattr(exc, "sqlite_errorname", "")
    if name:
        return name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))
    return not isinstance(exc, sqlite3.OperationalError)


async def _serve(config: Config, config_loader: Callable[[], Config] | None = None) -> int:
    roost = Roost(config)
    roost.config_loader = config_loader
    try:
        await roost.start()
    except StartupError as exc:
        print(f"mur-roost: {exc}", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            await roost.store.close()
        roost.executor.shutdown()
        return exc.exit_code
    # Everything loaded so far (modules, models, the restored table) lives as long as the
    # process: move it out of the collector's sight, so a full collection walks only what
    # serving creates and stays a short pause instead of tens of milliseconds.
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals_seen = 0
    # Both listeners are bound, so tell systemd we are ready.
    sdnotify.notify("READY=1", f"STATUS={status_line(roost)}", f"MAINPID={os.getpid()}")
    roost.probes.start_notifications()

    def on_stop_request(reason: str) -> None:
        roost.stopping = True
        sdnotify.notify("STOPPING=1")
        stop.set()

    roost.stop_callback = on_stop_request

    def on_hup() -> None:
        log.info("reload_requested", signal="SIGHUP")
        task = loop.create_task(roost.reload())
        roost.background.add(task)
        task.add_done_callback(roost.background.discard)

    loop.add_signal_handler(signal.SIGHUP, on_hup)

    def on_signal(signame: str) -> None:
        nonlocal signals_seen
        signals_seen += 1
        if signals_seen > 1:
            print("mur-roost: second signal, exiting now", file=sys.stderr, flush=True)
            os._exit(130)
        log.info("stopping", signal=signame)
        on_stop_request(signame)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    # Said once the signals are handled, so whoever waits for this line can stop us cleanly.
    print(f"mur-roost: listening on {config.bind}:{roost.port}", file=sys.stderr, flush=True)
    if roost.network_url is not None:
        print(f"mur-roost: listening for other hosts at {roost.network_url}", file=sys.stderr, flush=True)
    print(
        f"mur-roost: machine ceiling {config.max_live_capsules} live capsules (--max-live-capsules)",
        file=sys.stderr,
        flush=True,
    )
    await stop.wait()
    await roost.stop()
    log.info("stopped")
    return 0


def run(config: Config, config_loader: Callable[[], Config] | None = None) -> int:
    configure_logging(config.log_format, config.log_level)
    return asyncio.run(_serve(config, config_loader))
