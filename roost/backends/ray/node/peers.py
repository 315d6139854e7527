"""The node keeper's half of the peer plane: a session's exported files read, and fetched files
stored, on the node where its workdir is.

Why on the node: nodes share no filesystem, so only the node's keeper can open a child's
directory. The daemon keeps every check about the *handle* (shape, MAC, audience, expiry,
policy) and asks the keeper for the file work, which runs the same code as on the daemon's host
(:mod:`roost.services.peer.reading` over :mod:`roost.services.peer.resolve`: the pure path rules, the
``O_NOFOLLOW`` descriptor walk, the session uid's access checks, the size ceiling), so every path
rule holds on the node exactly as it does locally.

What the keeper adds: it serves only its own job directories. The workdir the daemon names
must be exactly ``<node root>/jobs/<job id>`` for the session's job, so no remote call can point
the keeper at another directory of its node.

Shapes on the wire (Ray calls carry plain values, never a :class:`PeerError`): a refusal is
``{"error": [status, code, sentence]}``; a write failure is ``{"errno": n}``.
:meth:`PeerFilesKeeper.peer_open` is a streaming generator: first a head (a refusal, a whole
small file, or the size, mtime and sha256 of a large one), then the large file's bytes in chunks
of at most ``chunk`` bytes (Ray's backpressure bounds how many wait unread), then
``{"unchanged": bool}`` — whether the file kept its identity while it was read.

This module imports no ``ray``; :class:`roost.backends.ray.node.keeper.NodeKeeper` inherits it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from roost.backends.ray.node.files import check_job_id
from roost.services.peer.errors import IoError, PeerError
from roost.services.peer.reading import EtagCache, SmallBody, hash_fd, identity, open_and_read
from roost.services.peer.resolve import OpenedFile, mint_target
from roost.services.peer.storage import PeerInWriter

__all__ = ["MAX_CHUNK", "SINK_IDLE_SECS", "PeerFilesKeeper"]

MAX_CHUNK: Final = 1024 * 1024
"""The largest chunk a redeem's bytes travel in (the daemon asks for less)."""
SINK_IDLE_SECS: Final = 600.0
"""A ``peer-in`` write untouched this long is abandoned (its daemon died mid-fetch): removed."""

NOT_ITS_DIR: Final = "the session's workdir is not the directory this node keeps for its job"


@dataclass(eq=False)
class _Sink:
    writer: PeerInWriter
    touched: float = field(default_factory=time.monotonic)


def _refusal(err: PeerError) -> dict[str, Any]:
    return {"error": [err.status, err.code, err.message]}


def _errno(exc: OSError) -> dict[str, Any]:
    return {"errno": exc.errno or errno.EIO}


