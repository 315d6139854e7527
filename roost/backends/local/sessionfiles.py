"""Session files on the daemon's own disk: the :class:`roost.services.peer.files.SessionFiles` of one host.

The blocking work (the descriptor walk, reads, hashes, the ``peer-in/`` writer) goes through
the daemon's executor; the bytes of a large file go to the client with ``loop.sendfile`` from
the descriptor the walk opened, then that descriptor is ``fstat``-ed again (in-memory inode
data, so on the loop): a file that changed while it was sent is reported as such, and the
redeem aborts the connection rather than completing a 200 whose etag does not match.
"""

from __future__ import annotations

import asyncio
import os

from aiohttp import web

from roost.services.peer.errors import IoError
from roost.services.peer.files import Export, LargeBody, PeerInSink
from roost.services.peer.reading import HASH_CHUNK, EtagCache, SmallBody, hash_fd, identity, open_and_read
from roost.services.peer.resolve import OpenedFile, mint_target
from roost.services.peer.storage import PeerInWriter
from roost.state.sessions import SessionRecord
from roost.system.blocking import BlockingExecutor

__all__ = ["LocalSessionFiles"]


class LocalSessionFiles:
    """Files of sessions whose workdir is on this host. Holds the etag cache (by file identity),
    so an unchanged large file is hashed once."""

    def __init__(self, executor: BlockingExecutor, etags: EtagCache | None = None) -> None:
        self.executor = executor
        self.etags = etags if etags is not None else EtagCache()

    async def mint_target(self, rec: SessionRecord, export: Export, components: tuple[str, ...]) -> tuple[str, ...]:
        found: tuple[str, ...] = await self.executor.run(
            mint_target,
            export.workdir,
            export.root,
            components,
            export.uid,
            follow=export.follow,
            identity=export.workdir_id,
        )
        return found

    async def open_export(
        self, rec: SessionRecord, export: Export, components: tuple[str, ...]
    ) -> SmallBody | LargeBody:
        try:
            got: SmallBody | OpenedFile = await self.executor.run(
                open_and_read,
                export.workdir,
                export.root,
                components,
                export.max_bytes,
                export.uid,
                export.follow,
                export.workdir_id,
            )
        except OSError as exc:
            raise IoError(exc.strerror or "unexpected error") from None
        if isinstance(got, SmallBody):
            return got
        return _LocalLarge(self, got)

    def peer_in(self, rec: SessionRecord, workdir: str) -> PeerInSink:
        return _LocalSink(self.executor, PeerInWriter(workdir, rec.uid))


class _LocalLarge:
    def __init__(self, files: LocalSessionFiles, opened: OpenedFile) -> None:
        self._files = files
        self._opened = opened

    @property
    def size(self) -> int:
        return self._opened.size

    @property
    def mtime_ms(self) -> int:
        return self._opened.mtime_ms

    async def sha256(self) -> str:
        opened, etags = self._opened, self._files.etags
        sha = etags.get(opened.identity)
        if sha is not None:
            return sha
        try:
            sha = await self._files.executor.run(hash_fd, opened)
        except OSError as exc:
            raise IoError(exc.strerror or "unexpected error") from None
        if sha is None:
            raise IoError("the file changed while it was read; retry the redeem")
        etags.put(opened.identity, sha)
        return sha

    async def send(self, request: web.Request, resp: web.StreamResponse) -> bool:
        opened = self._opened
        transport = request.transport
        if transport is None:
            raise ConnectionResetError("connection lost")
        loop = asyncio.get_running_loop()
        # Wrapping an already open descriptor (closefd=False) does no I/O.
        with open(opened.fd, "rb", buffering=0, closefd=False) as fobj:  # noqa: ASYNC230
            try:
                await loop.sendfile(transport, fobj, 0, opened.size)
            except NotImplementedError:
                await self._send_chunks(resp)
        # fstat on an open descriptor reads in-memory inode data: no executor hop needed.
        return identity(opened.fd) == opened.identity

    async def _send_chunks(self, resp: web.StreamResponse) -> None:
        """Fallback when the transport cannot sendfile: chunks read through the executor."""
        opened = self._opened
        offset = 0
        while offset < opened.size:
            chunk = await self._files.executor.run(os.pread, opened.fd, min(HASH_CHUNK, opened.size - offset), offset)
            if not chunk:
                raise ConnectionResetError("the file shrank while it was served")
            await resp.write(chunk)
            offset += len(chunk)

    async def close(self) -> None:
        # Closing a read-only descriptor does no data I/O; it is done on the loop so the hot
        # path pays for no extra executor round trip.
        os.close(self._opened.fd)


class _LocalSink:
    def __init__(self, executor: BlockingExecutor, writer: PeerInWriter) -> None:
        self._executor = executor
        self._writer = writer

    async def open(self) -> None:
        await self._executor.run(self._writer.open)

    async def write(self, data: bytes) -> None:
        await self._executor.run(self._writer.write, data)

    async def commit(self, name: str) -> None:
        await self._executor.run(self._writer.commit, name)

    async def abort(self) -> None:
        await self._executor.run(self._writer.abort)
