"""A job's or session's input, ``out/`` files and trace, as the job page shows them.

Why through the daemon (``GET /records/{id}`` on the admin socket) and never by path: a child may
run on another node, whose disk only that node's keeper reads (the daemon asks the process
backend, as for ``roostctl logs``), and a path the dashboard opened itself would show nothing, or
another host's file of the same name. A child on this host is read the same way, beneath its
directory with no link followed, so a link a child planted in ``out/`` shows nothing either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import quote, urlencode

from roost.capsule.taskinput import MAX_TASK_BYTES, TASK_FILES, initial_task_from
from roost.core.admin_models import RecordFiles
from roost.core.wire import RECORD_START_HEADER
from roost.dashboard.admin import AdminError, AdminSocket
from roost.services.launcher.childrecords import READ_MAX

__all__ = ["FILE_MAX", "TRACE_MAX", "Records", "read_records"]

FILE_MAX = 64 * 1024
"""How much of each ``out/`` file the page shows."""
TRACE_MAX = 4 * 1024 * 1024
"""How much of a session's trace the timeline is drawn from."""
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Records:
    task: str | None
    files: list[tuple[str, str]]  # ("out/<name>", its first FILE_MAX bytes as text)
    trace: str


async def _read(admin: AdminSocket, ident: str, name: str, limit: int) -> bytes:
    """The first ``limit`` bytes of the record file ``name`` (b"" when missing), read on in
    pieces; a file that was replaced meanwhile ends the read with what came before."""
    got = bytearray()
    while len(got) < limit:
        query = urlencode({"name": name, "offset": len(got), "max_bytes": min(READ_MAX, limit - len(got))})
        headers, data = await admin.raw(f"/records/{quote(ident, safe='')}?{query}")
        if not data or headers.get(RECORD_START_HEADER) != str(len(got)):
            break
        got += data
    return bytes(got)


async def _task(admin: AdminSocket, ident: str) -> str | None:
    for name in TASK_FILES:
        raw = await _read(admin, ident, name, MAX_TASK_BYTES)
        task = initial_task_from(name, raw) if raw else None
        if task is not None:
            return task.text
    return None


async def _files(admin: AdminSocket, ident: str) -> list[tuple[str, str]]:
    listed: RecordFiles = await admin.get(f"/records/{quote(ident, safe='')}?{urlencode({'dir': 'out'})}")
    names = [f"out/{n}" for n in listed["files"]]
    texts = await asyncio.gather(*(_read(admin, ident, name, FILE_MAX) for name in names))
    return [(name, raw.decode("utf-8", "replace")) for name, raw in zip(names, texts, strict=True)]


async def _or_empty(coro: Awaitable[T], empty: T) -> T:
    try:
        return await coro
    except AdminError:
        return empty


async def read_records(admin: AdminSocket, ident: str, session_id: str | None) -> Records:
    """What the page shows of job or session ``ident``; a part the daemon cannot give is empty."""
    trace = _read(admin, ident, f".murmur/{session_id}/trace.jsonl", TRACE_MAX) if session_id else _nothing()
    task, files, trace_text = await asyncio.gather(
        _or_empty(_task(admin, ident), None), _or_empty(_files(admin, ident), []), _or_empty(trace, b"")
    )
    return Records(task, files, trace_text.decode("utf-8", "replace"))


async def _nothing() -> bytes:
    return b""
