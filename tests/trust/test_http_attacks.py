"""What a local attacker who did not read our tests tried over HTTP, each as they tried it.

uid 65534 (a client forked to it) against root's jobs; a web page the operator visits posting
cross-site in each of the three content types a browser sends without a preflight; a uid outside
``launch_uids`` registering a session of its own and launching with its credential; a corrupt
compressed body; a relay told to dial the daemon itself. docs/security.md, "Who may call what".
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from launcher.test_launch import start
from trust.attacker import NOBODY, owned_dir, request_as, system_python

from a2a.door import Door, TaskOutcome
from roost.core.egress import own_refusal
from roost.http import middleware
from tests.support.daemon import RunningDaemon
from tests.support.doorserve import serve_door
from tests.support.launcher import DOUBLE
from tests.support.registry import RegistryBuilder

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="forking a client as uid 65534 needs root")
RUNTIME_ANYONE = (system_python(), str(DOUBLE))
JOB = {"name": "solo", "version": "0.1.0", "task": "sleep 60"}


async def test_another_uid_cannot_read_or_cancel_roots_job(daemon_factory: Any, registry: RegistryBuilder) -> None:
    d = await start(daemon_factory, registry, runtime_command=RUNTIME_ANYONE)
    status, job, _, _ = await d.call("POST", "/jobs", json=JOB)
    assert status == 201, job
    job_id = job["job_id"]  # in every user's `ps` (--workdir …/jobs/job_…)
    status, body = await request_as(NOBODY, d.url, "GET", f"/jobs/{job_id}")
    assert status == 404, body
    status, body = await request_as(NOBODY, d.url, "POST", f"/jobs/{job_id}/cancel")
    assert status == 404, body
    assert d.roost.launcher.jobs[job_id].state == "running"
    assert (await d.call("POST", f"/jobs/{job_id}/cancel"))[0] == 200  # root, not inside a job


CROSS_SITE_BODIES = (
    ("text/plain", '{"name": "solo", "version": "0.1.0", "task": "sleep 60"}'),
    ("application/x-www-form-urlencoded", '{"name": "solo", "version": "0.1.0", "task": "sleep 60", "x": "="}'),
    ("multipart/form-data; boundary=x", '{"name": "solo", "version": "0.1.0", "task": "sleep 60"}'),
)


@pytest.mark.parametrize(("ctype", "data"), CROSS_SITE_BODIES)
@pytest.mark.parametrize(
    "browser",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Host": "evil.example:7700", "Origin": "http://evil.example:7700"},  # DNS rebinding
    ],
)
async def test_a_cross_site_page_launches_nothing(
    daemon_factory: Any, registry: RegistryBuilder, ctype: str, data: str, browser: dict[str, str]
) -> None:
    d = await start(daemon_factory, registry, runtime_command=RUNTIME_ANYONE)
    headers = {"Content-Type": ctype, **browser}
    status, body = await request_as(0, d.url, "POST", "/jobs", data=data, headers=headers)
    assert status == 403, body
    assert not d.roost.launcher.jobs
    sid = "ses_" + os.urandom(8).hex()
    register = f'{{"session_id": "{sid}", "name": "boss", "version": "0.1.0"}}'
    status, body = await request_as(0, d.url, "POST", "/register", data=register, headers=headers)
    assert status == 403, body
    assert d.roost.table.get(sid) is None


async def test_non_browser_clients_keep_working(daemon_factory: Any, registry: RegistryBuilder) -> None:
    """``curl -d`` sends no Origin: a launch and a register as before (a form content type is
    still read as JSON, as upstream's runtimes expect)."""
    d = await start(daemon_factory, registry, runtime_command=RUNTIME_ANYONE)
    status, body = await request_as(
        0, d.url, "POST", "/jobs", data='{"name": "solo", "version": "0.1.0", "task": "sleep 60"}',
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )  # fmt: skip
    assert status == 201, body
    status, body = await request_as(0, d.url, "POST", "/jobs", JOB, headers={"Origin": d.url})
    assert status == 201, body  # our own origin may act


async def test_self_registration_outside_launch_uids_obtains_no_launch(
    daemon_factory: Any, registry: RegistryBuilder, scratch: Path
) -> None:
    d = await start(daemon_factory, registry, runtime_command=RUNTIME_ANYONE)
    wd = owned_dir(scratch, "wd", NOBODY)
    sid = "ses_" + os.urandom(8).hex()
    status, body = await request_as(
        NOBODY, d.url, "POST", "/register", {"session_id": sid, "name": "boss", "version": "0.1.0", "workdir": str(wd)}
    )
    assert status == 200, body  # upstream runtimes register top-level sessions of their own
    cred = {"x-murmur-spawn-credential": body["credential"]}
    status, body = await request_as(NOBODY, d.url, "POST", "/jobs", {"name": "kid", "version": "0.1.0"}, cred)
    assert status == 403 and "launch_uids" in body["error"], body
    assert not d.roost.launcher.jobs
    assert not any(wd.iterdir()) or not (wd / ".murmur" / "children").exists()


async def test_a_corrupt_compressed_body_is_a_400_sentence(daemon: RunningDaemon) -> None:
    corrupt = b"\x1f\x8b\x08\x00" + os.urandom(64)
    for path in ("/register", "/jobs", "/a2a/send"):
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                daemon.url + path,
                data=corrupt,
                headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
            ) as resp,
        ):
            assert resp.status == 400, (path, await resp.text())
            body = await resp.json()
            assert "Content-Encoding" in body["error"], body
    good = gzip.compress(b'{"session_id": "ses_0123456789abcdef", "name": "orchestrator", "version": "0.1.0"}')
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            daemon.url + "/register",
            data=good,
            headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
        ) as resp,
    ):
        assert resp.status == 200, await resp.text()


