"""Admin routes that stream: observation events and a job's or session's log files, as NDJSON.

``GET /events?replay=N``           → ``{"events": [...]}``: the last N (default 100) kept events
``GET /events?follow=1&replay=N``  → chunked NDJSON: N kept events, then live ones as they happen;
                                     a reader too slow to keep up gets ``{"type": "events.lagged"}``
``GET /logs/{id}?tail=N``          → ``{"files": [...], "lines": [...]}``: the last N lines (default 100)
``GET /logs/{id}?follow=1&tail=N`` → chunked NDJSON ``{"file", "stream", "line"}`` objects, then new lines as
                                     they are written, until the job or session ends, the client
                                     leaves or the daemon stops

A child on another node (a job whose record names a node) has its files there: they are read
through the process backend (its node keeper), from offsets, never from this host's disk.

Why NDJSON over chunked HTTP rather than websockets or SSE: ``roostctl`` reads it with stdlib
``http.client`` line by line, and ``curl --unix-socket`` shows it as is.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections import deque
from pathlib import Path

from aiohttp import web

from roost.admin import bridge
from roost.admin.context import EVENTS, JOBS
from roost.backends.base import ChildDir
from roost.core.admin_models import EventList, LogLine, LogsAnswer, ObserveEvent
from roost.core.errors import BadRequest
from roost.core.ids import require_id
from roost.http.context import EXECUTOR, LIFECYCLE
from roost.services.launcher.childrecords import LOG_FILE, STDOUT_PREFIX
from roost.system.blocking import BlockingExecutor

__all__ = ["routes"]

routes = web.RouteTableDef()

FOLLOW_POLL_SECS = 0.25
_MAX_TAIL = 100_000
_MAX_LINE = 64 * 1024
_TAIL_BYTES = 256 * 1024  # of a remote file, per read


def _count(request: web.Request, key: str, default: int) -> int:
    raw = request.query.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{key} must be a whole number") from None
    if value < 0 or value > _MAX_TAIL:
        raise BadRequest(f"{key} must be between 0 and {_MAX_TAIL}")
    return value


def _follow(request: web.Request) -> bool:
    return request.query.get("follow", "0") not in ("0", "false", "")


def _line(obj: ObserveEvent | LogLine) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


async def _ndjson(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson", "Cache-Control": "no-store"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    return resp


@routes.get("/events")
async def events(request: web.Request) -> web.StreamResponse:
    bus = request.app[EVENTS]
    replay = _count(request, "replay", 100)
    if not _follow(request):
        listed: EventList = {"events": bus.recent(replay) if replay else []}
        return web.json_response(listed)
    sub = bus.subscribe(replay=replay)
    try:
        resp = await _ndjson(request)
        stop = request.app[LIFECYCLE].shutdown_event
        while not stop.is_set():
            getter = asyncio.ensure_future(sub.get())
            stopper = asyncio.ensure_future(stop.wait())
            done, _ = await asyncio.wait({getter, stopper}, timeout=15.0, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if getter in done:
                await resp.write(_line(getter.result()))
            else:
                getter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await getter
                if not done:
                    await resp.write(b"\n")  # keep-alive: an idle stream still proves the daemon is there
        with contextlib.suppress(ConnectionResetError):
            await resp.write_eof()
        return resp
    except (ConnectionResetError, asyncio.CancelledError):
        raise
    finally:
        sub.close()


_LAUNCHER_LOG = Path(LOG_FILE).name


def _item(path: Path, raw: bytes) -> LogLine:
    """One log line with the stream it came from: ``stderr`` or ``stdout`` (the launcher log marks
    stdout lines), ``result`` (the task's ``out/result.txt``), else the file's name."""
    text = raw[:_MAX_LINE].decode("utf-8", "replace").rstrip("\n")
    if path.name == _LAUNCHER_LOG:
        if text.startswith(STDOUT_PREFIX):
            return {"file": path.name, "stream": "stdout", "line": text[len(STDOUT_PREFIX) :]}
        return {"file": path.name, "stream": "stderr", "line": text}
    if path.name == "result.txt" and path.parent.name == "out":
        return {"file": path.name, "stream": "result", "line": text}
    return {"file": path.name, "stream": path.stem, "line": text}


def _tail(paths: list[Path], n: int) -> tuple[list[LogLine], dict[str, int]]:
    """Last ``n`` lines over all files (each file's last n, in file order) and each file's end offset."""
    lines: list[LogLine] = []
    ends: dict[str, int] = {}
    for path in paths:
        try:
            with open(path, "rb") as fh:
                last: deque[bytes] = deque(fh, maxlen=n) if n else deque()
                ends[str(path)] = fh.tell()
        except OSError:
            continue
        lines.extend(_item(path, raw) for raw in last)
    return lines[-n:] if n else [], ends


def _read_new(paths: list[Path], ends: dict[str, int]) -> list[LogLine]:
    out: list[LogLine] = []
    for path in paths:
        key = str(path)
        try:
            size = os.stat(path).st_size
        except OSError:
            continue
        pos = ends.get(key, 0)
        if size < pos:  # truncated or replaced: start over
            pos = 0
        if size == pos:
            continue
        with open(path, "rb") as fh:
            fh.seek(pos)
            chunk = fh.read(size - pos)
        cut = chunk.rfind(b"\n")
        if cut < 0:
            continue  # wait for the rest of the line
        ends[key] = pos + cut + 1
        for raw in chunk[: cut + 1].splitlines():
            out.append(_item(path, raw))
    return out


class _LocalLogs:
    """A job's or session's log files on this host, read through the executor."""

    def __init__(self, jobs: bridge.JobSources, executor: BlockingExecutor, ident: str) -> None:
        self._jobs, self._executor, self._ident = jobs, executor, ident
        self._ends: dict[str, int] = {}

    async def tail(self, n: int) -> tuple[list[str], list[LogLine]]:
        paths = await self._executor.run(bridge.log_paths, self._jobs, self._ident)
        lines, self._ends = await self._executor.run(_tail, paths, n)
        return [str(p) for p in paths], lines

    async def new(self) -> list[LogLine]:
        # New log files may appear (a session registers after its job starts).
        paths = await self._executor.run(bridge.log_paths, self._jobs, self._ident)
        return await self._executor.run(_read_new, paths, self._ends)


class _RemoteLogs:
    """The same files of a child on another node, read there through the process backend (nodes
    share no filesystem): from each file's offset, whole lines only."""

    def __init__(self, jobs: bridge.JobSources, executor: BlockingExecutor, ident: str, dir: ChildDir) -> None:
        self._jobs, self._executor, self._ident, self._dir = jobs, executor, ident, dir
        self._ends: dict[str, int] = {}

    async def _names(self) -> list[str]:
        _, rec = await self._executor.run(bridge.log_target, self._jobs, self._ident)
        return await bridge.remote_log_names(self._jobs, self._dir, rec)

    def _items(self, name: str, start: int, data: bytes, *, skip_first: bool) -> list[LogLine]:
        cut = data.rfind(b"\n")
        if cut < 0:
            self._ends[name] = start  # no whole line yet
            return []
        self._ends[name] = start + cut + 1
        raws = data[: cut + 1].splitlines()
        if skip_first and raws:
            raws = raws[1:]  # the tail began inside a line
        path = Path(self._dir.workdir) / name
        return [_item(path, raw) for raw in raws]

    async def tail(self, n: int) -> tuple[list[str], list[LogLine]]:
        backend = self._jobs.launcher.backend
        files: list[str] = []
        lines: list[LogLine] = []
        for name in await self._names():
            start, data = await backend.read_file(self._dir, name, -_TAIL_BYTES, _TAIL_BYTES)
            if not data:
                continue
            files.append(str(Path(self._dir.workdir) / name))
            items = self._items(name, start, data, skip_first=start > 0)
            lines.extend(items[-n:] if n else [])
        return files, lines[-n:] if n else []

    async def new(self) -> list[LogLine]:
        backend = self._jobs.launcher.backend
        out: list[LogLine] = []
        for name in await self._names():
            pos = self._ends.get(name, 0)
            start, data = await backend.read_file(self._dir, name, pos, _TAIL_BYTES)
            if data or start != pos:
                out.extend(self._items(name, start, data, skip_first=False))
        return out


@routes.get("/logs/{ident}")
async def logs(request: web.Request) -> web.StreamResponse:
    jobs, executor = request.app[JOBS], request.app[EXECUTOR]
    ident = require_id("ident", request.match_info["ident"])
    n = _count(request, "tail", 100)
    job, _ = await executor.run(bridge.log_target, jobs, ident)
    remote = bridge.remote_dir(job)
    source = _LocalLogs(jobs, executor, ident) if remote is None else _RemoteLogs(jobs, executor, ident, remote)
    files, lines = await source.tail(n)
    if not _follow(request):
        answer: LogsAnswer = {"files": files, "lines": lines}
        return web.json_response(answer)
    resp = await _ndjson(request)
    for item in lines:
        await resp.write(_line(item))
    stop = request.app[LIFECYCLE].shutdown_event
    loop = asyncio.get_running_loop()
    last_write = loop.time()
    while not stop.is_set():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), FOLLOW_POLL_SECS)
        active = bridge.active(jobs, ident)
        for item in await source.new():
            await resp.write(_line(item))
            last_write = loop.time()
        if not active:
            break  # the job or session ended and its last lines were sent, like ``tail --pid``
        if loop.time() - last_write > 15.0:
            await resp.write(b"\n")  # keep-alive; also how a vanished reader is noticed
            last_write = loop.time()
    with contextlib.suppress(ConnectionResetError):
        await resp.write_eof()
    return resp
