"""Tamper any byte of a token → 403 with the identical body (or 400 if the shape broke).

Hypothesis drives a blocking client in a worker thread while the daemon keeps serving on the
test's event loop.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.core import tokens
from tests.support.peer import PeerEnv

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def get(url: str, audience: str) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers={"x-murmur-audience": audience})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


async def test_tamper_any_byte(peer_env: PeerEnv) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    (a.workdir / "share" / "f.txt").write_text("payload")
    _, body = await peer_env.mint(a, "f.txt", b)
    handle: str = body["handle"]
    base = peer_env.daemon.url + "/resources/peer/"
    status, reference = await asyncio.to_thread(
        get, base + handle[:-2] + ("AA" if handle[-2:] != "AA" else "BA"), b.audience
    )
    assert status == 403
    start = len("mh1.")
    positions = [i for i, ch in enumerate(handle) if i >= start and ch != "."]

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(positions), st.sampled_from(ALPHABET))
    def check(pos: int, ch: str) -> None:
        if handle[pos] == ch:
            return
        tampered = handle[:pos] + ch + handle[pos + 1 :]
        status, raw = get(base + tampered, b.audience)
        try:
            tokens.split(tampered, "mh1")
        except tokens.Malformed:
            assert status == 400, (pos, ch)
            return
        assert status == 403, (pos, ch, raw)
        assert raw == reference

    await asyncio.to_thread(check)
    # the untampered token still works
    status, _, _, raw = await peer_env.redeem(handle, b.audience)
    assert (status, raw) == (200, b"payload")
