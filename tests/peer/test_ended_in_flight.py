"""A session that ends while its mint, a redeem of its handle, or its fetch is in flight.

Each request is held at one step behind its first ``await`` (the file opened, a large file
hashed, a path resolved, the fetched bytes arriving) by a session-files double that delegates
to the daemon's own; meanwhile the session deregisters over real HTTP; then the step goes on.
The request must get the answer the same request gets after the end — never the file, a
handle, or a stored copy.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable
from typing import TypeVar

from aiohttp import web

from roost.core.errors import IDENTITY_REFUSAL
from roost.services.peer.files import Export, LargeBody, PeerInSink, SessionFiles, SmallBody
from roost.state.sessions import SessionRecord
from tests.support.peer import NOT_VALID, PeerEnv, Session, trace_events

T = TypeVar("T")


class Hold:
    """One step that stops until released, and tells when it was reached."""

    def __init__(self, step: str) -> None:
        self.step = step
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    async def at(self, step: str) -> None:
        if step == self.step and not self.reached.is_set():
            self.reached.set()
            await self.release.wait()


class HeldFiles:
    """The daemon's session files, with one step held (a test double of the SessionFiles port)."""

    def __init__(self, inner: SessionFiles, hold: Hold) -> None:
        self.inner = inner
        self.hold = hold

    async def mint_target(self, rec: SessionRecord, export: Export, components: tuple[str, ...]) -> tuple[str, ...]:
        found = await self.inner.mint_target(rec, export, components)
        await self.hold.at("mint_target")
        return found

    async def open_export(
        self, rec: SessionRecord, export: Export, components: tuple[str, ...]
    ) -> SmallBody | LargeBody:
        got = await self.inner.open_export(rec, export, components)
        await self.hold.at("open_export")
        return got if isinstance(got, SmallBody) else HeldLarge(got, self.hold)

    def peer_in(self, rec: SessionRecord, workdir: str) -> PeerInSink:
        return HeldSink(self.inner.peer_in(rec, workdir), self.hold)


class HeldLarge:
    def __init__(self, inner: LargeBody, hold: Hold) -> None:
        self.inner = inner
        self.hold = hold

    @property
    def size(self) -> int:
        return self.inner.size

    @property
    def mtime_ms(self) -> int:
        return self.inner.mtime_ms

    async def sha256(self) -> str:
        sha = await self.inner.sha256()
        await self.hold.at("sha256")
        return sha

    async def send(self, request: web.Request, resp: web.StreamResponse) -> bool:
        return await self.inner.send(request, resp)

    async def close(self) -> None:
        await self.inner.close()


class HeldSink:
    def __init__(self, inner: PeerInSink, hold: Hold) -> None:
        self.inner = inner
        self.hold = hold

    async def open(self) -> None:
        await self.inner.open()

    async def write(self, data: bytes) -> None:
        await self.inner.write(data)
        await self.hold.at("write")

    async def commit(self, name: str) -> None:
        await self.inner.commit(name)

    async def abort(self) -> None:
        await self.inner.abort()


def hold_at(env: PeerEnv, step: str) -> Hold:
    hold = Hold(step)
    plane = env.daemon.roost.peer_plane
    files: SessionFiles = HeldFiles(plane.files, hold)  # typed: the double implements the port
    plane.files = files
    return hold


async def end_while_held(env: PeerEnv, hold: Hold, session: Session, request: Awaitable[T]) -> T:
    """Start ``request``, end ``session`` once the held step is reached, then let it go on."""
    task: asyncio.Task[T] = asyncio.ensure_future(request)
    await asyncio.wait_for(hold.reached.wait(), 30)
    status, body, _, _ = await env.daemon.call(
        "POST", "/deregister", json={"outcome": "complete"}, headers=session.cred
    )
    assert status == 200, body
    assert env.daemon.roost.table.running_session(session.sid) is None
    hold.release.set()
    return await asyncio.wait_for(task, 30)


