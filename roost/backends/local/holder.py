"""The lifeline holder: a tiny process that holds the write end of every child's lifeline.

This module is the holder's side (the process ``python -m roost.backends.local.holder`` runs);
the daemon's side, which starts it, reaches it and talks to it, is
:mod:`roost.backends.local.lifeline`.

Why a separate process: a lifeline's reader sees EOF when
the last write end closes. If the daemon held the write ends, a ``kill -9`` of the daemon would
close them all and every child would wind down, so a restarted daemon would have nothing to
re-adopt. The holder holds them instead; the daemon passes each write end over a unix
``SOCK_SEQPACKET`` socket (``SCM_RIGHTS``) right after the spawn and drops its own copy. The
holder never writes to a pipe; it closes one when the daemon says so (the parent session
ended, or the child is gone) — that is the only way a lifeline ends while the holder lives.

* The holder runs in its own session (no terminal signal reaches it), imports only the
  standard library, and answers only peers of its own uid (``SO_PEERCRED``).
* A new holder waits for its first daemon as long as the process that started it lives (on a
  busy host the connect may come seconds after ``ready``).
* When the daemon's connection drops (a crash), it keeps every fd and waits for the next daemon
  to connect; a restarted daemon lists what is held and reconciles. While nobody is connected it
  drops entries whose process has gone (pid + start time from ``/proc``) and exits once it
  holds nothing, so a holder never outlives the children it exists for.
* ``SIGTERM`` (or the ``exit`` command, sent by an orderly daemon stop) closes everything.

Its names on disk and in logs are older than its name: the socket is ``<state-dir>/keeper.sock``,
its stderr goes to ``<state-dir>/keeper.log``, and its events are ``keeper_*`` from the logger
``roost.keeper``, and its errors' sentences say "the lifeline keeper" (operators' scripts, units
and log searches read them; they stay).

systemd: the holder and the children live in the unit's cgroup. ``KillMode=mixed`` sends the
stop SIGTERM to the daemon only (which ends its jobs in order and tells the holder to exit) and
SIGKILLs whatever remains. When the *main process dies*, systemd also cleans the cgroup before
``Restart=`` starts the next daemon, so under that unit a crash ends the children and the next
daemon's reconcile finalizes them (counted as ``lost``, each with exactly one completion).
Children outlive a daemon crash — and are re-adopted — when the daemon runs outside systemd or
under ``KillMode=process``.

Protocol (one JSON object per datagram): ``{"op": "hold", "key", "pid", "start"}`` with one fd;
``{"op": "close", "key"}``; ``{"op": "list", "id"}`` → ``{"id", "held": [{key, pid, start}]}``;
``{"op": "exit"}``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import selectors
import signal
import socket
import struct
import sys
from pathlib import Path

__all__ = ["MAX_MSG", "holder_address", "main"]

MAX_MSG = 64 * 1024
"""The largest datagram either side sends or reads."""


def holder_address(state_dir: Path) -> str:
    """``<state-dir>/keeper.sock``, or an abstract name derived from it when the path is too long."""
    path = str(state_dir / "keeper.sock")
    if len(path.encode()) < 100:
        return path
    return "\0mur-roost-keeper-" + hashlib.sha256(str(state_dir).encode()).hexdigest()[:32]


def _start_time(pid: int) -> float | None:
    """The process's start time in clock ticks since boot (field 22 of ``/proc/<pid>/stat``)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return float(fields[19])
    except (IndexError, ValueError):
        return None


