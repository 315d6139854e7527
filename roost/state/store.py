"""Durable state in SQLite (WAL), written by group commit through the daemon's executor.

The daemon keeps its working state in memory and makes every change durable *before* it
answers: handlers append their writes and await :meth:`Store.commit`. Writes that arrive while
a transaction is being flushed are gathered into the next one, so fifty concurrent requests
cost one fsync instead of fifty. ``synchronous=FULL``: a committed answer survives a crash of
the daemon or of the machine.

With ``path=None`` (``--ephemeral-keys``) the database is in memory: a restart forgets
everything, as upstream does.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import structlog

from roost.system.blocking import BlockingExecutor

__all__ = ["MIGRATIONS", "Op", "Store", "StoreConflict", "StoreDamaged", "StoreError", "StoreTooNew", "is_damage"]

T = TypeVar("T")
Op = tuple[str, Sequence[Any]]


BEHIND_DELAY = 0.02


class StoreError(RuntimeError):
    """The state database could not be read or written."""


class StoreDamaged(StoreError):
    """SQLite says the database file is damaged (or is not a database)."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


class StoreTooNew(StoreError):
    """The database's schema is newer than this release knows: a newer daemon wrote it, and
    opening it here could misread or damage what that one stored."""

    def __init__(self, found: int, known: int) -> None:
        super().__init__(f"schema {found}, this release knows up to {known}")
        self.found = found
        self.known = known


