"""Seed 000's ``peer_handle_redeem``: the minting capsule's listener serves ``GET
/resources/peer/<handle>``, and both URLs — the capsule's door and the daemon's — answer any
fetcher the same way (a real daemon, a real ``roost-capsule`` minting through its host socket).

The seed's rows::

    **`peer_handle_redeem`** — written by the listener when `GET /resources/peer/<handle>` is
    answered, served or refused

    | `path` | string \\| null | The handle's path relative to `exports.peer_files.root`. `null` until
    the MAC has verified — a payload that failed it is caller-controlled and is not recorded as fact |
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import aiohttp
from multidict import CIMultiDict

from tests.compat.limits_support import run_job
from tests.support.capsules import wait_for
from tests.support.peer import CAPS, NOT_VALID, PLANE, PeerEnv, Session, trace_events
from tests.support.registry import RegistryBuilder

SHARER = """
import json, os, subprocess, sys
name, peer = sys.stdin.read().split()
os.makedirs("share", exist_ok=True)
size = 300_000 if name == "big.bin" else 5
with open(os.path.join("share", name), "wb") as fh:
    fh.write(bytes(i % 251 for i in range(size)))
out = subprocess.run(["roost-capsule", "share", name, "--peer", peer], capture_output=True, text=True)
sys.stdout.write(out.stdout)
sys.stderr.write(out.stderr)
sys.exit(out.returncode)
"""


Answer = tuple[int, CIMultiDict[str], bytes]


async def _get(url: str, audience: str | None) -> Answer:
    headers = {} if audience is None else {"x-murmur-audience": audience}
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as resp:
        return resp.status, CIMultiDict(resp.headers), await resp.read()


def _same(a: Answer, b: Answer) -> None:
    assert a[0] == b[0] and a[2] == b[2], (a, b)
    for h in ("Content-Type", "ETag", "X-Murmur-Handle-Id", "X-Murmur-Mtime-Ms", "Allow"):
        assert a[1].get(h) == b[1].get(h), h
    if a[0] == 200:
        assert a[1]["ETag"] == f'"sha256:{hashlib.sha256(a[2]).hexdigest()}"'
    assert a[1].get("X-Murmur-Handle-Id") is not None or a[0] in (404, 405)


async def _shared(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, name: str, max_bytes: str = "10Mi"
) -> tuple[Any, PeerEnv, dict[str, Any], str, Session, Session]:
    """A daemon, two registered peers with real doors, and a ``sharer`` job that exported
    ``name`` and minted a handle for ``beta``: ``(daemon, peers, the sharer's job, the handle,
    beta, alpha)``."""
    registry.add(
        "sharer",
        capabilities={"network": {"allow": ["127.0.0.1"]}},
        script=SHARER,
        extra={
            "exports": {"peer_files": {"root": "share", "max_bytes": max_bytes}},
            "lifecycle": {"after_task": "sleep"},
        },
    )
    for peer in ("alpha", "beta"):
        registry.add(peer, capabilities=CAPS, extra={"exports": PLANE})
    d = await daemon_factory(registry.root, spawn_allow=("sharer", "alpha", "beta"))
    env = PeerEnv(d, tmp_path / "peers")
    beta, alpha = await env.session("beta"), await env.session("alpha")
    job = await run_job(d, "sharer", f"{name} {beta.door_url}")
    result = Path(job["workdir"]) / "out" / "result.txt"
    await wait_for(lambda: result.exists() and "handle" in result.read_text(), within=60)
    return d, env, job, json.loads(result.read_text())["handle"], beta, alpha


async def _close(env: PeerEnv) -> None:
    for runner in env.runners:
        await runner.cleanup()


async def test_both_urls_serve_the_same_answer(daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path) -> None:
    d, env, job, handle, beta, alpha = await _shared(daemon_factory, registry, tmp_path, "f.txt")
    try:
        wd, door = Path(job["workdir"]), job["capsule_url"]
        at_door = f"{door}/resources/peer/{handle}"
        at_daemon = f"{d.url}/resources/peer/{handle}"

        served = await _get(at_door, beta.audience)
        assert served[0] == 200 and served[2] == bytes(i % 251 for i in range(5))
        _same(served, await _get(at_daemon, beta.audience))
        # Refusals are the daemon's, byte for byte: a wrong audience, no audience, a bad shape.
        for audience in (alpha.audience, None):
            refused = await _get(at_door, audience)
            _same(refused, await _get(at_daemon, audience))
            assert refused[0] in (400, 403)
        assert json.loads((await _get(at_door, alpha.audience))[2]) == NOT_VALID
        garbage = await _get(f"{door}/resources/peer/mh1.x", beta.audience)
        _same(garbage, await _get(f"{d.url}/resources/peer/mh1.x", beta.audience))
        async with (
            aiohttp.ClientSession() as http,
            http.post(at_door, headers={"x-murmur-audience": beta.audience}) as r,
        ):
            assert r.status == 405 and r.headers["Allow"] == "GET"

        # The door serves its own session's handles only: another session's valid handle is not
        # this capsule's to verify (the daemon's URL serves it).
        (alpha.workdir / "share" / "a.txt").write_text("alpha's")
        status, other = await env.mint(alpha, "a.txt", beta)
        assert status == 200, other
        foreign = await _get(f"{door}/resources/peer/{other['handle']}", beta.audience)
        assert (foreign[0], json.loads(foreign[2])) == (403, NOT_VALID)
        assert (await _get(f"{d.url}/resources/peer/{other['handle']}", beta.audience))[2] == b"alpha's"

        # The sharer's trace records every answer its door gave, the path only once the MAC held.
        sid = job["session_id"]
        lines = trace_events(wd, sid, "peer_handle_redeem")
        ok = [ln for ln in lines if ln["outcome"] == "ok"]
        assert ok and all(ln["path"] == "f.txt" and ln["sha256"] == hashlib.sha256(served[2]).hexdigest() for ln in ok)
        refused_lines = [ln for ln in lines if ln["outcome"] == "handle_not_valid"]
        assert any(ln["path"] is None for ln in refused_lines)
        assert all(other["handle"] not in json.dumps(ln) for ln in lines)
    finally:
        await _close(env)


async def test_a_large_file_streams_through_the_door(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    d, env, job, handle, beta, _ = await _shared(daemon_factory, registry, tmp_path, "big.bin", max_bytes="1Mi")
    try:
        served = await _get(f"{job['capsule_url']}/resources/peer/{handle}", beta.audience)
        assert served[0] == 200 and len(served[2]) == 300_000
        assert served[1]["ETag"] == f'"sha256:{hashlib.sha256(served[2]).hexdigest()}"'
        _same(served, await _get(f"{d.url}/resources/peer/{handle}", beta.audience))
    finally:
        await _close(env)
