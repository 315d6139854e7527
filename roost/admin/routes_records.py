"""Admin route that reads a job's or session's record files wherever its directory lives.

``GET /records/{id}?dir=SUB``                          → ``{"files": [...]}``: the regular files directly
                                                         in ``SUB`` of the directory (sorted names)
``GET /records/{id}?name=NAME[&offset=N][&max_bytes=M]`` → up to ``M`` bytes (at most 256 KiB) of the file
                                                         ``NAME`` from ``N`` (< 0: its last ``M`` bytes); the
                                                         ``Roost-Record-Start`` header says where they start

``NAME`` and ``SUB`` are relative paths below the job's directory (``out/result.txt``,
``.murmur/<session id>/trace.jsonl``); a link is never followed. A missing file reads as nothing.

Why: the dashboard shows a session's input, ``out/`` files and trace, and a child on another node
has them on its node only (nodes share no filesystem). The daemon reads them through the process
backend, on the node that holds them (its keeper), exactly as ``roostctl logs`` gets a remote
child's log. A child on this host is read through the same backend methods, beneath its base; a
session no job of this daemon started (a capsule host run by hand) has its workdir on this host
and is read here the same way.
"""

from __future__ import annotations

from aiohttp import web

from roost.admin import bridge
from roost.admin.context import JOBS
from roost.backends.base import ChildDir
from roost.core.admin_models import RecordFiles
from roost.core.errors import BadRequest
from roost.core.ids import require_id
from roost.core.jobs import Job
from roost.core.wire import RECORD_START_HEADER
from roost.http.context import EXECUTOR
from roost.services.launcher import childrecords
from roost.services.launcher.childrecords import place_of
from roost.services.launcher.finalizer import child_dir
from roost.state.sessions import SessionRecord
from roost.system.blocking import BlockingExecutor
from roost.system.fsutil import Place

__all__ = ["routes"]

routes = web.RouteTableDef()


def _name(request: web.Request, key: str) -> str:
    value = request.query[key]
    try:
        childrecords.record_parts(value)
    except ValueError as exc:
        raise BadRequest(f"{key} must be a relative path below the job's directory ({exc})") from None
    return value


def _int(request: web.Request, key: str, default: int) -> int:
    raw = request.query.get(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadRequest(f"{key} must be a whole number") from None


def _where(target: tuple[Job | None, SessionRecord | None]) -> ChildDir | Place | None:
    """The job's directory (read through the backend), a job-less session's workdir on this host
    (read here), or None when there is no directory yet."""
    job, rec = target
    if job is not None:
        return child_dir(job) if job.workdir else None
    if rec is not None and rec.workdir:
        return place_of(rec.workdir, None, None)
    return None


async def _read(
    jobs: bridge.JobSources,
    executor: BlockingExecutor,
    where: ChildDir | Place | None,
    name: str,
    offset: int,
    size: int,
) -> tuple[int, bytes]:
    if isinstance(where, ChildDir):
        return await jobs.launcher.backend.read_file(where, name, offset, size)
    if isinstance(where, Place):
        return await executor.run(childrecords.read_at, where, name, offset, size)
    return 0, b""


async def _list(
    jobs: bridge.JobSources, executor: BlockingExecutor, where: ChildDir | Place | None, sub: str
) -> list[str]:
    if isinstance(where, ChildDir):
        return await jobs.launcher.backend.list_files(where, sub)
    if isinstance(where, Place):
        return await executor.run(childrecords.list_names, where, sub)
    return []


@routes.get("/records/{ident}")
async def records(request: web.Request) -> web.Response:
    jobs, executor = request.app[JOBS], request.app[EXECUTOR]
    ident = require_id("ident", request.match_info["ident"])
    if ("name" in request.query) == ("dir" in request.query):
        raise BadRequest("give either name (a file to read) or dir (a directory to list)")
    if "dir" in request.query:
        sub = _name(request, "dir")
        where = _where(await executor.run(bridge.log_target, jobs, ident))
        listed: RecordFiles = {"files": await _list(jobs, executor, where, sub)}
        return web.json_response(listed)
    name = _name(request, "name")
    offset = _int(request, "offset", 0)
    max_bytes = _int(request, "max_bytes", childrecords.READ_MAX)
    if not 0 <= max_bytes <= childrecords.READ_MAX:
        raise BadRequest(f"max_bytes must be between 0 and {childrecords.READ_MAX}")
    where = _where(await executor.run(bridge.log_target, jobs, ident))
    start, data = await _read(jobs, executor, where, name, offset, max_bytes)
    return web.Response(body=data, content_type="application/octet-stream", headers={RECORD_START_HEADER: str(start)})
