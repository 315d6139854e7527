"""Every route of every listener as a process inside a contained capsule, and a capsule's host socket.

A ``scoped`` capsule of root's (launched by the operator, its Landlock TCP rule left open by a
bare ``network.allow`` host so that the table, not Landlock, answers) is handed the list of
cells, generated here from the running applications, and sends each from inside its sandbox:
every daemon route over TCP and every admin route on the admin socket (it holds no credential),
every verb of its own host socket (as its entrypoint) and of another session's, every route of
another capsule's door and of the operator's dashboard. Each answer is compared with the
authorization table's (tests/trust/matrix.py). Another session's host socket is also driven from
this test's own root process (not a descendant of that session's entrypoint) and from uid 65534
with the socket loosened by hand: the peer's process is what it refuses, not file modes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import psutil
import pytest
from launcher.test_launch import start
from trust.attacker import NOBODY, request_as

from roost.capsule.probe import probe_host
from roost.core.authz import Listener
from roost.http.authz import route_keys
from tests.support.capsules import add_examples
from tests.support.daemon import RunningDaemon
from tests.support.launcher import wait_for
from tests.support.registry import RegistryBuilder
from tests.trust.admincells import admin_expect, admin_sample
from tests.trust.daemoncells import World, daemon_expect, daemon_sample
from tests.trust.edgecells import (
    dashboard_expect,
    dashboard_sample,
    door_expect,
    door_keys,
    door_sample,
    hostsock_keys,
    hostsock_sample,
    serve_dashboard,
)
from tests.trust.matrix import Expect, Ledger, Sample, send, unix

ORDER = {"advisory": 0, "scoped": 1, "sealed": 2}
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the operator's jobs run as root here"),
    pytest.mark.skipif(ORDER[probe_host().offered] < 1, reason="this host cannot enforce scoped"),
]

PROBER = r"""
import http.client, json, os, socket, sys
spec = json.loads(sys.stdin.read())
out = {}

class Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self.path_ = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(self.path_)

for cell in spec:
    where = cell["where"]
    if where == "own":
        where = "unix:" + os.environ["MURMUR_HOST_SOCKET"]
    try:
        if where.startswith("unix:"):
            conn = Unix(where[5:])
        else:
            host, port = where.removeprefix("http://").rsplit(":", 1)
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
        body = None if cell["body"] is None else json.dumps(cell["body"]).encode()
        conn.request(cell["method"], cell["path"], body=body, headers={"content-type": "application/json"})
        resp = conn.getresponse()
        streams = resp.getheader("content-type", "").startswith(("text/event-stream", "application/x-ndjson"))
        raw = b"" if streams else resp.read()
        out[cell["id"]] = [resp.status, raw.decode("utf-8", "replace")]
        conn.close()
    except OSError as exc:
        out[cell["id"]] = [0, f"{type(exc).__name__}: {exc}"]
