"""Peer handles across Ray nodes, through a real daemon on the session's 3-node test cluster.

Two sessions run as Ray children on different nodes: ``peera`` on w1 exports files, ``peerb`` on
w2 is the audience. Each is a small runtime (``PEER_RUNTIME`` below, run through
``runtime_command``) that registers with a ``capsule_url`` whose agent card names it, records its
credential in its own directory for the test, and waits for its lifeline. The test mints, redeems
and fetches through the daemon's HTTP API, and asks each node's keeper what it served and stored:
the bytes are read on w1 and written on w2 by those nodes' keepers, never by the daemon.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import ray

from roost.backends.ray.node.peers import NOT_ITS_DIR
from roost.backends.ray.placement import keeper_name
from roost.core import tokens
from roost.observe.tracelines import read_trace, trace_path
from tests.cluster.test_ray_records import daemon_stays_off
from tests.support.cluster import no_process_left, ray_settings, wait_for
from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder

# Above the test's worst-case waits, plus the session cluster's start for the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

SECRET = b"TOP-SECRET-outside-the-workdir-on-w1"
PLANE = {"peer_files": {"root": "share", "max_ttl": 900, "max_bytes": 128 * 1024 * 1024}}
CAPS = {"network": {"allow": ["127.0.0.1"]}, "peer_fetch": {"allow": ["127.0.0.1"]}}
PLACEMENT = {"peera": {"resources": {"w1": 1}}, "peerb": {"resources": {"w2": 1}}}

PEER_RUNTIME = r"""
import json, os, sys, threading, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

name, version = sys.argv[1].split("@")
workdir = sys.argv[sys.argv.index("--workdir") + 1]
approval = sys.stdin.readline().strip() if "--spawn-grant-stdin" in sys.argv else ""


class Card(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"name": name, "version": version, "url": URL}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Card)
URL = f"http://127.0.0.1:{server.server_port}"
threading.Thread(target=server.serve_forever, daemon=True).start()
sid = "ses_" + os.urandom(8).hex()
body = {"session_id": sid, "name": name, "version": version, "workdir": workdir, "capsule_url": URL}
req = urllib.request.Request(
    os.environ["MURMUR_ROOST_URL"] + "/register",
    data=json.dumps(body).encode(),
    method="POST",
    headers={"content-type": "application/json", **({"x-murmur-spawn-approval": approval} if approval else {})},
)
cred = json.loads(urllib.request.urlopen(req, timeout=30).read())["credential"]
tmp = os.path.join(workdir, ".peer.json.tmp")
with open(tmp, "w") as fh:
    json.dump({"session_id": sid, "credential": cred, "url": URL}, fh)
os.replace(tmp, os.path.join(workdir, "peer.json"))
print(json.dumps({"session_id": sid, "capsule_url": URL}), flush=True)
fd = int(os.environ["MURMUR_SPAWNER_LIFELINE"])
while os.read(fd, 64):
    pass
