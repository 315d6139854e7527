"""Start-up refusals: each a one-sentence reason and its own exit code (docs/operations.md).

A daemon that cannot start safely says why and exits with a code a supervisor can act on
(``RestartPreventExitStatus=`` in the unit stops a restart loop that could never succeed):

* ``EXIT_HELD``     (3) another live daemon holds the state directory (its pid is named);
* ``EXIT_STATE_DIR`` (4) the state directory is not a 0700 directory owned by the daemon's user;
* ``EXIT_DAMAGED``  (5) the state database is damaged (the sentence names the check to run);
* ``EXIT_NO_KEY``   (6) the database has state but the key file is gone (``--reset-keys``);
* ``EXIT_PLAINTEXT`` (7) a listener on a non-loopback address without TLS and without
  ``allow_plaintext_network`` (:mod:`roost.daemon.network`);
* ``EXIT_SCHEMA``   (8) the state database was written by a newer release (its schema is newer
  than this one knows): this daemon does not open it;
* ``EXIT_OTHER``    (1) anything else (a port in use, an unreadable key file, a bad config).

The lock is the first thing taken in the state directory, before the key, the database or the
lifeline holder's socket (``keeper.sock``) is touched, so a second daemon never reads or disturbs the first one's state.

Damage SQLite reports to any start-up query or write is ``EXIT_DAMAGED``. The whole file is
checked (``PRAGMA quick_check``) only after an unclean stop, and in the background once the
daemon is ready (:func:`check_after_unclean_stop`): its cost grows with the file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import structlog

from roost.state.config import Config
from roost.state.keys import KEY_FILE_NAME
from roost.state.repos.meta import MetaRepository
from roost.state.store import Op, Store
from roost.system.blocking import BlockingExecutor

__all__ = [
    "CLEAN_STOP_KEY",
    "EXIT_DAMAGED",
    "EXIT_HELD",
    "EXIT_NO_KEY",
    "EXIT_OTHER",
    "EXIT_PLAINTEXT",
    "EXIT_SCHEMA",
    "EXIT_STATE_DIR",
    "LOCK_FILE_NAME",
    "StartupError",
    "StateLock",
    "check_after_unclean_stop",
    "check_key_file",
    "clean_stop_op",
    "damaged_database",
    "instance_id",
    "prepare_state_dir",
    "say_keys_reset",
    "take_clean_stop",
]

log = structlog.get_logger("roost.daemon")  # what the daemon says while it starts

EXIT_OTHER: Final = 1
EXIT_HELD: Final = 3
EXIT_STATE_DIR: Final = 4
EXIT_DAMAGED: Final = 5
EXIT_NO_KEY: Final = 6
EXIT_PLAINTEXT: Final = 7
EXIT_SCHEMA: Final = 8
LOCK_FILE_NAME: Final = "roost.lock"
CLEAN_STOP_KEY: Final = "clean_stop"  # in ``meta``: the daemon before this one stopped in order


class StartupError(RuntimeError):
    """The daemon cannot start; the message is one sentence for the operator."""

    def __init__(self, message: str, exit_code: int = EXIT_OTHER) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def prepare_state_dir(path: Path) -> None:
    """Create the state directory (0700) if absent; refuse one that is not ours alone."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = path.lstat()
    except OSError as exc:
        raise StartupError(f"cannot use the state directory {path}: {exc.strerror or exc}", EXIT_STATE_DIR) from None
    if not stat.S_ISDIR(st.st_mode):
        raise StartupError(f"the state directory {path} is not a directory", EXIT_STATE_DIR)
    if st.st_uid != os.geteuid():
        raise StartupError(
            f"the state directory {path} belongs to uid {st.st_uid}, not to this daemon's uid {os.geteuid()}; "
            "roost keeps its keys there, so it must be the daemon's own",
            EXIT_STATE_DIR,
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode != 0o700:
        raise StartupError(
            f"the state directory {path} has mode {mode:04o}, not 0700; roost keeps its keys there, "
            f"so run 'chmod 700 {path}'",
            EXIT_STATE_DIR,
        )


class StateLock:
    """An exclusive ``flock`` on ``<state_dir>/roost.lock`` held for the daemon's lifetime.

    The file holds the holder's pid, so a refused second daemon can name it. The descriptor is
    close-on-exec: a child must never inherit the lock and keep a restarted daemon out.
    """

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_FILE_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StartupError(
                f"cannot open the lock file {self.path}: {exc.strerror or exc}", EXIT_STATE_DIR
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"pid {holder}" if holder else "a process whose pid it has not written yet"
            raise StartupError(
                f"the state directory {self.path.parent} is held by another running mur-roost ({who}); "
                "stop it first, or give this daemon its own --state-dir",
                EXIT_HELD,
            ) from None
        except OSError as exc:
            os.close(fd)
            raise StartupError(f"cannot lock {self.path}: {exc.strerror or exc}", EXIT_STATE_DIR) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        raw = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(raw) if raw.isdigit() else None


def newer_database(path: Path, found: int, known: int) -> StartupError:
    """The refusal for a database a newer release wrote."""
    return StartupError(
        f"the state database {path} was written by a newer mur-roost (schema {found}; this release knows up "
        f"to {known}), so it is not opened: run the release that wrote it, or restore the backup taken "
        "before the upgrade (docs/operations.md, Drain and upgrade)",
        EXIT_SCHEMA,
    )


def damaged_database(path: Path, detail: str) -> StartupError:
    """The refusal for a database SQLite reports as damaged."""
    return StartupError(
        f"the state database {path} is damaged ({detail}); check it with "
        f"\"sqlite3 {path} 'PRAGMA integrity_check'\" and restore it from a backup "
        "(docs/operations.md, Backup of the state dir)",
        EXIT_DAMAGED,
    )


def check_key_file(cfg: Config) -> bool:
    """Blocking: refuse a database without its key file, unless ``--reset-keys``; True if resetting.

    A new key revokes every credential, approval and handle the database's sessions hold,
    so that is never done silently."""
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


def say_keys_reset(running: int, pending: int, key_id: str) -> None:
    """Say what ``--reset-keys`` revoked: in the log and on stderr."""
    log.warning("keys_reset", sessions_revoked=running, approvals_revoked=pending, key_id=key_id)
    print(
        f"mur-roost: --reset-keys: started with a new key; the credentials of {running} running "
        f"session(s), {pending} pending spawn approval(s) and every peer handle are revoked",
        file=sys.stderr,
        flush=True,
    )


def take_clean_stop(store: Store) -> bool:
    """Blocking: whether the daemon before this one stopped in order (it left ``CLEAN_STOP_KEY``)
    or there was none (a new database). The mark is removed, so a crash from now on leaves none."""
    meta = MetaRepository(store)
    if meta.get_sync(CLEAN_STOP_KEY) is not None:
        meta.delete_sync(CLEAN_STOP_KEY)
        return True
    return meta.get_sync("instance_id") is None


def clean_stop_op(now_ms: int) -> Op:
    """The write an orderly stop makes last: the next start needs no check of the whole file."""
    return MetaRepository.set_op(CLEAN_STOP_KEY, str(now_ms))


async def check_after_unclean_stop(
    store: Store, executor: BlockingExecutor, path: Path, on_damage: Callable[[str], None]
) -> None:
    """SQLite's ``quick_check`` of the whole file, run after the daemon is ready (its cost grows
    with the file, and a start must not wait for it). Damage that a start-up query meets is
    already a refusal; this finds damage in pages no start-up query reads (history). Found
    damage is said in one sentence (stderr and the log) and ``on_damage`` gets it."""
    log.info("state_database_check_started", path=str(path), why="the previous daemon did not stop in order")
    started = time.monotonic()
    found = await executor.run(store.quick_check_sync)
    if found is None:
        log.info("state_database_checked", path=str(path), result="ok", secs=round(time.monotonic() - started, 3))
        return
    sentence = str(damaged_database(path, found))
    log.error("state_database_damaged", path=str(path), detail=found)
    print(f"mur-roost: {sentence}", file=sys.stderr, flush=True)
    on_damage(sentence)


def instance_id(store: Store, fresh: str) -> str:
    """Blocking: the daemon instance id (``runId`` of every event), kept across restarts; ``fresh``
    becomes it on the first start."""
    meta = MetaRepository(store)
    known = meta.get_sync("instance_id")
    if known is not None:
        return known
    meta.put_sync("instance_id", fresh)
    return fresh
