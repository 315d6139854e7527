"""Caller identity: the uid behind a loopback TCP connection (sock_diag) and a unix socket."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from pathlib import Path

import pytest
from trust.attacker import NOBODY, request_as

from roost.http.caller import identify
from roost.system.peercred import SockDiag, tcp_peer_uid, unix_peer_uid
from tests.support.daemon import DaemonProcess, RunningDaemon, start_daemon_process
from tests.support.registry import RegistryBuilder

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="acting as another uid needs root")


def _connected_as(uid: int, family: int, host: str, *, v6only: bool = True) -> tuple[socket.socket, int]:
    """A server-side socket whose client end was made by a child running as ``uid``."""
    srv = socket.socket(family)
    if family == socket.AF_INET6:
        srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1 if v6only else 0)
    srv.bind((host, 0))
    srv.listen()
    target = ("127.0.0.1" if not v6only and family == socket.AF_INET6 else host, srv.getsockname()[1])
    cfam = socket.AF_INET if target[0] == "127.0.0.1" else family
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgid(uid)
            os.setuid(uid)
            c = socket.socket(cfam)
            c.connect(target)
            time.sleep(3)
        finally:
            os._exit(0)
    conn, _ = srv.accept()
    srv.close()
    return conn, pid


@pytest.mark.parametrize(
    ("family", "host", "v6only"),
    [(socket.AF_INET, "127.0.0.1", True), (socket.AF_INET6, "::1", True), (socket.AF_INET6, "::", False)],
)
def test_tcp_peer_uid_is_the_other_ends_owner(family: int, host: str, v6only: bool) -> None:
    conn, pid = _connected_as(NOBODY, family, host, v6only=v6only)
    try:
        assert tcp_peer_uid(conn) == NOBODY
        caller = identify(conn)
        assert (caller.uid, caller.via, caller.loopback) == (NOBODY, "tcp", True)
    finally:
        conn.close()
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    # Our own connection: root's.
    srv = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(srv.getsockname())
    s, _ = srv.accept()
    assert tcp_peer_uid(s) == 0
    for x in (c, s, srv):
        x.close()


def test_no_such_socket_and_unix_sockets() -> None:
    diag = SockDiag()
    try:
        # No socket has this address pair: the kernel answers "no such socket".
        assert diag.owner_uid(("127.0.0.1", 1), ("127.0.0.1", 2)) is None
        assert diag.owner_uid(("not an address", 1), ("127.0.0.1", 2)) is None
        assert diag.owner_uid(("127.0.0.1", 1), ("::1", 2)) is None
    finally:
        diag.close()
    a, b = socket.socketpair()
    try:
        assert unix_peer_uid(a) == os.getuid()
        assert identify(a).via == "unix"
        assert unix_peer_uid(None) is None
    finally:
        a.close()
        b.close()


async def test_sessions_record_the_registering_uid_and_children_inherit(daemon: RunningDaemon) -> None:
    sid = "ses_" + os.urandom(8).hex()
    status, body = await request_as(
        NOBODY, daemon.url, "POST", "/register", {"session_id": sid, "name": "orchestrator", "version": "0.1.0"}
    )
    assert status == 200, body
    rec = daemon.roost.table.get(sid)
    assert rec is not None and rec.uid == NOBODY
    cred = body["credential"]
    # The child registers over root's connection, yet takes its parent's uid.
    status, grant = await daemon.spawn(cred, "worker")
    assert status == 200, grant
    child_sid, _ = await daemon.register_child(grant["approval"], "worker")
    child = daemon.roost.table.get(child_sid)
    assert child is not None and child.uid == NOBODY
    own_sid, _ = await daemon.register_top("orchestrator")
    own = daemon.roost.table.get(own_sid)
    assert own is not None and own.uid == 0
    await daemon.roost.store.commit([])
    rows = await daemon.roost.executor.run(
        daemon.roost.store.rows, "SELECT session_id, uid FROM sessions ORDER BY created_ms"
    )
    assert {r["session_id"]: r["uid"] for r in rows} == {sid: NOBODY, child_sid: NOBODY, own_sid: 0}


async def test_a_session_may_not_claim_another_users_process(daemon: RunningDaemon) -> None:
    body = {"session_id": "ses_claims_root", "name": "orchestrator", "version": "0.1.0", "pid": os.getpid()}
    status, answer = await request_as(NOBODY, daemon.url, "POST", "/register", body)
    assert status == 403, answer
    assert answer == {
        "error": f"pid {os.getpid()} is a process of uid 0, not of the calling uid {NOBODY}; "
        "name the session's own process, or no pid"
    }
    assert daemon.roost.table.get("ses_claims_root") is None
    # A process of its own that does not hold the connection is not believed, but not refused:
    # the session holds a lease instead of being watched.
    own = await asyncio.create_subprocess_exec("sleep", "30", user=NOBODY, group=NOBODY, extra_groups=[])
    try:
        body = {"session_id": "ses_claims_own", "name": "orchestrator", "version": "0.1.0", "pid": own.pid}
        status, answer = await request_as(NOBODY, daemon.url, "POST", "/register", body)
        assert status == 200, answer
        rec = daemon.roost.table.get("ses_claims_own")
        assert rec is not None and rec.pid is None and rec.uid == NOBODY
    finally:
        own.kill()
        await own.wait()


async def test_no_environment_turns_the_lookup_off(
    tmp_path: Path, registry: RegistryBuilder, daemon_processes: list[DaemonProcess]
) -> None:
    """The daemon asks the kernel whose a connection is, whatever its environment says: a
    benchmark switch that believed every loopback peer was the daemon's own uid (root here) is
    gone from the daemon, and setting it changes nothing."""
    registry.add("orchestrator")
    env = {**os.environ, "ROOST_BENCH_NO_IDENTITY_LOOKUP": "1"}
    args = ["--registry-path", str(registry.root), "--state-dir", str(tmp_path / "state")]
    d = start_daemon_process([*args, "--spawn-allow", "orchestrator"], env=env)
    daemon_processes.append(d)
    sid = "ses_" + os.urandom(8).hex()
    body = {"session_id": sid, "name": "orchestrator", "version": "0.1.0"}
    status, answer = await request_as(NOBODY, d.url, "POST", "/register", body)
    assert status == 200, answer
    for _ in range(100):  # the log line may land just after the answer
        registered = [json.loads(line) for line in d.stderr_lines if '"session_registered"' in line]
        if registered:
            break
        await asyncio.sleep(0.05)
    assert [(r["session_id"], r["uid"]) for r in registered] == [(sid, NOBODY)]


async def test_another_user_reads_the_loop_lag_but_cannot_erase_it(daemon: RunningDaemon) -> None:
    """A stall's record is evidence: any local user may read the lag samples, only the daemon's
    own user (or root) may clear them."""
    samples = daemon.roost.probes.lag_samples
    samples.extend([0.001, 0.002, 0.250])
    status, body = await request_as(NOBODY, daemon.url, "GET", "/debug/loop-lag")
    assert status == 200, body
    assert body["samples"] >= 3 and body["max_ms"] >= 250.0
    status, body = await request_as(NOBODY, daemon.url, "GET", "/debug/loop-lag?reset=1")
    assert status == 403, body
    assert body == {"error": f"only the daemon's own user (uid {os.geteuid()}) or root may reset the loop-lag samples"}
    assert max(samples) == 0.250
    async with daemon.http.get(daemon.url + "/debug/loop-lag?reset=1") as resp:
        assert resp.status == 200
    assert not any(s == 0.250 for s in samples)