"""


@dataclass
class Peer:
    job: dict[str, Any]
    sid: str
    credential: str
    url: str
    name: str

    @property
    def workdir(self) -> Path:
        return Path(self.job["workdir"])

    @property
    def node_id(self) -> str:
        return str(self.job["node"]["node_id"])

    @property
    def audience(self) -> str:
        return f"{self.name}@{self.url.removeprefix('http://')}".lower()

    @property
    def cred(self) -> dict[str, str]:
        return {"x-murmur-spawn-credential": self.credential}


@pytest.fixture
async def peer_daemon(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, tmp_path: Path
) -> RunningDaemon:
    runtime = tmp_path / "peer_runtime.py"
    runtime.write_text(PEER_RUNTIME)
    for name in PLACEMENT:
        registry.add(name, capabilities=CAPS, extra={"exports": PLANE})
    settings = ray_settings(
        ray_cluster, tmp_path, ray_ns, runtime_command=(sys.executable, str(runtime)), spawn_allow=tuple(PLACEMENT)
    )
    settings["ray_placement"] = PLACEMENT
    d: RunningDaemon = await daemon_factory(registry.root, **settings)
    return d


async def _start(d: RunningDaemon, name: str) -> Peer:
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": name, "version": "0.1.0", "task": "serve"})
    assert status == 201, job
    info = json.loads((Path(job["workdir"]) / "peer.json").read_text())
    (Path(job["workdir"]) / "share").mkdir(exist_ok=True)
    return Peer(job, info["session_id"], info["credential"], info["url"], name)


async def _pair(d: RunningDaemon, ray_cluster: Any) -> tuple[Peer, Peer]:
    a, b = await _start(d, "peera"), await _start(d, "peerb")
    assert a.node_id == ray_cluster.nodes["w1"] and b.node_id == ray_cluster.nodes["w2"]
    assert a.workdir.parent.parent != b.workdir.parent.parent  # each under its own node's root
    return a, b


async def _mint(d: RunningDaemon, owner: Peer, path: str, audience: Peer) -> tuple[int, Any]:
    status, body, _, _ = await d.call("POST", "/handles", json={"path": path, "peer": audience.url}, headers=owner.cred)
    return status, body


async def _redeem(d: RunningDaemon, handle: str, audience: str) -> tuple[int, Any, Any, bytes]:
    return await d.call("GET", f"/resources/peer/{handle}", headers={"x-murmur-audience": audience})


async def _stats(namespace: str, node_id: str) -> dict[str, int]:
    keeper = ray.get_actor(keeper_name(node_id), namespace=namespace)
    return dict(await keeper.peer_stats.remote())


async def _end(d: RunningDaemon, *peers: Peer) -> None:
    for p in peers:
        await d.call("POST", f"/jobs/{p.job['job_id']}/cancel")
    await no_process_left({p.job["job_id"] for p in peers})


async def test_a_handle_minted_on_one_node_is_redeemed_and_fetched_by_a_session_on_another(
    peer_daemon: RunningDaemon, ray_cluster: Any, ray_ns: str
) -> None:
    d = peer_daemon
    a, b = await _pair(d, ray_cluster)
    small = b"minted on w1\n"
    big = os.urandom(3 * 1024 * 1024 + 12345)  # several chunks, not a multiple of one
    (a.workdir / "share" / "notes.md").write_bytes(small)
    (a.workdir / "share" / "data.bin").write_bytes(big)
    fetched: dict[str, bytes] = {}
    # The daemon (this process) opens nothing on the nodes' roots while it mints, serves and stores.
    with daemon_stays_off(ray_cluster.base) as opened:
        for path, data in (("notes.md", small), ("data.bin", big)):
            status, minted = await _mint(d, a, path, b)
            assert status == 200, minted
            assert minted["audience"] == b.audience and minted["path"] == path
            status, _, resp, raw = await _redeem(d, minted["handle"], b.audience)
            assert status == 200
            assert raw == data
            assert resp.headers["etag"] == f'"sha256:{hashlib.sha256(data).hexdigest()}"'
            assert resp.headers["content-length"] == str(len(data))
            # The audience on w2 fetches it through the daemon's URL into its own node's peer-in/.
            status, stored, _, _ = await d.call(
                "POST", "/peer-fetch", json={"peer": d.url, "handle": minted["handle"]}, headers=b.cred
            )
            assert status == 200, stored
            assert stored["stored_path"] == f"peer-in/{minted['handle_id']}-{path}"
            assert stored["bytes"] == len(data) and stored["sha256"] == hashlib.sha256(data).hexdigest()
            fetched[stored["stored_path"].removeprefix("peer-in/")] = data
    # Exactly the two files on w2, whole, nothing half-written beside them; nothing on w1.
    assert {n: (b.workdir / "peer-in" / n).read_bytes() for n in os.listdir(b.workdir / "peer-in")} == fetched
    assert not (a.workdir / "peer-in").exists()
    assert opened == []
    # Each session's trace lines were written on its own node.

    def kinds(p: Peer) -> list[tuple[str, Any]]:
        path = trace_path(str(p.workdir), p.sid)
        return [(ln["event_type"], ln.get("outcome")) for ln in read_trace(path)] if path.exists() else []

    await wait_for(lambda: kinds(a).count(("peer_handle_redeem", "ok")) == 4 or None)
    assert kinds(a).count(("peer_handle_mint", "ok")) == 2
    await wait_for(lambda: kinds(b).count(("peer_file_fetch", "ok")) == 2 or None)
    # w1's keeper read every byte (two redeems and two fetches' redeems); w2's keeper stored both.
    on_a, on_b = await _stats(ray_ns, a.node_id), await _stats(ray_ns, b.node_id)
    assert on_a["served"] == 4 and on_a["stored"] == 0, on_a
    assert on_b["stored"] == 2 and on_b["served"] == 0 and on_b["open_sinks"] == 0, on_b
    # A client that leaves in the middle of a large file: w1's keeper stops reading and closes it.
    huge = a.workdir / "share" / "huge.bin"
    with huge.open("wb") as fh:
        fh.truncate(64 * 1024 * 1024)
    status, minted = await _mint(d, a, "huge.bin", b)
    assert status == 200, minted
    keeper_pid = (await ray.get_actor(keeper_name(a.node_id), namespace=ray_ns).info.remote())["pid"]
    url = f"{d.url}/resources/peer/{minted['handle']}"
    async with d.http.get(url, headers={"x-murmur-audience": b.audience}) as resp:
        assert resp.status == 200
        assert len(await resp.content.readexactly(1024 * 1024)) == 1024 * 1024
        assert _holds(keeper_pid, huge)
        resp.close()
    await wait_for(lambda: not _holds(keeper_pid, huge), timeout=30)
    await _end(d, a, b)


def _holds(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open."""
    fds = Path(f"/proc/{pid}/fd")
    for fd in os.listdir(fds):
        with contextlib.suppress(OSError):
            if os.readlink(fds / fd) == str(path):
                return True
    return False


