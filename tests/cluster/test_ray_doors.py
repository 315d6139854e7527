"""The daemon's requests to the door of a session on a Ray node go through that node's keeper.

A door listens on its node's loopback, which on a real cluster the daemon cannot dial. On this
test cluster every node shares the machine's loopback, so a direct connection would succeed and
hide the bug: a Python audit hook therefore records every ``socket.connect`` this process (the
daemon runs in it) makes, and no connection may go to a remote session's door port. The keepers
run in Ray worker processes of their own, which the hook does not see.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from yarl import URL

from roost.observe.tracelines import trace_path
from tests.support.cluster import job_final, ray_settings, wait_for
from tests.support.daemon import RunningDaemon
from tests.support.registry import EXAMPLES
from tests.trace_checks import load_trace

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

_CONNECTS: dict[str, Any] = {"on": False, "seen": []}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _CONNECTS["on"] and event == "socket.connect" and len(args) > 1 and isinstance(args[1], tuple):
        _CONNECTS["seen"].append(args[1][:2])


sys.addaudithook(_audit)


@contextmanager
def connects() -> Iterator[list[tuple[str, int]]]:
    """Every (host, port) this process connects a socket to while the block runs."""
    seen: list[tuple[str, int]] = []
    _CONNECTS["on"], _CONNECTS["seen"] = True, seen
    try:
        yield seen
    finally:
        _CONNECTS["on"] = False


PLACEMENT = {
    "orchestrator": {"resources": {"w1": 1}},
    "worker": {"resources": {"w2": 1}},
    "echo": {"resources": {"w2": 1}},
}


@pytest.fixture
async def doors_daemon(ray_ns: str, daemon_factory: Any, ray_cluster: Any, tmp_path: Path) -> RunningDaemon:
    settings = ray_settings(ray_cluster, tmp_path, ray_ns, ray_placement=PLACEMENT)
    del settings["runtime_command"]
    settings.update(spawn_allow=("orchestrator", "worker", "echo"), launch_timeout_secs=60.0)
    d: RunningDaemon = await daemon_factory(EXAMPLES / "registry", **settings)
    d.roost.launcher.delivery_window_secs = 5.0
    return d


def _port(url: str | None) -> int:
    assert url is not None
    port = URL(url).port
    assert port is not None
    return port


async def test_completion_and_relay_reach_remote_doors_only_through_their_nodes_keeper(
    doors_daemon: RunningDaemon, ray_cluster: Any
) -> None:
    d = doors_daemon
    with connects() as seen:
        status, echo, _, _ = await d.call("POST", "/jobs", json={"name": "echo", "version": "0.1.0", "task": "hi"})
        assert status == 201, echo
        status, orch, _, _ = await d.call(
            "POST", "/jobs", json={"name": "orchestrator", "version": "0.1.0", "task": "red green blue"}
        )
        assert status == 201, orch
        worker = await wait_for(
            lambda: next((j for j in d.roost.launcher.jobs.values() if j.name == "worker"), None), timeout=60
        )
        final = await job_final(d, orch["job_id"], timeout=120)
        await wait_for(lambda: worker.done.is_set(), timeout=30)

        # The relay to a session on w2 (echo's door), from a session of this host.
        _sid, cred = await d.register_top("echo")
        status, sent, _, _ = await d.call(
            "POST",
            "/a2a/send",
            json={"peer_url": echo["capsule_url"], "text": "ping"},
            headers={"x-murmur-spawn-credential": cred},
        )
        assert status == 200, sent
        status, _, _, _ = await d.call("POST", f"/jobs/{echo['job_id']}/cancel")
        assert status == 200
    doors = {_port(orch["capsule_url"]), _port(echo["capsule_url"])}
    direct = [addr for addr in seen if addr[1] in doors]
    assert direct == [], f"the daemon dialled a remote session's door itself: {direct}"
    assert sent["task_id"] and sent["state"] in ("submitted", "working", "completed"), sent

    # The worker's completion was delivered by the daemon (sealed), once, to its parent's door on w1.
    assert final["state"] == "complete", final
    assert worker.view()["state"] == "complete", worker.view()
    assert worker.delivery == "delivered", worker.view()
    assert worker.completion is not None and worker.completion["delivered"] is True, worker.completion
    parent = load_trace(trace_path(orch["workdir"], orch["session_id"]))
    received = [
        ln
        for ln in parent
        if ln["event_type"] == "task_start"
        and ln.get("origin") == "completion"
        and ln.get("delegation_id") == worker.delegation_id
    ]
    assert len(received) == 1, received
    assert received[0]["trust"] == "trusted", received  # the door believed the daemon's seal
