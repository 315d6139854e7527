"""Mint and redeem over HTTP: round trip, headers, every refusal code and its exact body."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from typing import Any

import pytest

from roost.core import tokens
from roost.observe.tracelines import read_trace
from tests.support.peer import NOT_VALID, SECRET, PeerEnv, trace_events


async def test_round_trip_mint_redeem(peer_env: PeerEnv, no_token_leak: list[Any]) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    (a.workdir / "share" / "report.md").write_bytes(b"hello peer\n")
    status, body = await peer_env.mint(a, "report.md", b)
    assert status == 200, body
    assert set(body) == {"handle", "handle_id", "expires_at_ms", "path", "audience"}
    assert body["audience"] == b.audience
    assert body["path"] == "report.md"
    assert body["expires_at_ms"] == peer_env.daemon.clock() + 900_000
    handle = body["handle"]
    for _ in range(3):  # redeemable any number of times
        status, _, resp, raw = await peer_env.redeem(handle, b.audience)
        assert status == 200
        assert raw == b"hello peer\n"
        assert resp.headers["etag"] == f'"sha256:{hashlib.sha256(raw).hexdigest()}"'
        assert resp.headers["x-murmur-handle-id"] == body["handle_id"]
        assert resp.headers["content-type"] == "application/octet-stream"
        assert resp.headers["content-length"] == str(len(raw))
        assert int(resp.headers["x-murmur-mtime-ms"]) == (a.workdir / "share" / "report.md").stat().st_mtime_ns // 10**6
        assert not any("export-root" in h.lower() for h in resp.headers)
    mints = trace_events(a.workdir, a.sid, "peer_handle_mint")
    assert mints[-1]["outcome"] == "ok" and mints[-1]["handle_id"] == body["handle_id"]
    assert mints[-1]["path"] == "report.md" and mints[-1]["audience"] == b.audience
    redeems = trace_events(a.workdir, a.sid, "peer_handle_redeem")
    assert len(redeems) == 3
    r = redeems[0]
    assert list(r)[:5] == ["event_type", "event_id", "parent_id", "session_id", "timestamp"]
    assert r["path"] == "report.md" and r["bytes"] == 11 and r["outcome"] == "ok" and r["reason"] is None
    assert r["sha256"] == hashlib.sha256(b"hello peer\n").hexdigest()
    assert r["audience_asserted"] == b.audience and r["generation"] == 0
    assert any(e.get("event") == "peer_handle_minted" for e in no_token_leak)
    # events + metrics
    ops = {e["operation"] for e in peer_env.daemon.roost.events.recent()}
    assert {"roost.peer.mint", "roost.peer.redeem"} <= ops
    metrics = peer_env.daemon.roost.metrics.render().decode()
    assert 'roost_handles_minted_total{outcome="ok"} 1.0' in metrics
    assert 'roost_handle_redemptions_total{outcome="ok"} 3.0' in metrics


async def test_large_file_streams_with_matching_etag(peer_env: PeerEnv) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    data = os.urandom(3 * 1024 * 1024 + 17)
    (a.workdir / "share" / "big.bin").write_bytes(data)
    _, body = await peer_env.mint(a, "big.bin", b)
    for _ in range(2):  # second time from the etag cache
        status, _, resp, raw = await peer_env.redeem(body["handle"], b.audience)
        assert status == 200 and raw == data
        assert resp.headers["etag"] == f'"sha256:{hashlib.sha256(data).hexdigest()}"'
    # rewritten file: new bytes, new etag (cache keyed by identity)
    new = os.urandom(2 * 1024 * 1024)
    tmp = a.workdir / "share" / "big.tmp"
    tmp.write_bytes(new)
    tmp.rename(a.workdir / "share" / "big.bin")
    status, _, resp, raw = await peer_env.redeem(body["handle"], b.audience)
    assert status == 200 and raw == new
    assert resp.headers["etag"] == f'"sha256:{hashlib.sha256(new).hexdigest()}"'


async def test_handle_not_valid_is_identical_for_every_cause(peer_env: PeerEnv) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    c = await peer_env.session("beta")
    (a.workdir / "share" / "f.txt").write_text("x")
    _, body = await peer_env.mint(a, "f.txt", b)
    handle = body["handle"]
    prefix, seg, mac = handle.split(".")
    payload = json.loads(tokens._b64decode_strict(seg) or b"")
    daemon = peer_env.daemon

    def reseg(obj: dict[str, Any]) -> str:
        return tokens._b64encode(json.dumps(obj, separators=(",", ":")).encode())

    other_key = daemon.keys.handle_key(c.sid, "0" * 32)
    bodies = []
    cases = [
        (handle, c.audience),  # a third capsule asserting its own identity
        (handle, b.audience.upper()),  # audience is MACed as sent, not lowercased
        (f"{prefix}.{reseg({**payload, 'p': 'other.txt'})}.{mac}", b.audience),  # tampered payload
        (f"{prefix}.{seg}.{'A' * 43}", b.audience),  # tampered MAC
        (f"{prefix}.{seg}.{mac[:20]}", b.audience),  # short MAC: invalid, not malformed
        (f"{prefix}.{reseg({**payload, 'iss': c.sid})}.{mac}", b.audience),  # foreign iss
        (f"{prefix}.{reseg({**payload, 'iss': 'ses_nobody'})}.{mac}", b.audience),  # unknown session
        (f"{prefix}.{reseg({'v': 1})}.{mac}", b.audience),  # no iss
        (f"{prefix}.{tokens._b64encode(b'not json')}.{mac}", b.audience),
        (tokens.mint_handle(other_key, iss=a.sid, path="f.txt", exp_ms=2**40, audience=b.audience), b.audience),
    ]
    for tok, aud in cases:
        status, obj, resp, raw = await peer_env.redeem(tok, aud)
        assert status == 403, (tok, obj)
        assert obj == NOT_VALID
        assert resp.headers["x-murmur-handle-id"] == hashlib.sha256(tok.encode()).hexdigest()[:16]
        bodies.append(raw)
    # the minting session ends: its handles die with it
    status, _, _, _ = await peer_env.daemon.call("POST", "/deregister", json={"outcome": "complete"}, headers=a.cred)
    assert status == 200
    status, obj, _, raw = await peer_env.redeem(handle, b.audience)
    assert status == 403 and obj == NOT_VALID
    bodies.append(raw)
    assert len(set(bodies)) == 1
    for r in trace_events(a.workdir, a.sid, "peer_handle_redeem"):
        assert r["path"] is None and r["outcome"] == "handle_not_valid"


async def test_refusal_codes_on_redeem(peer_env: PeerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    share = a.workdir / "share"
    (share / "f.txt").write_text("x")
    _, body = await peer_env.mint(a, "f.txt", b)
    handle = body["handle"]

    # 405 for every other method, with allow: GET and no handle id; HEAD included
    for method in ("POST", "PUT", "PATCH", "DELETE", "HEAD"):
        status, obj, resp, _ = await peer_env.redeem(handle, b.audience, method)
        assert status == 405
        assert resp.headers["allow"] == "GET"
        assert "x-murmur-handle-id" not in resp.headers
        if method != "HEAD":
            assert obj == {
                "error": "method_not_allowed",
                "message": "the peer plane serves GET only; it has no write path and no list verb",
            }
    # empty token: 404 not_found, no list verb, no handle id
    for path in ("/resources/peer", "/resources/peer/"):
        status, obj, resp, _ = await peer_env.daemon.call("GET", path, headers={"x-murmur-audience": b.audience})
        assert status == 404 and obj["error"] == "not_found"
        assert "x-murmur-handle-id" not in resp.headers
    # malformed: shape is checked before the audience
    for bad in ("garbage", "mh1.x", "mh2.AAAA.AAAA", "mh1.AAAA.AAAA.AAAA", "mh1.A=.AAAA", "mh1.AAAA.AAAA/extra"):
        status, obj, resp, _ = await peer_env.redeem(bad, None)
        assert (status, obj) == (
            400,
            {"error": "malformed_handle", "message": "the handle is not a well-formed mh1 token"},
        ), bad
        assert "x-murmur-handle-id" in resp.headers
    # missing audience (absent, blank)
    for aud in (None, "   "):
        status, obj, _, _ = await peer_env.redeem(handle, aud)
        assert (status, obj["error"]) == (400, "missing_audience")
        assert obj["message"] == "a redeem must assert its audience in the x-murmur-audience header"
    # expiry with the injected clock: exp == now is expired
    peer_env.daemon.clock.advance(900_000)
    status, obj, _, _ = await peer_env.redeem(handle, b.audience)
    assert (status, obj) == (410, {"error": "handle_expired", "message": "the handle has expired"})
    peer_env.daemon.clock.advance(-1)
    status, _, _, _ = await peer_env.redeem(handle, b.audience)
    assert status == 200
    # not_found after delete
    (share / "f.txt").unlink()
    status, obj, _, _ = await peer_env.redeem(handle, b.audience)
    assert (status, obj) == (404, {"error": "not_found", "message": "no such file under the peer export root"})
    # symlink swapped in after minting
    (a.workdir / "secret.txt").write_bytes(SECRET)
    (share / "f.txt").symlink_to("../secret.txt")
    status, obj, _, raw = await peer_env.redeem(handle, b.audience)
    assert (status, obj["error"]) == (403, "symlink_refused") and SECRET not in raw
    # a FIFO and a directory swapped in
    (share / "f.txt").unlink()
    os.mkfifo(share / "f.txt")
    status, obj, _, _ = await peer_env.redeem(handle, b.audience)
    assert (status, obj) == (403, {"error": "not_a_regular_file", "message": "the handle does not name a regular file"})
    (share / "f.txt").unlink()
    (share / "f.txt").mkdir()
    status, obj, _, _ = await peer_env.redeem(handle, b.audience)
    assert (status, obj["error"]) == (403, "not_a_regular_file")
    # io_error: unreadable file
    (share / "f.txt").rmdir()
    (share / "f.txt").write_text("x")
    if os.geteuid() == 0:  # root reads mode-0 files: fail the open itself instead
        real_open = os.open

        def deny(path: Any, flags: int, *args: Any, **kw: Any) -> int:
            if path == "f.txt" and not flags & os.O_PATH:
                raise PermissionError(errno.EACCES, "Permission denied")
            return int(real_open(path, flags, *args, **kw))

        monkeypatch.setattr(os, "open", deny)
    else:
        (share / "f.txt").chmod(0)
    status, obj, _, _ = await peer_env.redeem(handle, b.audience)
    monkeypatch.undo()
    assert (status, obj) == (500, {"error": "io_error", "message": "read failed: permission denied"})
    redeems = trace_events(a.workdir, a.sid, "peer_handle_redeem")
    outcomes = [r["outcome"] for r in redeems]
    assert "malformed_handle" not in outcomes  # garbage names no session: nothing to attribute
    # Without an audience the MAC cannot be verified: traced with path null (seed 000's
    # peer_handle_redeem: "`null` until the MAC has verified"), as the listener of the session
    # the token names records every answer.
    assert outcomes.count("missing_audience") == 2
    assert {"handle_expired", "not_found", "symlink_refused", "not_a_regular_file"} <= set(outcomes)
    for r in redeems:
        if r["outcome"] in ("missing_audience",):
            assert r["path"] is None and r["bytes"] is None
        if r["outcome"] in ("not_found", "symlink_refused", "handle_expired"):
            assert r["path"] == "f.txt"


async def test_too_large_and_no_peer_plane_after_mac(peer_env: PeerEnv) -> None:
    t = await peer_env.session("tiny")
    b = await peer_env.session("beta")
    (t.workdir / "share" / "big").write_bytes(b"z" * 2048)
    status, body = await peer_env.mint(t, "big", b)  # size is not checked at mint
    assert status == 200
    status, obj, _, _raw = await peer_env.redeem(body["handle"], b.audience)
    assert (status, obj) == (
        413,
        {"error": "too_large", "message": "file exceeds the declared exports.peer_files.max_bytes of 1024 bytes"},
    )
    # ttl is capped by max_ttl (60 s) and may only shrink
    status, body = await peer_env.mint(t, "big", b, ttl_secs=3600)
    assert body["expires_at_ms"] == peer_env.daemon.clock() + 60_000
    status, body = await peer_env.mint(t, "big", b, ttl_secs=5)
    assert body["expires_at_ms"] == peer_env.daemon.clock() + 5_000
    # no_peer_plane is only revealed to a holder of a valid MAC
    p = await peer_env.session("plain")
    key = peer_env.daemon.keys.handle_key(p.sid, peer_env.daemon.roost.table.sessions[p.sid].handle_salt)
    tok = tokens.mint_handle(key, iss=p.sid, path="x", exp_ms=2**50, audience=b.audience)
    status, obj, _, _ = await peer_env.redeem(tok, b.audience)
    assert (status, obj["error"]) == (404, "no_peer_plane")
    status, obj, _, _ = await peer_env.redeem(tok, "someone@else:1")
    assert (status, obj) == (403, NOT_VALID)


async def test_mint_refusals(peer_env: PeerEnv) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    share = a.workdir / "share"
    (share / "f.txt").write_text("x")
    (share / "d").mkdir()
    os.mkfifo(share / "fifo")
    (a.workdir / "secret.txt").write_bytes(SECRET)
    (share / "escape.md").symlink_to("../secret.txt")

    async def code(path: str, peer: Any = b, **extra: Any) -> tuple[int, Any]:
        status, body = await peer_env.mint(a, path, peer, **extra)
        return status, body.get("error") if isinstance(body, dict) else body

    assert await code("../secret.txt") == (403, "outside_root")
    assert await code("%2e%2e%2fsecret.txt") == (403, "outside_root")
    assert await code("/etc/passwd") == (403, "outside_root")
    assert await code("escape.md") == (403, "symlink_refused")
    assert await code("handoff/../../secret-at-top.md") == (403, "outside_root")
    assert await code("missing.txt") == (404, "not_found")
    assert await code("f.txt/x") == (404, "not_found")
    assert await code("d") == (403, "not_a_regular_file")
    assert await code("fifo") == (403, "not_a_regular_file")
    assert await code("f.txt", ttl_secs="60") == (400, "invalid_request")
    assert await code("f.txt", ttl_secs=1.5) == (400, "invalid_request")
    assert await code("f.txt", ttl_secs=0) == (400, "invalid_request")
    assert await code("f.txt", ttl_secs=True) == (400, "invalid_request")
    assert await code("f.txt", "http://example.com:9") == (403, "peer_not_allowed")
    assert await code("f.txt", "https://127.0.0.1:9") == (400, "unsupported_peer_url")
    assert await code("f.txt", "127.0.0.1:1") == (502, "peer_unreachable")
    status, body = await peer_env.mint(a, "f.txt", "http://example.com:9")
    assert body["message"] == "network policy: 'http://example.com:9' not in capabilities.network.allow"
    # credential
    status, body, _, _ = await peer_env.daemon.call("POST", "/handles", json={"path": "f.txt", "peer": b.door_url})
    assert status == 403
    # no plane
    p = await peer_env.session("plain")
    status, body = await peer_env.mint(p, "f.txt", b)
    assert (status, body["error"]) == (404, "no_peer_plane")
    mints = trace_events(a.workdir, a.sid, "peer_handle_mint")
    refused = [m for m in mints if m["outcome"] != "ok"]
    assert refused and all(m["handle_id"] is None and m["expires_at_ms"] is None for m in refused)
    assert {"outside_root", "symlink_refused", "not_found", "not_a_regular_file", "peer_unreachable"} <= {
        m["outcome"] for m in refused
    }
    by_path = {m["path"]: m for m in refused}
    assert by_path["../secret.txt"]["audience"] == b.audience  # card read before path resolution
    for m in refused:
        assert str(a.workdir) not in json.dumps(m)


async def test_percent_decoded_once(peer_env: PeerEnv) -> None:
    """A real file named ``100%41.txt`` is minted as ``100A.txt``; ``%2541`` names it literally."""
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    (a.workdir / "share" / "100%41.txt").write_text("literal")
    (a.workdir / "share" / "100A.txt").write_text("decoded")
    status, body = await peer_env.mint(a, "100%2541.txt", b)
    assert status == 200 and body["path"] == "100%41.txt"
    status, _, _, raw = await peer_env.redeem(body["handle"], b.audience)
    assert (status, raw) == (200, b"literal")  # never decoded a second time at redeem
    status, body = await peer_env.mint(a, "100%41.txt", b)
    assert body["path"] == "100A.txt"
    _, _, _, raw = await peer_env.redeem(body["handle"], b.audience)
    assert raw == b"decoded"


async def test_read_trace_lines_are_well_formed(peer_env: PeerEnv) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    (a.workdir / "share" / "f").write_text("x")
    _, body = await peer_env.mint(a, "f", b)
    await peer_env.redeem(body["handle"], b.audience)
    lines = read_trace(a.workdir / ".murmur" / a.sid / "trace.jsonl")
    assert [ln["event_type"] for ln in lines] == ["peer_handle_mint", "peer_handle_redeem"]


async def test_a_handle_with_any_characters_gets_the_planes_answer(peer_env: PeerEnv) -> None:
    """Every path below /resources/peer reaches the plane, a newline or a backslash in it too."""
    b = await peer_env.session("beta")
    for tail in ("x%0Ay", "x%09%5Cy", "%C3%9D%0A%C2%8E"):
        status, obj, _, _ = await peer_env.daemon.call(
            "GET", f"/resources/peer/{tail}", headers={"x-murmur-audience": b.audience}
        )
        assert status in (400, 403, 404), (tail, status, obj)
        assert set(obj) == {"error", "message"} and obj["message"], (tail, obj)
