"""Session files on Ray nodes: the peer plane's file work done by the keeper of the session's node.

A session of a Ray child has its workdir on the node its job was placed on (the job record's
``node``); nodes share no filesystem, so the daemon cannot open it. This implementation of
:class:`roost.services.peer.files.SessionFiles` sends that work to the node's keeper
(roost/backends/ray/node/peers.py), which runs the same path rules, descriptor walk and identity
checks there. Sessions that are not Ray children (registered on the daemon's host) go to this
host's implementation unchanged.

* **Mint**: one keeper call checks the path on the node.
* **Redeem**: one streaming call; its head is a refusal, a whole small file, or a large file's
  size, mtime and sha256 (hashed on the node over the descriptor it then reads). The bytes
  follow in chunks of :data:`CHUNK`, at most :data:`WINDOW` of them produced ahead of the
  client (Ray's generator backpressure), so a large file is never held whole in memory on
  either side. The tail says whether the file kept its identity while read; if it did not, or
  the node stopped answering, the client's connection is aborted (a short body, never a
  complete 200 whose etag does not match). A client that goes away cancels the stream, and the
  keeper closes the file.
* **Fetch**: the fetched bytes go to the fetcher's node in chunks, into a temp file under its
  ``peer-in/`` that the keeper renames into place only once the whole body arrived and checked
  out (an abandoned write is removed there).

Every wait on a node is bounded by ``timeout_secs`` (``peer_timeout_secs``); a node that does not
answer is refused as ``io_error`` naming the node, never a path.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
from collections.abc import Callable, Mapping
from typing import Any, Final

import ray
from aiohttp import web
from ray.exceptions import RayError

from roost.backends.base import BackendError, NodeRef
from roost.backends.ray.backend import RayBackend
from roost.core.jobs import Job
from roost.services.peer.errors import BadPeerRequest, IoError, PeerError
from roost.services.peer.files import Export, LargeBody, PeerInSink, SessionFiles, SmallBody
from roost.state.sessions import SessionRecord

__all__ = ["CHUNK", "WINDOW", "RaySessionFiles"]

CHUNK: Final = 1024 * 1024
"""Each chunk is one Ray object with a fixed cost of its own: on one machine, 512 KiB chunks moved
about 70 MiB/s, 1 MiB about 110 MiB/s, and 2 MiB no more."""
WINDOW: Final = 8
"""Chunks a node may produce ahead of the client: at most ``CHUNK * WINDOW`` bytes in flight."""


def _silent(node: NodeRef) -> str:
    return f"the Ray node {node.node_id} that holds this session's files did not answer"


def _older(node: NodeRef) -> str:
    return f"the node keeper on Ray node {node.node_id} was started by an older daemon and cannot serve peer files"


def _refusal(obj: Any) -> PeerError | None:
    """The :class:`PeerError` a keeper's answer carries, if it is a refusal."""
    if isinstance(obj, dict) and "error" in obj:
        status, code, message = obj["error"]
        return BadPeerRequest(int(status), str(code), str(message))
    return None


class _Gone(Exception):
    """The stream ended early: the node or keeper stopped answering, or the wait ran out."""


class _Stream:
    """One redeem's streaming call, read item by item with a bound on every wait."""

    def __init__(self, gen: Any, backend: RayBackend, timeout_secs: float) -> None:
        self._gen = gen
        self._backend = backend
        self._timeout = timeout_secs
        self.finished = False

    async def next(self) -> Any:
        try:
            ref = await asyncio.wait_for(self._gen.__anext__(), self._timeout)
            return await asyncio.wait_for(ref, self._timeout)
        except StopAsyncIteration:
            self.finished = True
            raise _Gone() from None
        except (RayError, TimeoutError):
            raise _Gone() from None

    async def cancel(self) -> None:
        """Stop the keeper's generator (it closes the file); the stream is dropped either way."""
        if self.finished:
            return
        self.finished = True
        with contextlib.suppress(Exception):
            await self._backend.executor.run(ray.cancel, self._gen)


class _RayLarge:
    def __init__(self, stream: _Stream, head: dict[str, Any]) -> None:
        self._stream = stream
        self._size = int(head["size"])
        self._mtime_ms = int(head["mtime_ms"])
        self._sha256 = str(head["sha256"])

    @property
    def size(self) -> int:
        return self._size

    @property
    def mtime_ms(self) -> int:
        return self._mtime_ms

    async def sha256(self) -> str:
        return self._sha256

    async def send(self, request: web.Request, resp: web.StreamResponse) -> bool:
        sent = 0
        try:
            while True:
                item = await self._stream.next()
                if isinstance(item, bytes):
                    sent += len(item)
                    if sent > self._size:
                        return False
                    await resp.write(item)
                    continue
                self._stream.finished = True
                return isinstance(item, dict) and item.get("unchanged") is True and sent == self._size
        except _Gone:
            return False

    async def close(self) -> None:
        await self._stream.cancel()


