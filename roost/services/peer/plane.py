"""Service object for the peer plane: mint, redeem and fetch of ``mh1`` peer-file handles.

Constructed by the daemon with what it uses (it offers :class:`roost.services.peer.context.PeerServices`
to the steps), started after the store is open and stopped before it closes. It holds what
outlives one request: the HTTP client the fetch side redeems with (a pool of its own, without
auto-decompression, separate from the A2A client's). It is given the session-files port
(:mod:`roost.services.peer.files`) that reads exports and stores fetches where each session's workdir is.

Keys: a handle is MACed with ``KeyRing.handle_key(session_id, handle_salt)``, derived per
session; a handle is accepted only while the session that minted it is running, so ending a
session revokes every handle it minted (upstream: the key dies with the session), and
``roostctl keys rotate`` revokes them all.

Trace lines of redeems go through a small group writer (:meth:`PeerPlane.trace`): every line
queued while one executor job is writing is written by the next job, in order, so under load
many redeems share one thread round trip instead of paying one each. A caller still waits for
its own line to be on disk before it answers, so a trace is never behind the responses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp
import structlog

from a2a.client import A2AClient
from roost.core.api_models import HandleRequest, PeerFetchRequest
from roost.observe.events import EventBus
from roost.observe.metrics import Metrics
from roost.observe.tracelines import TraceWriter
from roost.observe.tracesink import TraceFiles
from roost.services.peer import fetch as fetch_mod
from roost.services.peer import mint as mint_mod
from roost.services.peer import redeem as redeem_mod
from roost.services.peer.files import SessionFiles
from roost.state.config import Config
from roost.state.keys import KeyHolder, KeyRing
from roost.state.sessions import SessionRecord, SessionTable
from roost.state.settings import Settings
from roost.system.blocking import BlockingExecutor

__all__ = ["PeerPlane"]

log = structlog.get_logger("roost.peer")

_Line = tuple[TraceWriter, str, str, dict[str, object], "asyncio.Future[None]"]


class PeerPlane:
    """The peer plane's state and dependencies; it offers :class:`roost.services.peer.context.PeerServices`
    to the mint, redeem and fetch steps."""

    def __init__(
        self,
        *,
        settings: Settings,
        keys: KeyHolder,
        table: SessionTable,
        events: EventBus,
        metrics: Metrics,
        executor: BlockingExecutor,
        a2a: A2AClient,
        traces: TraceFiles,
        clock: Callable[[], int],
        files: SessionFiles,
    ) -> None:
        self._settings = settings
        self._keys = keys
        self.table = table
        self.events = events
        self.metrics = metrics
        self.executor = executor
        self.a2a = a2a
        self.traces = traces
        self.clock = clock
        self.files = files
        self._http: aiohttp.ClientSession | None = None
        self._lines: list[_Line] = []
        self._writer_task: asyncio.Task[None] | None = None

    @property
    def config(self) -> Config:
        return self._settings.config

    @property
    def keys(self) -> KeyRing:
        """The key ring in force: handles are MACed with its per-session handle keys."""
        return self._keys.ring

    @property
    def verifying(self) -> tuple[KeyRing, ...]:
        """The rings a redeem verifies under (a replaced one during a rotation's grace)."""
        return self._keys.rings()

    async def start(self) -> None:
        """Nothing to open eagerly: the fetch client is created on first use."""

    async def stop(self) -> None:
        if self._writer_task is not None:
            await asyncio.shield(self._writer_task)
        if self._http is not None:
            http, self._http = self._http, None
            await http.close()

    def http(self) -> aiohttp.ClientSession:
        """The fetch-side client: no auto-decompression, connect timeout from the config."""
        if self._http is None or self._http.closed:
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=min(5.0, self.config.peer_timeout_secs))
            self._http = aiohttp.ClientSession(timeout=timeout, auto_decompress=False, raise_for_status=False)
        return self._http

    async def mint(self, rec: SessionRecord, req: HandleRequest) -> dict[str, object]:
        return await mint_mod.mint(self, rec, req)

    async def redeem(
        self, req: redeem_mod.RedeemRequest
    ) -> redeem_mod.Refusal | redeem_mod.SmallFile | redeem_mod.LargeFile:
        return await redeem_mod.redeem(self, req)

    async def fetch(self, rec: SessionRecord, req: PeerFetchRequest) -> dict[str, object]:
        return await fetch_mod.fetch(self, rec, req)

    async def trace(self, rec: SessionRecord, event_type: str, payload: dict[str, object]) -> None:
        """Append one line to ``rec``'s trace through the group writer; wait until it is written."""
        writer = self.traces.writer(rec)
        if writer is None:
            # No local writer: no workdir (nothing is written), or the session's trace is on
            # another node, which the sink reaches itself (in order, per session).
            await self.traces.write(rec, event_type, payload)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lines.append((writer, rec.session_id, event_type, payload, fut))
        if self._writer_task is None or self._writer_task.done():
            self._writer_task = asyncio.create_task(self._drain())
        await fut

    async def _drain(self) -> None:
        while self._lines:
            batch, self._lines = self._lines, []
            try:
                failed = await self.executor.run(_write_lines, batch)
                for sid, event_type, error in failed:
                    log.warning("trace_write_failed", session_id=sid, event_type=event_type, error=error)
            except Exception:
                log.exception("trace_batch_failed", lines=len(batch))
            finally:
                for *_, fut in batch:  # a trace failure never fails the redeem it records
                    if not fut.done():
                        fut.set_result(None)


def _write_lines(batch: list[_Line]) -> list[tuple[str, str, str]]:
    """Blocking: write each queued line in order; report failures rather than raising."""
    failed: list[tuple[str, str, str]] = []
    for writer, sid, event_type, payload, _fut in batch:
        try:
            writer.write(event_type, payload)
        except OSError as exc:
            failed.append((sid, event_type, exc.strerror or type(exc).__name__))
    return failed
