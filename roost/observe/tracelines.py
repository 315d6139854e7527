"""``trace.jsonl`` lines: the envelope order, token redaction, and an append-only writer.

A session's trace lives at ``<workdir>/.murmur/<session_id>/trace.jsonl``. Both the session's
own host (``roost-capsule``) and the daemon append to it (``delegation_start``, ``a2a_send``,
``peer_handle_*`` lines), so every line is written with one ``write`` on an ``O_APPEND``
descriptor, which keeps concurrent writers from interleaving.

Every line starts with ``event_type, event_id, parent_id, session_id, timestamp`` in that order
(the trace format's guarantee). ``parent_id`` of a line the daemon writes is the session node: the ``event_id`` of
that file's ``session_start`` line, or ``null`` when the file has none.

No token may reach a trace: every string is scanned for ``mh1.``/``msc1.``/``msa1.`` tokens and
each is replaced with ``<handle:ID>`` / ``<token:ID>`` before the line is serialised.
"""

from __future__ import annotations

import enum
import json
import os
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import orjson

from roost.core.ids import event_id, identifier_problem, token_id
from roost.system.fsutil import open_append_at, open_beneath, owner_for

__all__ = [
    "SESSION_NODE",
    "TRACE_FILE",
    "TraceWriter",
    "append_lines",
    "build_line",
    "read_trace",
    "records_dir",
    "redact",
    "redact_text",
    "trace_path",
]

TRACE_FILE = "trace.jsonl"