class _Holder:
    def __init__(self, address: str) -> None:
        self.address = address
        self.held: dict[str, tuple[int, int, float | None, float | None]] = {}
        self.sel = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.conn: socket.socket | None = None
        self.stopping = False
        # Until a daemon has connected once, the holder waits for its starter however long
        # that takes (a busy host may take seconds from "ready" to connect); it gives up only
        # when the process that started it is gone.
        self.served = False
        self.starter = os.getppid()

    def bind(self) -> None:
        if not self.address.startswith("\0"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.address)
        self.listener.bind(self.address)
        if not self.address.startswith("\0"):
            os.chmod(self.address, 0o600)
        self.listener.listen(4)
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")

    def run(self) -> None:
        while not self.stopping:
            events = self.sel.select(timeout=1.0)
            for key, _ in events:
                if key.data == "accept":
                    self._accept()
                else:
                    self._read()
            if self.conn is None and (self.served or os.getppid() != self.starter):
                self._prune()
                if not self.held:
                    break
        self._close_all()

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        if uid != os.getuid():
            conn.close()
            return
        if self.conn is not None:
            # A newer daemon supersedes a connection that may be half-dead.
            self.sel.unregister(self.conn)
            self.conn.close()
        self.conn = conn
        self.served = True
        self.sel.register(conn, selectors.EVENT_READ, "conn")

    def _drop_conn(self) -> None:
        if self.conn is not None:
            self.sel.unregister(self.conn)
            self.conn.close()
            self.conn = None

    def _read(self) -> None:
        assert self.conn is not None
        try:
            data, fds, _flags, _addr = socket.recv_fds(self.conn, MAX_MSG, 4)
        except OSError:
            self._drop_conn()
            return
        if not data:
            for fd in fds:
                os.close(fd)
            self._drop_conn()
            return
        try:
            msg = json.loads(data)
        except ValueError:
            msg = {}
        op = msg.get("op")
        if op == "hold" and fds:
            key = str(msg.get("key"))
            self._close_key(key)
            start = msg.get("start")
            self.held[key] = (fds[0], int(msg.get("pid") or 0), start, _start_time(int(msg.get("pid") or 0)))
            for extra in fds[1:]:
                os.close(extra)
            return
        for fd in fds:
            os.close(fd)
        if op == "close":
            self._close_key(str(msg.get("key")))
        elif op == "list":
            held = [{"key": k, "pid": v[1], "start": v[2]} for k, v in self.held.items()]
            reply = json.dumps({"id": msg.get("id"), "held": held}).encode()
            with contextlib.suppress(OSError):
                self.conn.send(reply)
        elif op == "exit":
            self.stopping = True

    def _close_key(self, key: str) -> None:
        entry = self.held.pop(key, None)
        if entry is not None:
            os.close(entry[0])

    def _prune(self) -> None:
        for key, (_fd, pid, _start, ticks) in list(self.held.items()):
            if pid <= 0 or ticks is None or _start_time(pid) != ticks:
                self._close_key(key)

    def _close_all(self) -> None:
        for key in list(self.held):
            self._close_key(key)
        self._drop_conn()
        self.listener.close()
        if not self.address.startswith("\0"):
            with contextlib.suppress(OSError):
                os.unlink(self.address)


def _say(event: str, **fields: object) -> None:
    """One JSON line on stderr (``keeper.log``), shaped like the daemon's own error events; the
    holder imports only the standard library, so this is its whole logging."""
    line = {"event": event, "level": "error", "logger": "roost.keeper", **fields}
    sys.stderr.write(json.dumps(line, default=str) + "\n")
    sys.stderr.flush()


def _uncaught(kind: type[BaseException], exc: BaseException, tb: object) -> None:
    """An exception nobody caught is one line with its class: never a traceback, never its text."""
    _say("keeper_failed", error=kind.__name__)


def main(argv: list[str] | None = None) -> int:
    sys.excepthook = _uncaught
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        _say("keeper_usage", usage="python -m roost.backends.local.holder ADDRESS")
        return 2
    address = args[0].replace("@", "\0", 1) if args[0].startswith("@") else args[0]
    holder = _Holder(address)

    def on_term(signum: int, frame: object) -> None:
        holder.stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        holder.bind()
    except OSError as exc:
        _say("keeper_bind_failed", address=args[0], error=type(exc).__name__, detail=exc.strerror)
        return 1
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    with contextlib.suppress(OSError):
        os.close(1)
    holder.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
