"""NUL bytes and control characters in peer-plane fields: a sentence, never a 500."""

from __future__ import annotations

import pytest

from tests.support.peer import PeerEnv


@pytest.mark.parametrize("bad", ["a\x00b", "\x00", "a\nb"])
async def test_handles_and_fetch_refuse_hostile_text(peer_env: PeerEnv, bad: str) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    (a.workdir / "share" / "f.txt").write_text("x")
    for path, peer in ((bad, b.door_url), ("f.txt", b.door_url + bad), ("f.txt", bad)):
        status, body = await peer_env.mint(a, path, peer)
        assert 400 <= status < 500, (path, peer, status, body)
        assert isinstance(body.get("error"), str | dict), body
    status, minted = await peer_env.mint(a, "f.txt", b)
    assert status == 200, minted
    for handle, peer in ((minted["handle"] + bad, None), (bad, None), (minted["handle"], peer_env.daemon.url + bad)):
        status, body = await peer_env.fetch(b, handle, peer)
        assert 400 <= status < 500, (handle, peer, status, body)