class StoreConflict(StoreError):
    """A write broke a uniqueness constraint (the row is already there)."""


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    """SQLite's own verdict that the file is damaged or is not a database at all."""
    name = getattr(exc, "sqlite_errorname", "")
    if name:
        return bool(name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")))
    return type(exc) is sqlite3.DatabaseError  # "database disk image is malformed" carries no name


def _failure(exc: sqlite3.DatabaseError, what: str) -> StoreError:
    """The store's error for what SQLite raised: damage, a uniqueness conflict, or anything else."""
    message = f"the state database could not be {what}: {exc}"
    if is_damage(exc):
        return StoreDamaged(message, str(exc))
    if isinstance(exc, sqlite3.IntegrityError):
        return StoreConflict(message)
    return StoreError(message)


# Each entry upgrades the schema by one version; never edit a shipped entry, append one.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS sessions (
        session_id      TEXT PRIMARY KEY,
        name            TEXT NOT NULL,
        version         TEXT NOT NULL,
        sha256          TEXT NOT NULL,
        status          TEXT NOT NULL,
        parent_id       TEXT,
        depth_remaining INTEGER NOT NULL,
        envelope        TEXT NOT NULL,
        manifest        TEXT NOT NULL,
        trust           TEXT NOT NULL,
        cred_nonce      TEXT NOT NULL,
        handle_salt     TEXT NOT NULL,
        workdir         TEXT,
        pid             INTEGER,
        pid_start       REAL,
        capsule_url     TEXT,
        job_id          TEXT,
        created_ms      INTEGER NOT NULL,
        ended_ms        INTEGER
    );
    CREATE INDEX IF NOT EXISTS sessions_parent ON sessions(parent_id);
    CREATE INDEX IF NOT EXISTS sessions_status ON sessions(status);
    CREATE TABLE IF NOT EXISTS reservations (
        jti        TEXT PRIMARY KEY,
        parent_id  TEXT NOT NULL,
        name       TEXT NOT NULL,
        version    TEXT NOT NULL,
        sha256     TEXT NOT NULL,
        depth      INTEGER NOT NULL,
        trust      TEXT NOT NULL,
        exp_ms     INTEGER NOT NULL,
        job_id     TEXT
    );
    CREATE TABLE IF NOT EXISTS spent (jti TEXT PRIMARY KEY, exp_ms INTEGER NOT NULL);
    """,
    # 2: the launcher's jobs (roost/core/jobs.py documents the columns).
    """
    CREATE TABLE IF NOT EXISTS jobs (
        job_id         TEXT PRIMARY KEY,
        delegation_id  TEXT NOT NULL,
        name           TEXT NOT NULL,
        version        TEXT NOT NULL,
        sha256         TEXT NOT NULL,
        parent_id      TEXT,
        parent_workdir TEXT,
        session_id     TEXT,
        capsule_url    TEXT,
        workdir        TEXT NOT NULL,
        state          TEXT NOT NULL,
        pid            INTEGER,
        pid_start      REAL,
        trust          TEXT NOT NULL,
        deadline_secs  REAL NOT NULL,
        handle         TEXT,
        created_ms     INTEGER NOT NULL,
        ready_ms       INTEGER,
        ended_ms       INTEGER,
        exit_status    TEXT,
        outcome        TEXT,
        reason         TEXT,
        stop_reason    TEXT,
        delivery       TEXT NOT NULL DEFAULT 'none',
        start_written  INTEGER NOT NULL DEFAULT 0,
        end_written    INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
    CREATE INDEX IF NOT EXISTS jobs_parent ON jobs(parent_id);
    """,
    # 3: reservations become an append-only journal, one row per write-behind batch
    # (roost/services/referee/reservelog.py says why); pending slots carry over.
    """
    CREATE TABLE IF NOT EXISTS reservation_log (
        seq        INTEGER PRIMARY KEY,
        max_exp_ms INTEGER NOT NULL,
        granted    BLOB NOT NULL,
        released   BLOB NOT NULL
    );
    INSERT INTO reservation_log (max_exp_ms, granted, released)
        SELECT max(exp_ms),
               json_group_array(json_array(jti, parent_id, name, version, sha256, depth, trust, exp_ms, job_id)),
               '[]'
        FROM reservations HAVING count(*) > 0;
    DROP TABLE reservations;
    """,
    # 4: the uid behind each session (who registered it; children inherit it) and each job.
    """
    ALTER TABLE sessions ADD COLUMN uid INTEGER;
    ALTER TABLE jobs ADD COLUMN uid INTEGER;
    """,
    # 5: retention deletes by age (roost/services/retention.py) without scanning the tables.
    """
    CREATE INDEX IF NOT EXISTS sessions_ended ON sessions(ended_ms) WHERE ended_ms IS NOT NULL;
    CREATE INDEX IF NOT EXISTS jobs_ended ON jobs(ended_ms) WHERE ended_ms IS NOT NULL;
    CREATE INDEX IF NOT EXISTS spent_exp ON spent(exp_ms);
    """,
    # 6: the containment class each session's host achieved (told at register; NULL: not told).
    """
    ALTER TABLE sessions ADD COLUMN containment TEXT;
    """,
    # 7: why a session ended, when something other than its own deregistration ended it.
    """
    ALTER TABLE sessions ADD COLUMN end_reason TEXT;
    """,
    # 8: the node a job's child runs on (JSON {node_id, address}; NULL: this host).
    """
    ALTER TABLE jobs ADD COLUMN node TEXT;
    """,
    # 9: the W3C traceparent naming the job's span (roost/observe/jobspans.py; NULL: none).
    """
    ALTER TABLE jobs ADD COLUMN traceparent TEXT;
    """,
    # 10: the formation a session and a job belong to (MURMUR_FORMATION_ID; NULL: none).
    """
    ALTER TABLE sessions ADD COLUMN formation_id TEXT;
    ALTER TABLE jobs ADD COLUMN formation_id TEXT;
    """,
    # 11: the uid an operator's job runs as when it is not its owner's (config run_as).
    """
    ALTER TABLE jobs ADD COLUMN run_uid INTEGER;
    """,
    # 12: the (device, inode) of a session's workdir as checked at register (NULL: not taken),
    # so a session reloaded after a restart still refuses a workdir swapped for another.
    """
    ALTER TABLE sessions ADD COLUMN workdir_dev INTEGER;
    ALTER TABLE sessions ADD COLUMN workdir_ino INTEGER;
    """,
]

# The WAL is truncated back to this after each checkpoint, whatever its high-water mark was.
JOURNAL_SIZE_LIMIT = 8 * 1024 * 1024
BUSY_TIMEOUT_MS = 30_000


def _checkpoint(conn: sqlite3.Connection, wal: Path) -> None:
    """Blocking (the store's lock held): a passive checkpoint, then a non-waiting ``TRUNCATE``
    one when every frame was copied but the file is still larger than ``JOURNAL_SIZE_LIMIT``."""
    busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    if busy or frames != copied:
        return  # a reader still needs frames the database does not hold yet
    try:
        size = wal.stat().st_size
    except FileNotFoundError:
        return
    if size <= JOURNAL_SIZE_LIMIT:
        return
    conn.execute("PRAGMA busy_timeout=0")
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorname", "") not in ("SQLITE_BUSY", "SQLITE_LOCKED"):
            raise
    finally:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")


class Store:
    """One SQLite connection, used only from executor threads, behind a lock."""

    def __init__(self, path: Path | None, executor: BlockingExecutor) -> None:
        self._path = path
        self._executor = executor
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._pending: list[tuple[list[Op], asyncio.Future[None]]] = []
        self._behind: list[Op] = []
        self._sources: list[Callable[[], list[Op]]] = []
        self._sources_dirty = False
        self._behind_timer: asyncio.TimerHandle | None = None
        self._flushing = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed = False
        self._synced = True  # the connection's synchronous mode is FULL

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        await self._executor.run(self._open_sync)

    def _open_sync(self) -> None:
        if self._path is None:
            target = ":memory:"
        else:
            self._path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            target = str(self._path)
        try:
            conn = sqlite3.connect(target, check_same_thread=False, isolation_level=None, timeout=30)
            conn.row_factory = sqlite3.Row
            if self._path is not None:
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"the state database {self._path} could not switch to WAL mode")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            self._migrate(conn)
        except sqlite3.DatabaseError as exc:
            message = f"the state database {self._path or ':memory:'} is unusable: {exc}"
            if is_damage(exc):
                raise StoreDamaged(message, str(exc)) from None
            raise StoreError(message) from None
        if self._path is not None:
            for suffix in ("", "-wal", "-shm"):
                p = Path(str(self._path) + suffix)
                if p.exists():
                    p.chmod(0o600)
        self._conn = conn

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            conn.close()
            raise StoreTooNew(int(version), len(MIGRATIONS))
        for idx in range(version, len(MIGRATIONS)):
            conn.execute("BEGIN IMMEDIATE")
            for stmt in _split_sql(MIGRATIONS[idx]):
                conn.execute(stmt)
            conn.execute(f"PRAGMA user_version={idx + 1}")
            conn.execute("COMMIT")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._behind_timer is not None:
            self._behind_timer.cancel()
            self._behind_timer = None
        if (self._behind or self._sources_dirty) and not self._flushing:
            self._start_flush()
        await self._idle.wait()
        conn = self._conn
        if conn is not None:
            await self._executor.run(conn.close)
        self._conn = None

    # -- reads -----------------------------------------------------------------------------
    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run a read-only function against the connection in the executor."""
        return await self._executor.run(self._read_sync, fn)

    def _read_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._require()
        with self._lock:
            try:
                return fn(conn)
            except sqlite3.DatabaseError as exc:
                raise _failure(exc, "read") from None

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Blocking convenience for startup loading."""
        conn = self._require()
        with self._lock:
            try:
                return list(conn.execute(sql, params).fetchall())
            except sqlite3.DatabaseError as exc:
                raise _failure(exc, "read") from None

    def quick_check_sync(self) -> str | None:
        """Blocking: SQLite's ``quick_check`` of the whole file on a read-only connection of its
        own (so the daemon's writes go on meanwhile); None when it is sound, else what it found."""
        if self._path is None:
            return None
        try:
            conn = sqlite3.connect(f"file:{self._path}?mode=ro", uri=True, check_same_thread=False, timeout=30)
        except sqlite3.DatabaseError as exc:
            return str(exc)
        try:
            found = [str(row[0]) for row in conn.execute("PRAGMA quick_check(5)").fetchall()]
        except sqlite3.DatabaseError as exc:
            return str(exc)
        finally:
            conn.close()
        return None if found == ["ok"] else "; ".join(" ".join(line.split()) for line in found)

    # -- writes ----------------------------------------------------------------------------
    async def commit(self, ops: Iterable[Op]) -> None:
        """Make ``ops`` durable in one transaction shared with any concurrent callers."""
        batch = list(ops)
        if not batch:
            return
        if self._closed:
            raise StoreError("the state database is closed")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((batch, fut))
        if not self._flushing:
            if self._behind_timer is not None:
                self._behind_timer.cancel()
                self._behind_timer = None
            self._start_flush()
        await fut

    def enqueue(self, ops: Iterable[Op]) -> None:
        """Write-behind: make ``ops`` durable soon (within ``BEHIND_DELAY``) without waiting.

        For records whose loss in a crash is harmless (a pending approval's slot, which expires
        within 60 s anyway); a clean stop still flushes them. Gathering them for a few
        milliseconds turns a storm of grants into a few large transactions instead of many
        small ones competing with the event loop for the interpreter. Failures are logged.
        """
        if self._closed:
            return
        self._behind.extend(ops)
        if self._behind and not self._flushing and self._behind_timer is None:
            self._behind_timer = asyncio.get_running_loop().call_later(BEHIND_DELAY, self._kick)

    def attach_behind(self, drain: Callable[[], list[Op]]) -> None:
        """Register a write-behind source: ``drain`` is called at each flush for its ops."""
        self._sources.append(drain)

    def wake_behind(self) -> None:
        """An attached source has something to write: flush within ``BEHIND_DELAY``."""
        if self._closed:
            return
        self._sources_dirty = True
        if not self._flushing and self._behind_timer is None:
            self._behind_timer = asyncio.get_running_loop().call_later(BEHIND_DELAY, self._kick)

    def _take_behind(self) -> list[Op]:
        behind, self._behind = self._behind, []
        if self._sources_dirty:
            self._sources_dirty = False
            for drain in self._sources:
                behind.extend(drain())
        return behind

    def _kick(self) -> None:
        self._behind_timer = None
        if not self._flushing and (self._behind or self._sources_dirty or self._pending):
            self._start_flush()

    def _start_flush(self) -> None:
        self._flushing = True
        self._idle.clear()
        asyncio.get_running_loop().create_task(self._flush_loop())

    async def _flush_loop(self) -> None:
        try:
            while self._pending or self._behind or self._sources_dirty:
                group, self._pending = self._pending, []
                behind = self._take_behind()
                groups = ([behind] if behind else []) + [ops for ops, _ in group]
                if not groups:
                    continue
                try:
                    await self._executor.run(self._write_group, groups, bool(group))
                except StoreError:
                    # One caller's bad write must not fail its neighbours: retry each alone.
                    if behind:
                        try:
                            await self._executor.run(self._write_group, [behind], False)
                        except StoreError as exc:
                            structlog.get_logger("roost.store").error("write_behind_failed", error=str(exc))
                    for ops, fut in group:
                        try:
                            await self._executor.run(self._write_group, [ops])
                        except StoreError as exc:
                            if not fut.done():
                                fut.set_exception(exc)
                        else:
                            if not fut.done():
                                fut.set_result(None)
                    continue
                for _, fut in group:
                    if not fut.done():
                        fut.set_result(None)
                if not self._pending and not self._closed:
                    # Only write-behind arrived during that write: it waits for the next tick
                    # rather than chaining transactions back to back (under a storm of grants
                    # that was a transaction per millisecond instead of one per BEHIND_DELAY).
                    break
        finally:
            self._flushing = False
            self._idle.set()
            if (self._behind or self._sources_dirty) and not self._closed and self._behind_timer is None:
                self._behind_timer = asyncio.get_running_loop().call_later(BEHIND_DELAY, self._kick)

    async def prune(self, ops: Sequence[Op]) -> list[int]:
        """Run deletes in one transaction, without the fsync (a lost prune is simply redone);
        returns each statement's row count. Ordered after every commit already queued."""
        return [count for count, _ in await self.prune_rows(ops)]

    async def prune_rows(self, ops: Sequence[Op]) -> list[tuple[int, list[tuple[Any, ...]]]]:
        """As :meth:`prune`, with what each statement's ``RETURNING`` clause gave (empty without
        one) beside its row count."""
        if self._closed:
            raise StoreError("the state database is closed")
        return await self._executor.run(self._prune_sync, list(ops))

    def _prune_sync(self, ops: list[Op]) -> list[tuple[int, list[tuple[Any, ...]]]]:
        conn = self._require()
        with self._lock:
            counts: list[tuple[int, list[tuple[Any, ...]]]] = []
            try:
                if self._synced:
                    conn.execute("PRAGMA synchronous=NORMAL")
                    self._synced = False
                conn.execute("BEGIN IMMEDIATE")
                for sql, params in ops:
                    cur = conn.execute(sql, params)
                    rows = [tuple(row) for row in cur.fetchall()]
                    counts.append((len(rows) if rows else cur.rowcount, rows))
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                _roll_back(conn)
                raise _failure(exc, "written") from None
            return counts

    async def checkpoint(self) -> None:
        """Copy the WAL into the database, then bring the file back to at most
        ``journal_size_limit``.

        SQLite applies ``journal_size_limit`` only when a writer next restarts the WAL, so after
        a burst an idle daemon would keep the high-water file until its next commit; when the
        passive checkpoint copied every frame and the file is still over the limit, a
        ``TRUNCATE`` checkpoint empties it at once. It never waits: with the busy timeout at
        zero, a reader that arrived in between makes it give up (the next sweep tries again)."""
        if self._closed or self._path is None:
            return
        wal = Path(str(self._path) + "-wal")
        await self._executor.run(self._read_sync, lambda c: _checkpoint(c, wal))

    def write_sync(self, ops: Iterable[Op]) -> None:
        """Blocking single transaction (startup and shutdown paths only)."""
        self._write_group([list(ops)])

    def _write_group(self, groups: list[list[Op]], durable: bool = True) -> None:
        """One transaction. ``durable=False`` (write-behind only) skips the fsync: the WAL frames
        reach the kernel, so a daemon crash keeps them, and the next durable commit's fsync
        covers them too; only a machine crash in between can lose them, as write-behind allows.
        """
        conn = self._require()
        with self._lock:
            try:
                if durable != self._synced:
                    conn.execute("PRAGMA synchronous=FULL" if durable else "PRAGMA synchronous=NORMAL")
                    self._synced = durable
                conn.execute("BEGIN IMMEDIATE")
                for ops in groups:
                    _execute_runs(conn, ops)
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                _roll_back(conn)
                raise _failure(exc, "written") from None

    def _require(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("the state database is not open")
        return self._conn


def _roll_back(conn: sqlite3.Connection) -> None:
    """End a failed transaction; on a damaged file the rollback itself may fail too."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.DatabaseError):
            conn.execute("ROLLBACK")


def _execute_runs(conn: sqlite3.Connection, ops: list[Op]) -> None:
    """Execute ``ops`` in order, one ``executemany`` per run of the same statement."""
    i, n = 0, len(ops)
    while i < n:
        sql = ops[i][0]
        j = i + 1
        while j < n and ops[j][0] == sql:
            j += 1
        if j - i == 1:
            conn.execute(sql, ops[i][1])
        else:
            conn.executemany(sql, [params for _, params in ops[i:j]])
        i = j


def _split_sql(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]
