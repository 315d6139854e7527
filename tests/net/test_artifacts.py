"""``GET /artifacts/{sha256}`` and the keeper's ``fetch_artifact``: verified, cached, atomic.

A real daemon serves its registry over TLS on loopback; the helper fetches with the test CA.
The one test double is a server that lies about the bytes (an interface, not our component):
the helper must refuse what it serves and cache nothing.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from roost.backends.ray.node.artifactfetch import (
    ArtifactFetchError,
    cached_path,
    fetch_artifact,
    fetch_artifact_blocking,
)
from roost.core.errors import IdentityRefused
from roost.core.tokens import verify_keeper
from roost.services.artifactserve import keeper_node, keeper_token
from roost.state.keys import KeyRing
from tests.net.support import add_capsule, make_pki, running

_KEYS = KeyRing(b"k" * 32)


@given(st.from_regex(r"[A-Za-z0-9._:@-]{1,128}", fullmatch=True))
def test_a_keeper_token_names_its_node_and_nothing_else_verifies(node: str) -> None:
    token = keeper_token(_KEYS, node)
    assert keeper_node(_KEYS, f"Bearer {token}") == node
    assert keeper_node(_KEYS, f"bearer  {token}") == node
    other = KeyRing(b"o" * 32)  # a rotated key revokes it
    with pytest.raises(IdentityRefused):
        keeper_node(other, f"Bearer {token}")
    tag, payload, mac = token.split(".")
    # The MAC's first character carries six whole bits, so changing it always changes the MAC
    # (its last character's low bits are padding and may decode alike).
    flipped = ("B" if mac[0] == "A" else "A") + mac[1:]
    for forged in (f"{tag}.{payload}.{flipped}", f"msc1.{payload}.{mac}", token + "x", ""):
        with pytest.raises(IdentityRefused):
            keeper_node(_KEYS, f"Bearer {forged}")
    # A credential's key is not a keeper's: the MAC domain and subkey both differ.
    with pytest.raises(Exception):  # noqa: B017 - Unauthenticated, whose text is fixed
        verify_keeper(_KEYS.credential_key, token)


def test_keeper_tokens_are_refused_without_bearer_and_node_ids_are_checked() -> None:
    token = keeper_token(_KEYS, "node-1")
    for header in (None, token, f"Basic {token}", "Bearer", "Bearer  "):
        with pytest.raises(IdentityRefused):
            keeper_node(_KEYS, header)
    for bad in ("", "a b", "x" * 129, "node/1"):
        with pytest.raises(ValueError):
            keeper_token(_KEYS, bad)


async def test_fetch_verifies_caches_and_reuses(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    registry = tmp_path / "registry"
    registry.mkdir()
    sha = add_capsule(registry, tmp_path / "src", "worker", script="print('x' * 100000)\n" + "#" * 300_000 + "\n")
    zip_bytes = (registry / "worker" / "0.1.0" / "worker-0.1.0.mur.zip").read_bytes()
    cache = tmp_path / "cache"
    async with running(tmp_path, registry, listen="127.0.0.1:0", tls_cert=pki.cert, tls_key=pki.key) as d:
        url = d.network_url
        assert url is not None
        token = keeper_token(d.keys, "node-a")
        path = await fetch_artifact(url, sha, cache, token=token, ca=pki.ca)
        assert path == cached_path(cache, sha) and path.read_bytes() == zip_bytes
        assert sorted(os.listdir(cache)) == [f"{sha}.mur.zip"]  # no temporary left behind
        # A tampered cached copy is found out, removed and fetched again.
        path.write_bytes(b"tampered")
        again = await fetch_artifact(url, sha, cache, token=token, ca=pki.ca)
        assert again.read_bytes() == zip_bytes
        # Refusals are sentences, and nothing is cached.
        missing = "0" * 64
        with pytest.raises(ArtifactFetchError, match=rf"answered HTTP 404 .*: no artifact with sha256 {missing}"):
            await fetch_artifact(url, missing, cache, token=token, ca=pki.ca)
        with pytest.raises(ArtifactFetchError, match=r"answered HTTP 403 .*: not authorised") as info:
            await fetch_artifact(url, "1" * 64, cache, token="mnk1.AAAA.BBBB", ca=pki.ca)
        assert "mnk1" not in str(info.value)
        with pytest.raises(ArtifactFetchError, match="is not trusted"):
            await fetch_artifact(url, "2" * 64, cache, token=token, ca=pki.other_ca)
        with pytest.raises(ArtifactFetchError, match="must be a sha256"):
            await fetch_artifact(url, "ABC", cache, token=token, ca=pki.ca)
        assert sorted(os.listdir(cache)) == [f"{sha}.mur.zip"]
        # The same bytes over the plain loopback listener too (a keeper on this host).
        plain = await fetch_artifact(d.url, sha, tmp_path / "cache2", token=token)
        assert plain.read_bytes() == zip_bytes
    # The daemon is gone: the verified copy is reused without asking it.
    assert (await fetch_artifact(url, sha, cache, token=token, ca=pki.ca)).read_bytes() == zip_bytes
    # A copy this process did not place or verify is re-hashed before it is trusted.
    other = tmp_path / "elsewhere"
    other.mkdir()
    cached_path(other, sha).write_bytes(zip_bytes)
    assert fetch_artifact_blocking(url, sha, other, token=token, ca=pki.ca).read_bytes() == zip_bytes


async def test_bytes_that_do_not_hash_to_the_name_are_never_cached(tmp_path: Path) -> None:
    wanted = hashlib.sha256(b"the real artifact").hexdigest()

    async def liar(request: web.Request) -> web.Response:
        return web.Response(body=b"something else", content_type="application/zip")

    app = web.Application()
    app.router.add_get("/artifacts/{sha256}", liar)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        with pytest.raises(ArtifactFetchError, match=rf"hashes to .*, not {wanted[:12]}…; nothing was cached"):
            await fetch_artifact(f"http://127.0.0.1:{port}", wanted, tmp_path / "cache", token="mnk1.x.y")
    finally:
        await runner.cleanup()
    assert os.listdir(tmp_path / "cache") == []