_HANDLE_RE = re.compile(r"mh1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
# Every other family the daemon mints: credentials, approvals, node-keeper tokens and the
# registration approvals of top-level jobs on other nodes (roost/services/launcher/tickets.py).
_SPAWN_TOKEN_RE = re.compile(r"(?:ms[ca]1|mnk1|mra1)\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


def redact_text(text: str) -> str:
    """Replace every token in ``text`` with its id; a bare ``mh1`` word is left alone."""
    if "1." not in text:
        return text
    text = _HANDLE_RE.sub(lambda m: f"<handle:{token_id(m.group(0))}>", text)
    return _SPAWN_TOKEN_RE.sub(lambda m: f"<token:{token_id(m.group(0))}>", text)


def redact(value: object) -> object:
    """Recursively redact tokens from every string inside a JSON-like value."""
    if type(value) is str:  # "1." is redact_text's first test: the usual field has none, and no token
        return value if "1." not in value else redact_text(value)
    kind = type(value)
    if value is None or kind is int or kind is bool or kind is float:  # before the Mapping test, an ABC's
        return value
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


def records_dir(workdir: str | os.PathLike[str], session_id: str) -> Path:
    """``<workdir>/.murmur/<session_id>``: a session's records directory.

    Never built from an id that fails the identifier grammar (a ``ValueError``, not a path).
    """
    problem = identifier_problem(session_id)
    if problem is not None:
        raise ValueError(f"session_id {problem}")
    return Path(workdir) / ".murmur" / session_id


def trace_path(workdir: str | os.PathLike[str], session_id: str) -> Path:
    return records_dir(workdir, session_id) / TRACE_FILE


def build_line(
    event_type: str,
    session_id: str,
    parent_id: str | None,
    payload: Mapping[str, object],
    *,
    timestamp_ms: int | None = None,
    evt_id: str | None = None,
) -> tuple[str, bytes]:
    """Return ``(event_id, encoded line)`` with the five envelope fields first, payload redacted."""
    eid = evt_id or event_id()
    line: dict[str, object] = {
        "event_type": event_type,
        "event_id": eid,
        "parent_id": parent_id,
        "session_id": session_id,
        "timestamp": int(time.time() * 1000) if timestamp_ms is None else timestamp_ms,
    }
    for key, val in payload.items():
        if key in line:
            raise ValueError(f"payload field '{key}' collides with the trace envelope")
        line[key] = redact(val)
    return eid, orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)


def _open_append(workdir: str, session_id: str, uid: int | None) -> int:
    """The trace file for appending: ``.murmur/<sid>/`` made beneath the workdir's descriptor,
    no link followed on the way (a planted ``.murmur`` link is refused), new entries given to
    the session's uid."""
    owner = owner_for(uid)
    dfd = open_beneath(workdir, (".murmur", session_id), create=True, owner=owner)
    try:
        return open_append_at(dfd, TRACE_FILE, owner=owner)
    finally:
        os.close(dfd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _session_node(fd: int) -> tuple[str | None, bool]:
    """The ``event_id`` of the file's ``session_start`` line (its first line), and whether that
    answer is final: once the first line is complete, it never changes. Read through the
    already-open (append) descriptor's path in /proc, so no link is followed."""
    try:
        first_fd = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None, False
    try:
        with open(first_fd, "rb") as fh:
            first = fh.readline(1 << 20)
    except OSError:
        return None, False
    if not first.endswith(b"\n"):
        return None, False
    try:
        obj = json.loads(first)
    except ValueError:
        return None, True
    if isinstance(obj, dict) and obj.get("event_type") == "session_start":
        eid = obj.get("event_id")
        return (eid if isinstance(eid, str) else None), True
    return None, True


def read_trace(path: str | os.PathLike[str]) -> list[dict[str, object]]:
    """Every parseable line of a trace file, in order (for tests and ``roostctl``)."""
    out: list[dict[str, object]] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for raw in fh:
                raw = raw.strip()
                if raw:
                    out.append(json.loads(raw))
    except FileNotFoundError:
        return []
    return out


class _Parent(enum.Enum):
    SESSION_NODE = 0


SESSION_NODE = _Parent.SESSION_NODE


class TraceWriter:
    """Appends lines to one session's trace. Blocking: call it through the daemon's executor.

    The writer that owns the session (the capsule host) passes ``session_node`` explicitly once
    it has written ``session_start``; a foreign writer (the daemon) discovers it from the file.
    The ``O_APPEND`` descriptor stays open between lines (a relayed send would otherwise pay a
    mkdir, an open and a close for each); :meth:`close` releases it, and a file that was
    unlinked meanwhile is reopened by path rather than written into the void.
    """

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        session_id: str,
        *,
        session_node: str | None = None,
        fsync: bool = False,
        uid: int | None = None,
    ) -> None:
        self.session_id = session_id
        self.workdir = os.fspath(workdir)
        self.uid = uid
        self.path = trace_path(workdir, session_id)
        self._node = session_node
        self._node_known = session_node is not None
        self._fsync = fsync
        self._fd: int | None = None
        self._keep_open = True
        self._lock = threading.Lock()

    @property
    def session_node(self) -> str | None:
        return self._node

    def write(
        self,
        event_type: str,
        payload: Mapping[str, object],
        *,
        parent_id: str | _Parent | None = SESSION_NODE,
    ) -> str:
        """Append one line and return its ``event_id``.

        ``parent_id`` defaults to the session node; ``session_start`` passes ``None``.
        """
        with self._lock:
            parent: str | None
            fd = self._descriptor()
            if isinstance(parent_id, _Parent):
                if not self._node_known:
                    self._node, self._node_known = _session_node(fd)
                parent = self._node
            else:
                parent = parent_id
            eid, data = build_line(event_type, self.session_id, parent, payload)
            try:
                _write_all(fd, data)
                if self._fsync:
                    os.fsync(fd)
            finally:
                if not self._keep_open:
                    os.close(fd)
                    self._fd = None
            if event_type == "session_start":
                self._node = eid
                self._node_known = True
            return eid

    def _descriptor(self) -> int:
        fd = self._fd
        if fd is not None and os.fstat(fd).st_nlink > 0:
            return fd
        if fd is not None:
            os.close(fd)
            self._fd = None
            self._node, self._node_known = None, False
        self._fd = _open_append(self.workdir, self.session_id, self.uid)
        return self._fd

    def close(self) -> None:
        """Release the descriptor; a later write still works, opening and closing the file itself."""
        with self._lock:
            self._keep_open = False
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def append_lines(
    workdir: str | os.PathLike[str],
    session_id: str,
    lines: list[tuple[str, Mapping[str, object]]],
    *,
    uid: int | None = None,
) -> list[str]:
    """Append a batch of foreign lines (the daemon's) to a session's trace, in order; their event
    ids. Blocking. One open for the batch, one ``write`` per line, each parented to the session
    node: how a node keeper writes the lines the daemon sends it for a session on its node."""
    writer = TraceWriter(workdir, session_id, uid=uid)
    try:
        return [writer.write(event_type, payload) for event_type, payload in lines]
    finally:
        writer.close()