class _RaySink:
    """A fetch's write into ``peer-in/`` on the fetcher's node, through its keeper."""

    def __init__(
        self, files: RaySessionFiles, rec: SessionRecord, workdir: str, job_id: str | None, node: NodeRef | None
    ) -> None:
        self._files = files
        self._rec = rec
        self._job_id = job_id
        self._workdir = workdir
        self._node = node
        self._keeper: Any = None
        self._sink: str | None = None

    async def _call(self, method: str, *args: Any) -> Any:
        assert self._node is not None
        try:
            if self._keeper is None:
                self._keeper = await self._files.backend.keeper_at(self._node)
            got = await asyncio.wait_for(
                self._files.backend.call(getattr(self._keeper, method), *args), self._files.timeout_secs
            )
        except AttributeError:  # a keeper that predates these calls
            raise OSError(errno.EIO, _older(self._node)) from None
        except (RayError, BackendError, TimeoutError):
            raise OSError(errno.EIO, _silent(self._node)) from None
        if isinstance(got, dict) and "errno" in got:
            raise OSError(int(got["errno"]), "")
        return got

    async def open(self) -> None:
        if self._node is None:
            raise OSError(errno.ENOENT, "the node that holds this session's files is not known")
        got = await self._call("peer_in_open", self._job_id, self._workdir, self._rec.uid)
        self._sink = str(got["sink"])

    async def write(self, data: bytes) -> None:
        await self._call("peer_in_write", self._sink, data)

    async def commit(self, name: str) -> None:
        sink, self._sink = self._sink, None
        await self._call("peer_in_commit", sink, name)

    async def abort(self) -> None:
        sink, self._sink = self._sink, None
        if sink is not None:
            with contextlib.suppress(OSError):
                await self._call("peer_in_abort", sink)


class RaySessionFiles:
    """Session files of Ray children on their nodes; every other session's on this host (``local``).

    ``jobs`` is the launcher's index of jobs by id: a session's ``job_id`` (set from the
    reservation its approval redeemed or its job's ready line, never from a request body) names
    the job whose ``node`` holds its workdir. The keeper there serves only that job's directory,
    so a session that claimed another's job would be refused, not served."""

    def __init__(
        self,
        backend: RayBackend,
        local: SessionFiles,
        jobs: Callable[[], Mapping[str, Job]],
        *,
        timeout_secs: float,
        chunk: int = CHUNK,
        window: int = WINDOW,
    ) -> None:
        self.backend = backend
        self.local = local
        self.jobs = jobs
        self.timeout_secs = timeout_secs
        self.chunk = chunk
        self.window = window

    def job_of(self, rec: SessionRecord) -> Job | None:
        """The job whose node holds the session's workdir; ``None``: this host. A session names
        its job by ``job_id``; a top-level child that did not, by its job's ready line (as the
        trace sink finds it). Raises :class:`IoError` for a ``job_id`` this daemon does not know
        (never guessed to be local)."""
        jobs = self.jobs()
        if rec.job_id is None:
            job = next((j for j in jobs.values() if j.session_id == rec.session_id), None)
        else:
            job = jobs.get(rec.job_id)
            if job is None:
                raise IoError("the job that holds this session's files is not known to this daemon")
        return job if job is not None and job.node is not None else None

    async def _keeper(self, node: NodeRef) -> Any:
        try:
            return await self.backend.keeper_at(node)
        except (RayError, BackendError):
            raise IoError(_silent(node)) from None

    async def mint_target(self, rec: SessionRecord, export: Export, components: tuple[str, ...]) -> tuple[str, ...]:
        job = self.job_of(rec)
        if job is None or job.node is None:
            return await self.local.mint_target(rec, export, components)
        node = job.node
        keeper = await self._keeper(node)
        args = (job.job_id, export.workdir, list(export.root), list(components), export.uid, export.follow)
        try:
            got = await asyncio.wait_for(self.backend.call(keeper.peer_mint_target, *args), self.timeout_secs)
        except AttributeError:  # a keeper that predates these calls
            raise IoError(_older(node)) from None
        except (RayError, TimeoutError):
            raise IoError(_silent(node)) from None
        err = _refusal(got)
        if err is not None:
            raise err
        return tuple(str(c) for c in got["components"])

    async def open_export(
        self, rec: SessionRecord, export: Export, components: tuple[str, ...]
    ) -> SmallBody | LargeBody:
        job = self.job_of(rec)
        if job is None or job.node is None:
            return await self.local.open_export(rec, export, components)
        node = job.node
        keeper = await self._keeper(node)
        try:
            method = keeper.peer_open.options(_generator_backpressure_num_objects=self.window)
        except AttributeError:  # a keeper that predates these calls
            raise IoError(_older(node)) from None
        job_id, root, wanted = job.job_id, list(export.root), list(components)

        def submit() -> Any:
            return method.remote(
                job_id, export.workdir, root, wanted, export.max_bytes, export.uid, export.follow, self.chunk
            )

        try:
            gen = await self.backend.executor.run(submit)
        except RayError:
            raise IoError(_silent(node)) from None
        stream = _Stream(gen, self.backend, self.timeout_secs)
        try:
            head = await stream.next()
        except _Gone:
            await stream.cancel()
            raise IoError(_silent(node)) from None
        err = _refusal(head)
        if err is not None:
            stream.finished = True  # the keeper's generator ends after a refusal
            raise err
        if "data" in head:
            stream.finished = True  # and after a small file
            return SmallBody(bytes(head["data"]), str(head["sha256"]), int(head["mtime_ms"]))
        return _RayLarge(stream, head)

    def peer_in(self, rec: SessionRecord, workdir: str) -> PeerInSink:
        try:
            job = self.job_of(rec)
        except PeerError:
            return _RaySink(self, rec, workdir, None, None)
        if job is None or job.node is None:
            return self.local.peer_in(rec, workdir)
        return _RaySink(self, rec, workdir, job.job_id, job.node)
