"""``POST /peer-fetch``: policy, audience, ceiling, etag, atomic no-follow storage, trace."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.support.peer import SECRET, PeerEnv


def fetch_traces(workdir: Path, sid: str) -> list[dict[str, Any]]:
    path = workdir / ".murmur" / sid / "trace.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    return [x for x in lines if x["event_type"] == "peer_file_fetch"]


async def test_fetch_round_trip(peer_env: PeerEnv) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    data = os.urandom(200_000)
    (a.workdir / "share" / "nested").mkdir()
    (a.workdir / "share" / "nested" / "report v1.md").write_bytes(data)
    _, minted = await peer_env.mint(a, "nested/report v1.md", b)
    sha = hashlib.sha256(data).hexdigest()
    for etag in (None, f'"sha256:{sha}"', sha):
        extra = {} if etag is None else {"etag": etag}
        status, body = await peer_env.fetch(b, minted["handle"], **extra)
        assert status == 200, body
        assert body == {"stored_path": f"peer-in/{minted['handle_id']}-report_v1.md", "bytes": len(data), "sha256": sha}
        assert (b.workdir / body["stored_path"]).read_bytes() == data
    assert [p.name for p in (b.workdir / "peer-in").iterdir()] == [f"{minted['handle_id']}-report_v1.md"]
    t = fetch_traces(b.workdir, b.sid)[-1]
    assert t["outcome"] == "ok" and t["handle_id"] == minted["handle_id"] and t["peer"] == peer_env.daemon.url
    assert t["stored_path"] == body["stored_path"] and t["sha256"] == sha and t["bytes"] == len(data)
    ops = {e["operation"] for e in peer_env.daemon.roost.events.recent()}
    assert "roost.peer.fetch" in ops


async def test_fetch_refusals(peer_env: PeerEnv, tmp_path: Path) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    (a.workdir / "share" / "f.txt").write_bytes(b"abc")
    _, minted = await peer_env.mint(a, "f.txt", b)
    handle = minted["handle"]
    # peer not covered by capabilities.peer_fetch.allow (network.allow is not enough)
    c = await peer_env.session("closed")
    status, body = await peer_env.fetch(c, handle)
    assert (status, body["error"]) == (403, "peer_not_allowed")
    assert body["message"] == f"network policy: '{peer_env.daemon.url}' not in capabilities.peer_fetch.allow"
    assert fetch_traces(c.workdir, c.sid)[-1]["outcome"] == "peer_not_allowed"
    # no capsule_url: no audience
    n = await peer_env.session("beta", capsule_url=False)
    status, body = await peer_env.fetch(n, handle)
    assert (status, body["error"]) == (409, "no_audience")
    # https is refused, not dialled in clear text
    status, body = await peer_env.fetch(b, handle, peer="https://127.0.0.1:1")
    assert (status, body["error"]) == (400, "unsupported_peer_url")
    # the peer's own refusal code is reflected: a wrong audience is handle_not_valid
    other = await peer_env.session("alpha")
    status, body = await peer_env.fetch(other, handle)
    assert (status, body["error"]) == (502, "handle_not_valid")
    assert fetch_traces(other.workdir, other.sid)[-1]["outcome"] == "handle_not_valid"
    # caller's etag no longer matches
    status, body = await peer_env.fetch(b, handle, etag="0" * 64)
    assert (status, body["error"]) == (412, "etag_mismatch")
    status, body = await peer_env.fetch(b, handle, etag="nope")
    assert (status, body["error"]) == (400, "invalid_request")
    # a handle that cannot be a token never reaches the URL
    status, body = await peer_env.fetch(b, "../../health?x=1")
    assert (status, body["error"]) == (400, "malformed_handle")
    # unreachable peer
    status, body = await peer_env.fetch(b, handle, peer="127.0.0.1:1")
    assert (status, body["error"]) == (502, "peer_unreachable")
    assert not (b.workdir / "peer-in").exists() or not any((b.workdir / "peer-in").iterdir())


async def test_fetch_ceiling_and_lying_peer(peer_env: PeerEnv, daemon_factory: Any, peer_registry: Any) -> None:
    b = await peer_env.session("beta")
    # a hostile peer: a huge body, and a wrong etag
    big = b"x" * 4096

    async def huge(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"etag": '"sha256:' + "0" * 64 + '"'})
        await resp.prepare(request)
        for _ in range(64):
            await resp.write(big)
        return resp

    async def lying(request: web.Request) -> web.Response:
        return web.Response(body=b"abc", headers={"etag": '"sha256:' + "1" * 64 + '"'})

    app = web.Application()
    app.router.add_get("/huge/resources/peer/{t}", huge)
    app.router.add_get("/resources/peer/{t}", lying)
    runner = web.AppRunner(app, access_log=None)  # its access log would carry the handle
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    peer_env.runners.append(runner)
    status, body = await peer_env.fetch(b, "mh1.AAAA.AAAA", peer=f"http://127.0.0.1:{port}")
    assert (status, body["error"]) == (502, "etag_mismatch")
    # the ceiling: a second daemon with a tiny peer_fetch_max_bytes, streaming without content-length
    daemon = peer_env.daemon
    object.__setattr__(daemon.config, "peer_fetch_max_bytes", 10_000)
    try:
        app2 = web.Application()
        app2.router.add_get("/resources/peer/{t}", huge)
        r2 = web.AppRunner(app2, access_log=None)
        await r2.setup()
        s2 = web.TCPSite(r2, "127.0.0.1", 0)
        await s2.start()
        peer_env.runners.append(r2)
        p2 = s2._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        status, body = await peer_env.fetch(b, "mh1.AAAA.AAAA", peer=f"http://127.0.0.1:{p2}")
        assert (status, body["error"]) == (502, "too_large")
    finally:
        object.__setattr__(daemon.config, "peer_fetch_max_bytes", 64 * 1024 * 1024)
    leftovers = list((b.workdir / "peer-in").iterdir()) if (b.workdir / "peer-in").exists() else []
    assert leftovers == []


async def test_fetch_never_follows_a_planted_link(peer_env: PeerEnv, tmp_path: Path) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    (a.workdir / "share" / "f.txt").write_bytes(b"fresh")
    _, minted = await peer_env.mint(a, "f.txt", b)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(SECRET)
    (b.workdir / "peer-in").mkdir()
    dest = b.workdir / "peer-in" / f"{minted['handle_id']}-f.txt"
    dest.symlink_to(victim)
    status, body = await peer_env.fetch(b, minted["handle"])
    assert status == 200, body
    assert victim.read_bytes() == SECRET  # the link was replaced, not written through
    assert not dest.is_symlink() and dest.read_bytes() == b"fresh"
    # a planted peer-in directory link is refused
    b2 = await peer_env.session("beta")
    _, minted2 = await peer_env.mint(a, "f.txt", b2)
    (b2.workdir / "peer-in").symlink_to(tmp_path)
    status, body = await peer_env.fetch(b2, minted2["handle"])
    assert (status, body["error"]) == (500, "io_error")
    assert not (tmp_path / f"{minted2['handle_id']}-f.txt").exists()