def _plant(a: Peer, outside: Path) -> None:
    share = a.workdir / "share"
    (share / "ok.txt").write_bytes(b"inside")
    (a.workdir / "secret.txt").write_bytes(SECRET)
    (a.workdir.parent / "secret.txt").write_bytes(SECRET)
    outside.mkdir(exist_ok=True)
    (outside / "secret.txt").write_bytes(SECRET)
    (share / "escape").symlink_to("../secret.txt")
    (share / "escape_far").symlink_to("../../secret.txt")
    (share / "escape_abs").symlink_to(outside / "secret.txt")
    (share / "dirlink").symlink_to("..")
    (share / "dirlink_abs").symlink_to(outside)
    os.mkfifo(share / "fifo")


async def test_path_rules_and_handle_checks_hold_for_files_on_another_node(
    peer_daemon: RunningDaemon, ray_cluster: Any, ray_ns: str, tmp_path: Path
) -> None:
    d = peer_daemon
    a, b = await _pair(d, ray_cluster)
    _plant(a, tmp_path / "outside")
    refused_before = (await _stats(ray_ns, a.node_id))["refused"]
    # Mint: the pure rules refuse traversal before any node is asked; the walk on w1 refuses links.
    for path, code in (
        ("../secret.txt", "outside_root"),
        ("%2e%2e/secret.txt", "outside_root"),
        ("/etc/passwd", "outside_root"),
        ("escape", "symlink_refused"),
        ("escape_abs", "symlink_refused"),
        ("dirlink/secret.txt", "symlink_refused"),
        ("fifo", "not_a_regular_file"),
        ("missing.txt", "not_found"),
    ):
        status, body = await _mint(d, a, path, b)
        assert (status, body["error"]) == (404 if code == "not_found" else 403, code), (path, body)
    # Redeem: handles naming those paths, minted with the session's own key as if it leaked,
    # are refused by the same rules on w1; no answer carries a byte from outside the root.
    rec = d.roost.table.get(a.sid)
    assert rec is not None
    key = d.keys.handle_key(rec.session_id, rec.handle_salt)
    exp = d.clock() + 60_000
    forged = {
        "escape": "symlink_refused",
        "escape_far": "symlink_refused",
        "escape_abs": "symlink_refused",
        "dirlink/secret.txt": "symlink_refused",
        "dirlink_abs/secret.txt": "symlink_refused",
        "fifo": "not_a_regular_file",
        "../secret.txt": "outside_root",
        "share/../../secret.txt": "outside_root",
        "%2e%2e/secret.txt": "not_found",  # p is never decoded again: a literal name, absent
    }
    for path, code in forged.items():
        handle = tokens.mint_handle(key, iss=a.sid, path=path, exp_ms=exp, audience=b.audience)
        status, body, _, raw = await _redeem(d, handle, b.audience)
        assert SECRET not in raw, path
        assert status != 200 and body["error"] == code, (path, status, body)
    reached_w1 = sum(1 for p, c in forged.items() if c != "outside_root")
    assert (await _stats(ray_ns, a.node_id))["refused"] - refused_before == reached_w1
    # A file swapped for a link after its handle was minted is refused at redeem, on w1.
    status, minted = await _mint(d, a, "ok.txt", b)
    assert status == 200, minted
    assert (await _redeem(d, minted["handle"], b.audience))[3] == b"inside"
    (a.workdir / "share" / "ok.txt").unlink()
    (a.workdir / "share" / "ok.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    status, body, _, raw = await _redeem(d, minted["handle"], b.audience)
    assert (status, body["error"]) == (403, "symlink_refused") and SECRET not in raw
    # Another audience, a forged MAC, an unknown session: the one no-oracle answer, no node asked.
    asked = (await _stats(ray_ns, a.node_id))["refused"]
    mac_pos = minted["handle"].rindex(".") + 1
    flipped = "B" if minted["handle"][mac_pos] != "B" else "C"
    forged_mac = minted["handle"][:mac_pos] + flipped + minted["handle"][mac_pos + 1 :]
    other = tokens.mint_handle(os.urandom(32), iss=a.sid, path="ok.txt", exp_ms=exp, audience=b.audience)
    for handle, audience in (
        (minted["handle"], f"mallory@{b.url.removeprefix('http://')}"),
        (minted["handle"], a.audience),
        (forged_mac, b.audience),
        (other, b.audience),
    ):
        status, body, _, _ = await _redeem(d, handle, audience)
        assert (status, body["error"]) == (403, "handle_not_valid"), body
    assert (await _stats(ray_ns, a.node_id))["refused"] == asked
    # A fetch by the wrong audience (the minter itself) is refused and leaves nothing on its node.
    (a.workdir / "share" / "plain.txt").write_bytes(b"plain")
    status, minted = await _mint(d, a, "plain.txt", b)
    assert status == 200, minted
    status, body, _, _ = await d.call(
        "POST", "/peer-fetch", json={"peer": d.url, "handle": minted["handle"]}, headers=a.cred
    )
    assert (status, body["error"]) == (502, "handle_not_valid"), body
    assert not (a.workdir / "peer-in").exists() or os.listdir(a.workdir / "peer-in") == []
    # The keeper serves only its own job directories, whatever a caller names.
    keeper = ray.get_actor(keeper_name(a.node_id), namespace=ray_ns)
    job_a, job_b = a.job["job_id"], b.job["job_id"]
    for job_id, workdir in ((job_a, "/"), (job_a, str(a.workdir / "share")), (job_b, str(a.workdir))):
        got = await keeper.peer_mint_target.remote(job_id, workdir, [], ["secret.txt"], None, False)
        assert got == {"error": [500, "io_error", f"read failed: {NOT_ITS_DIR}"]}, got
    assert await keeper.peer_in_open.remote(job_b, str(a.workdir), None) == {"errno": 13}
    # A file that changes while w1 streams it ends with the verdict that makes the daemon abort.
    data = os.urandom(1024 * 1024)
    (a.workdir / "share" / "grows.bin").write_bytes(data)
    stream = keeper.peer_open.options(_generator_backpressure_num_objects=1).remote(
        job_a, str(a.workdir), ["share"], ["grows.bin"], 10**9, None, False, 256 * 1024
    )
    head = await (await stream.__anext__())
    assert head["size"] == len(data) and head["sha256"] == hashlib.sha256(data).hexdigest(), head
    with (a.workdir / "share" / "grows.bin").open("ab") as fh:
        fh.write(b"appended while it was read")
    rest = [await ref async for ref in stream]
    assert b"".join(x for x in rest if isinstance(x, bytes)) == data
    assert rest[-1] == {"unchanged": False}
    await _end(d, a, b)