async def test_a_redeem_whose_minter_ends_while_the_file_is_opened_is_refused(peer_env: PeerEnv) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    (a.workdir / "share" / "report.md").write_bytes(b"not for an ended session\n")
    _, minted = await peer_env.mint(a, "report.md", b)
    hold = hold_at(peer_env, "open_export")
    status, body, resp, raw = await end_while_held(peer_env, hold, a, peer_env.redeem(minted["handle"], b.audience))
    assert (status, body) == (403, NOT_VALID)
    assert b"not for an ended session" not in raw and "etag" not in resp.headers
    assert resp.headers["x-murmur-handle-id"] == minted["handle_id"]
    redeems = trace_events(a.workdir, a.sid, "peer_handle_redeem")
    assert all(r["outcome"] != "ok" for r in redeems)
    metrics = peer_env.daemon.roost.metrics.render().decode()
    assert 'roost_handle_redemptions_total{outcome="handle_not_valid"} 1.0' in metrics
    assert 'roost_handle_redemptions_total{outcome="ok"}' not in metrics


async def test_a_redeem_of_a_large_file_whose_minter_ends_while_it_is_hashed_is_refused(peer_env: PeerEnv) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    data = os.urandom(2 * 1024 * 1024)  # above the small-file size: opened, hashed, then streamed
    (a.workdir / "share" / "big.bin").write_bytes(data)
    _, minted = await peer_env.mint(a, "big.bin", b)
    hold = hold_at(peer_env, "sha256")
    status, body, resp, raw = await end_while_held(peer_env, hold, a, peer_env.redeem(minted["handle"], b.audience))
    assert (status, body) == (403, NOT_VALID)
    assert len(raw) < 1024 and "etag" not in resp.headers


async def test_a_handle_that_expires_while_the_file_is_opened_is_refused_as_expired(peer_env: PeerEnv) -> None:
    """The re-check is the whole verify again: the clock moves on too (the session still runs)."""
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    (a.workdir / "share" / "f.txt").write_text("x")
    _, minted = await peer_env.mint(a, "f.txt", b, ttl_secs=5)
    hold = hold_at(peer_env, "open_export")
    task = asyncio.ensure_future(peer_env.redeem(minted["handle"], b.audience))
    await asyncio.wait_for(hold.reached.wait(), 30)
    daemon = peer_env.daemon
    now = daemon.clock()
    daemon.roost.peer_plane.clock = lambda: now + 6_000
    hold.release.set()
    status, body, _, raw = await asyncio.wait_for(task, 30)
    assert (status, body["error"]) == (410, "handle_expired") and raw != b"x"
    assert trace_events(a.workdir, a.sid, "peer_handle_redeem")[-1]["outcome"] == "handle_expired"


async def test_a_mint_whose_session_ends_while_its_path_is_resolved_mints_nothing(peer_env: PeerEnv) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    (a.workdir / "share" / "report.md").write_text("x")
    hold = hold_at(peer_env, "mint_target")
    status, body = await end_while_held(peer_env, hold, a, peer_env.mint(a, "report.md", b))
    assert status == 403 and body["error"] == IDENTITY_REFUSAL and "handle" not in body
    assert all(m["outcome"] != "ok" for m in trace_events(a.workdir, a.sid, "peer_handle_mint"))
    assert 'roost_handles_minted_total{outcome="ok"}' not in peer_env.daemon.roost.metrics.render().decode()


async def test_a_fetch_whose_session_ends_while_the_bytes_arrive_stores_nothing(peer_env: PeerEnv) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    (a.workdir / "share" / "report.md").write_bytes(b"fetched too late\n")
    _, minted = await peer_env.mint(a, "report.md", b)
    hold = hold_at(peer_env, "write")
    status, body = await end_while_held(peer_env, hold, b, peer_env.fetch(b, minted["handle"]))
    assert status == 403 and body["error"] == IDENTITY_REFUSAL
    peer_in = b.workdir / "peer-in"
    left: list[str] = sorted(p.name for p in peer_in.iterdir()) if peer_in.exists() else []
    assert left == []  # neither the file nor its temp copy
    assert all(f["outcome"] != "ok" for f in trace_events(b.workdir, b.sid, "peer_file_fetch"))