@pytest.mark.slow
async def test_a_trickled_body_is_cut_off_at_the_deadline(daemon: RunningDaemon, monkeypatch: Any) -> None:
    """A client that sends a request head, then its body a byte at a time and never all of it:
    408 with the sentence and ``Connection: close`` once the body deadline passes, and the
    connection ends within aiohttp's lingering read (10 s) although the client keeps trickling."""
    monkeypatch.setattr(middleware, "BODY_DEADLINE_SECS", 1.0)  # 30 s in production
    reader, writer = await asyncio.open_connection("127.0.0.1", daemon.port)
    writer.write(b"POST /register HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n")
    writer.write(b"Content-Length: 200\r\n\r\n{")
    await writer.drain()

    async def trickle() -> None:
        for _ in range(100):
            await asyncio.sleep(0.25)
            writer.write(b" ")
            await writer.drain()

    dripping = asyncio.create_task(trickle())
    try:
        # To EOF within 15 s: the trickle alone lasts 25 s and never completes the body.
        answer = await asyncio.wait_for(reader.read(), 15)
    finally:
        dripping.cancel()
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and b"Connection: close" in head, answer
    assert json.loads(body) == {"error": middleware.SLOW_BODY}, body


async def test_the_relay_never_dials_the_daemon_itself(daemon_factory: Any, registry: RegistryBuilder) -> None:
    registry.add("bare", capabilities={"network": {"allow": ["127.0.0.1", "localhost", "127.0.0.2"]}})
    d = await daemon_factory(registry.root, spawn_allow=("bare",))
    _, cred = await d.register_top("bare")
    port = d.port
    for url in (f"http://127.0.0.1:{port}", f"http://localhost:{port}/", f"http://127.0.0.2:{port}"):
        status, body, _, _ = await d.call(
            "POST",
            "/a2a/send",
            json={"peer_url": url, "text": "hi"},
            headers={"x-murmur-spawn-credential": cred},
        )
        assert status == 403 and body["error"] == own_refusal(url), (url, body)


async def test_a_workdir_swapped_after_registration_serves_nothing(
    daemon_factory: Any, registry: RegistryBuilder, scratch: Path
) -> None:
    """uid 65534 registers its own workdir, then replaces it with a link into a root 0700
    directory: a mint and a redeem must not serve the 0644 file it could not read itself."""
    registry.add(
        "exporter",
        capabilities={"network": {"allow": ["localhost", "127.0.0.1"]}},
        extra={"exports": {"peer_files": {"root": "share", "max_ttl": 900}}},
    )
    d = await daemon_factory(registry.root, spawn_allow=("exporter",))
    home = owned_dir(scratch, "att", NOBODY, 0o755)
    wd = owned_dir(home, "wd", NOBODY, 0o755)
    owned_dir(wd, "share", NOBODY, 0o755)
    vault = scratch / "vault"
    (vault / "inner" / "share").mkdir(parents=True)
    vault.chmod(0o700)
    (vault / "inner").chmod(0o755)
    secret = vault / "inner" / "share" / "secret.txt"
    secret.write_text("root's secret")
    secret.chmod(0o644)
    sid = "ses_" + os.urandom(8).hex()
    status, body = await request_as(
        NOBODY,
        d.url,
        "POST",
        "/register",
        {"session_id": sid, "name": "exporter", "version": "0.1.0", "workdir": str(wd)},
    )
    assert status == 200, body
    cred = {"x-murmur-spawn-credential": body["credential"]}
    async with serve_door(Door(name="reader", version="0.1.0", session_id="ses_reader", runner=_ok)) as peer:
        await _swap_and_read(d, home, wd, vault, cred, peer)


async def _ok(_task: Any) -> Any:
    return TaskOutcome.completed("ok")


async def _swap_and_read(d: RunningDaemon, home: Path, wd: Path, vault: Path, cred: dict[str, str], peer: str) -> None:
    # What uid 65534 can do to a directory of its own: move it away, put a link in its place.
    os.rename(wd, home / "wd.old")
    os.symlink(vault / "inner", wd)
    os.lchown(wd, NOBODY, NOBODY)
    status, minted = await request_as(NOBODY, d.url, "POST", "/handles", {"path": "secret.txt", "peer": peer}, cred)
    assert status != 200, minted
    assert "replaced after it registered" in minted.get("message", ""), minted
    # Even a handle minted before the swap redeems nothing afterwards.
    os.unlink(wd)
    os.rename(home / "wd.old", wd)
    (wd / "share" / "secret.txt").write_text("mine")
    status, minted = await request_as(NOBODY, d.url, "POST", "/handles", {"path": "secret.txt", "peer": peer}, cred)
    assert status == 200, minted
    os.rename(wd, home / "wd.old")
    os.symlink(vault / "inner", wd)
    status, body = await request_as(
        NOBODY, d.url, "GET", f"/resources/peer/{minted['handle']}", headers={"x-murmur-audience": minted["audience"]}
    )
    assert status != 200 and "root's secret" not in str(body), body