sys.stdout.write(json.dumps(out))
"""

ENTRYPOINT: dict[tuple[str, str], Expect] = {
    # What the prober's own host socket passes back from the daemon, for its session's credential.
    ("POST", "/send"): Expect(403, contains="network policy"),
    ("POST", "/get"): Expect(403, contains="network policy"),
    ("POST", "/share"): Expect(404, contains="no_peer_plane"),
    ("POST", "/fetch"): Expect(403, contains="peer_not_allowed"),
    ("POST", "/delegate"): Expect(403, contains="not in parent's spawn_allow"),
    ("GET", "/jobs/{job_id}"): Expect(404, "job not found"),  # not its child
}


async def test_every_route_from_inside_a_contained_capsule(
    scratch: Path, daemon_factory: Any, registry: RegistryBuilder
) -> None:
    add_examples(registry, "echo")
    caps = {"containment": "scoped", "filesystem": {"scope": "out"}, "network": {"allow": ["localhost"]}}
    registry.add("prober", script=PROBER, capabilities=caps, extra={"lifecycle": {"after_task": "exit"}})
    d = await start(
        daemon_factory,
        registry,
        state_dir=scratch / "state",
        spawn_allow=("solo", "boss", "prober", "echo"),
        launch_timeout_secs=30.0,
    )
    # Another session: the echo capsule, its door and its host socket.
    status, echo, _, _ = await d.call("POST", "/jobs", json={"name": "echo", "version": "0.1.0", "task": "hi"})
    assert status == 201, echo
    other = d.roost.launcher.jobs[echo["job_id"]]
    await wait_for(lambda: other.state == "running" and other.session_id is not None, 30)
    assert other.session_id is not None and other.capsule_url is not None and d.roost.admin.path is not None
    socket_path = _host_socket(other.pid)
    world = World(other.session_id, "", "", "", other.job_id)
    async with serve_dashboard(d.roost.admin.path) as (dash_url, _guard, dash_app):
        plan = _plan(d, world, str(socket_path), other.capsule_url, dash_url, route_keys(dash_app), scratch)
        answers = await _probe(d, [cell for cell in plan if cell[0] != "here"])
    ledgers: dict[Listener, Ledger] = {}
    for where, listener, key, caller, _sample in plan:
        if where == "here":
            continue
        ledger = ledgers.setdefault(listener, Ledger(listener, _keys_of(plan, listener)))
        ledger.check(key, caller, _decoded(answers[_cell_id(listener, key, caller)]), _expect(listener, key, caller))
    # Another session's host socket from outside any capsule: root, and uid 65534 through modes loosened.
    hs = ledgers[Listener.HOST_SOCKET]
    _loosen(socket_path, scratch)
    for _, _listener, key, caller, sample in (c for c in plan if c[0] == "here"):
        if caller == "other_uid":
            got = await request_as(NOBODY, unix(socket_path), sample.method, sample.path, sample.body)
        else:
            got = await send(unix(socket_path), sample)
        hs.check(key, caller, got, None)
    for listener, ledger in ledgers.items():
        ledger.finish(_CLASSES[listener])
    assert other.state == "running"  # nothing from inside reached it but its door
    assert sorted(j.name for j in d.roost.launcher.jobs.values()) == ["echo", "prober"]


_CLASSES = {
    Listener.DAEMON: ("in_capsule",),
    Listener.ADMIN: ("in_capsule",),
    Listener.HOST_SOCKET: ("entrypoint", "in_capsule", "root", "other_uid"),
    Listener.DOOR: ("in_capsule",),
    Listener.DASHBOARD: ("in_capsule",),
}

Cell = tuple[str, Listener, tuple[str, str], str, Sample]


def _plan(
    d: RunningDaemon,
    world: World,
    socket_path: str,
    door_url: str,
    dash_url: str,
    dash_keys: list[tuple[str, str]],
    scratch: Path,
) -> list[Cell]:
    """Every (listener, route, caller) cell this test drives, from the running applications:
    ``where`` is the address the prober dials (``own``: its own host socket; ``here``: sent
    from this test's process instead)."""
    assert d.roost.app is not None and d.roost.admin.path is not None
    admin = unix(d.roost.admin.path)
    cells: list[Cell] = []
    for key in route_keys(d.roost.app):
        cells.append((d.url, Listener.DAEMON, key, "in_capsule", daemon_sample(key, world)))
    for key in route_keys(d.roost._admin_app()):
        cells.append((admin, Listener.ADMIN, key, "in_capsule", admin_sample(key, world.own_sid, world.job)))
    records = scratch / "records"
    records.mkdir()
    for key in hostsock_keys(records):
        sample = hostsock_sample(key, world.job)
        cells.append(("own", Listener.HOST_SOCKET, key, "entrypoint", sample))
        cells.append((unix(socket_path), Listener.HOST_SOCKET, key, "in_capsule", sample))
        cells.append(("here", Listener.HOST_SOCKET, key, "root", sample))
        cells.append(("here", Listener.HOST_SOCKET, key, "other_uid", sample))
    for key in door_keys():
        cells.append((door_url, Listener.DOOR, key, "in_capsule", door_sample(key)))
    for key in dash_keys:
        cells.append((dash_url, Listener.DASHBOARD, key, "in_capsule", dashboard_sample(key, world.job, world.own_sid)))
    return cells


def _host_socket(pid: int | None) -> Path:
    """The host socket the capsule host ``pid`` (or a process of its tree) listens on."""
    assert pid is not None
    host = psutil.Process(pid)
    for proc in [host, *host.children(recursive=True)]:
        for conn in proc.net_connections(kind="unix"):
            if isinstance(conn.laddr, str) and conn.laddr.endswith("/host.sock"):
                return Path(conn.laddr)
    raise AssertionError(f"no host socket in the process tree of {pid}")


def _cell_id(listener: Listener, key: tuple[str, str], caller: str) -> str:
    return f"{listener.value} {key[0]} {key[1]} {caller}"


def _keys_of(plan: list[Cell], listener: Listener) -> list[tuple[str, str]]:
    return list(dict.fromkeys(key for _, lst, key, _, _ in plan if lst is listener))


async def _probe(d: RunningDaemon, cells: list[Cell]) -> dict[str, list[Any]]:
    """The prober's answers, one per cell, sent from inside its sandbox."""
    spec = [
        {"id": _cell_id(lst, key, caller), "where": where, "method": s.method, "path": s.path, "body": s.body}
        for where, lst, key, caller, s in cells
    ]
    status, job, _, _ = await d.call(
        "POST", "/jobs", json={"name": "prober", "version": "0.1.0", "task": json.dumps(spec)}
    )
    assert status == 201, job
    out = Path(job["workdir"]) / "out" / "result.txt"
    await wait_for(lambda: out.exists() and out.read_text().strip().endswith("}"), 120)
    answers: dict[str, list[Any]] = json.loads(out.read_text())
    return answers


def _decoded(answer: list[Any]) -> tuple[int, Any]:
    status, raw = answer
    try:
        return int(status), json.loads(raw)
    except ValueError:
        return int(status), raw


def _expect(listener: Listener, key: tuple[str, str], caller: str) -> Expect:
    if listener is Listener.DAEMON:
        return daemon_expect(key, caller)
    if listener is Listener.ADMIN:
        return admin_expect(key)  # the table refuses every cell first
    if listener is Listener.HOST_SOCKET:
        return ENTRYPOINT[key]
    if listener is Listener.DOOR:
        return door_expect(key, registered=True)
    return dashboard_expect(key, cookie=False)  # the owner's uid, without the run's token


def _loosen(socket_path: Path, scratch: Path) -> None:
    """As if an operator loosened modes by hand: uid 65534 may reach the socket file (its own
    directory, and the directories between it and ``scratch`` when it lies there)."""
    os.chmod(socket_path, 0o666)
    dirs = [socket_path.parent, *(p for p in socket_path.parents if p.is_relative_to(scratch) and p != scratch)]
    for parent in dict.fromkeys(dirs):
        os.chmod(parent, os.stat(parent).st_mode | 0o011)