class PeerFilesKeeper:
    """Peer-plane methods of a node keeper (a mixin: ``jobs_root`` and ``node_id`` are the keeper's)."""

    node_id: str
    jobs_root: Path
    _peer: tuple[EtagCache, dict[str, _Sink], dict[str, int]] | None = None

    def _peer_state(self) -> tuple[EtagCache, dict[str, _Sink], dict[str, int]]:
        """The etag cache (by this node's file identities), open sinks and counters; made at first use."""
        if self._peer is None:
            self._peer = (EtagCache(), {}, {"served": 0, "stored": 0, "refused": 0})
        return self._peer

    def _own_workdir(self, job_id: str, workdir: str) -> str:
        """``workdir`` if it is exactly this node's directory of ``job_id``; else a refusal."""
        try:
            mine = os.path.normpath(str(self.jobs_root / check_job_id(job_id)))
        except ValueError:
            raise IoError(NOT_ITS_DIR) from None
        if os.path.normpath(workdir) != mine:
            raise IoError(NOT_ITS_DIR)
        return mine

    async def peer_stats(self) -> dict[str, int]:
        """How many redeems this keeper served and refused, fetches it stored, writes it holds open."""
        _, sinks, counts = self._peer_state()
        return {**counts, "open_sinks": len(sinks)}

    # -- mint and redeem ---------------------------------------------------------------------
    async def peer_mint_target(
        self, job_id: str, workdir: str, root: list[str], components: list[str], uid: int | None, follow: bool
    ) -> dict[str, Any]:
        """The mint-time check on this node: ``{"components": [...]}`` or a refusal."""
        try:
            where = self._own_workdir(job_id, workdir)
            found = await asyncio.to_thread(mint_target, where, tuple(root), tuple(components), uid, follow=follow)
        except PeerError as err:
            return _refusal(err)
        return {"components": list(found)}

    async def peer_open(
        self,
        job_id: str,
        workdir: str,
        root: list[str],
        components: list[str],
        max_bytes: int,
        uid: int | None,
        follow: bool,
        chunk: int,
    ) -> AsyncIterator[Any]:
        """Stream one exported file (the shapes are in the module's docstring)."""
        etags, _, counts = self._peer_state()
        try:
            where = self._own_workdir(job_id, workdir)
            got = await asyncio.to_thread(open_and_read, where, tuple(root), tuple(components), max_bytes, uid, follow)
        except PeerError as err:
            counts["refused"] += 1
            yield _refusal(err)
            return
        except OSError as exc:
            counts["refused"] += 1
            yield _refusal(IoError(exc.strerror or "unexpected error"))
            return
        if isinstance(got, SmallBody):
            counts["served"] += 1
            yield {"data": got.data, "sha256": got.sha256, "mtime_ms": got.mtime_ms, "node_id": self.node_id}
            return
        try:
            async for item in _stream_large(got, etags, max(1, min(chunk, MAX_CHUNK)), self.node_id):
                yield item
            counts["served"] += 1
        finally:
            os.close(got.fd)

    # -- a fetch's write into peer-in/ ---------------------------------------------------------
    async def peer_in_open(self, job_id: str, workdir: str, uid: int | None) -> dict[str, Any]:
        """Start an atomic write into the job's ``peer-in/``: ``{"sink": id}`` or ``{"errno": n}``."""
        _, sinks, _ = self._peer_state()
        await self._drop_idle_sinks()
        try:
            where = self._own_workdir(job_id, workdir)
        except PeerError:
            return {"errno": errno.EACCES}
        writer = PeerInWriter(where, uid)
        try:
            await asyncio.to_thread(writer.open)
        except OSError as exc:
            await asyncio.to_thread(writer.abort)
            return _errno(exc)
        sink_id = secrets.token_hex(8)
        sinks[sink_id] = _Sink(writer)
        return {"sink": sink_id}

    async def peer_in_write(self, sink_id: str, data: bytes) -> dict[str, Any]:
        sink = self._sink(sink_id)
        if sink is None:
            return {"errno": errno.EBADF}
        try:
            await asyncio.to_thread(sink.writer.write, data)
        except OSError as exc:
            return _errno(exc)
        sink.touched = time.monotonic()
        return {}

    async def peer_in_commit(self, sink_id: str, name: str) -> dict[str, Any]:
        """Rename the written temp over ``peer-in/<name>`` (one clean component, checked again)."""
        _, sinks, counts = self._peer_state()
        sink = sinks.pop(sink_id, None)
        if sink is None:
            return {"errno": errno.EBADF}
        try:
            await asyncio.to_thread(sink.writer.commit, name)
        except OSError as exc:
            await asyncio.to_thread(sink.writer.abort)
            return _errno(exc)
        counts["stored"] += 1
        return {}

    async def peer_in_abort(self, sink_id: str) -> None:
        _, sinks, _ = self._peer_state()
        sink = sinks.pop(sink_id, None)
        if sink is not None:
            await asyncio.to_thread(sink.writer.abort)

    def _sink(self, sink_id: str) -> _Sink | None:
        return self._peer_state()[1].get(sink_id)

    async def _drop_idle_sinks(self) -> None:
        _, sinks, _ = self._peer_state()
        now = time.monotonic()
        for sink_id in [k for k, s in sinks.items() if now - s.touched > SINK_IDLE_SECS]:
            sink = sinks.pop(sink_id)
            with contextlib.suppress(OSError):
                await asyncio.to_thread(sink.writer.abort)


async def _stream_large(opened: OpenedFile, etags: EtagCache, chunk: int, node_id: str) -> AsyncIterator[Any]:
    """Head (sha256 over the same descriptor, or cached by identity), the chunks, then the verdict."""
    sha = etags.get(opened.identity)
    if sha is None:
        try:
            sha = await asyncio.to_thread(hash_fd, opened)
        except OSError as exc:
            yield _refusal(IoError(exc.strerror or "unexpected error"))
            return
        if sha is None:
            yield _refusal(IoError("the file changed while it was read; retry the redeem"))
            return
        etags.put(opened.identity, sha)
    yield {"size": opened.size, "mtime_ms": opened.mtime_ms, "sha256": sha, "node_id": node_id}
    offset = 0
    while offset < opened.size:
        try:
            data = await asyncio.to_thread(os.pread, opened.fd, min(chunk, opened.size - offset), offset)
        except OSError:
            data = b""
        if not data:
            yield {"unchanged": False}
            return
        yield data
        offset += len(data)
    yield {"unchanged": await asyncio.to_thread(identity, opened.fd) == opened.identity}
