# ruff: noqa: ASYNC109
"""The Ray backend tests' helpers: the doubles' registry, placement per node, waits, a job's processes."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support.daemon import RunningDaemon
from tests.support.launcher import RUNTIME, wait_for
from tests.support.registry import RegistryBuilder

__all__ = [
    "FAST_DEATH",
    "NODE_CPUS",
    "NODE_ROOT_ENV",
    "PLACEMENT",
    "RUNTIME",
    "TestCluster",
    "add_doubles",
    "delegated_final",
    "free_port",
    "job_final",
    "job_processes",
    "job_view",
    "kill_keepers",
    "no_process_left",
    "node_root",
    "own_address",
    "ray_settings",
    "wait_for",
]

# Each capsule runs on one chosen node (the node's custom resource); "any" runs wherever there is room.
PLACEMENT = {
    "boss": {"resources": {"head": 1}},
    "mid": {"resources": {"w1": 1}},
    "kid": {"resources": {"w2": 1}},
    "big": {"resources": {"w1": 400}},
}


def add_doubles(registry: RegistryBuilder) -> None:
    spawn_all = {"spawn": {"allow": ["mid", "kid", "any", "boss"]}, "network": {"allow": ["localhost"]}}
    registry.add("boss", capabilities=spawn_all)
    registry.add("mid", capabilities=spawn_all)
    registry.add("kid", extra={"lifecycle": {"delegation_deadline_secs": 600}})
    registry.add("any", capabilities=spawn_all)
    registry.add("big")
    registry.add("huge", capabilities={"resources": {"cpu_percent": 100_000}})


def ray_settings(cluster: Any, tmp: Path, namespace: str, **more: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "launcher": "ray",
        "ray_address": cluster.address,
        "ray_namespace": namespace,
        "ray_node_root": tmp / "nodes",
        "ray_placement": PLACEMENT,
        "ray_busy_wait_secs": 3.0,
        "runtime_command": RUNTIME,
        "spawn_allow": ("boss", "mid", "kid", "any", "big", "huge"),
        "stop_grace_secs": 2.0,
        "lifeline_grace_secs": 3.0,
    }
    values.update(more)
    return values


async def job_view(d: RunningDaemon, job_id: str, headers: dict[str, str] | None = None) -> Any:
    status, body, _, _ = await d.call("GET", f"/jobs/{job_id}", headers=headers)
    assert status == 200, body
    return body


async def job_final(d: RunningDaemon, job_id: str, headers: dict[str, str] | None = None, timeout: float = 40) -> Any:
    async def check() -> Any:
        body = await job_view(d, job_id, headers)
        return body if body["state"] not in ("starting", "running") else None

    return await wait_for(check, timeout)


async def delegated_final(d: RunningDaemon, job_id: str, timeout: float = 40) -> Any:
    """A delegated job's final record (its GET /jobs answer needs the parent's credential; the
    test reads the launcher's own record of it instead)."""
    job = await wait_for(lambda: d.roost.launcher.jobs.get(job_id), timeout)
    await wait_for(lambda: job.done.is_set(), timeout)
    return job.view()


def job_processes(job_ids: set[str]) -> list[psutil.Process]:
    """Live processes (any node of the test cluster: they all run on this machine) of these jobs."""
    out = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("MURMUR_JOB_ID") in job_ids:
                out.append(proc)
        except (psutil.Error, OSError):
            continue
    return out


async def no_process_left(job_ids: set[str], timeout: float = 20) -> None:
    await wait_for(lambda: not job_processes(job_ids), timeout)


def own_address() -> str:
    """A non-loopback IPv4 address of this machine: it stands for the daemon's host as another
    node sees it (the test cluster shares this machine); the test is skipped without one."""
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return str(a.address)
    pytest.skip("this machine has no non-loopback IPv4 address to stand for another host")


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


# -- the test cluster (started by tests/cluster/conftest.py) --

NODE_CPUS = 16


NODE_ROOT_ENV = "MURMUR_ROOST_NODE_ROOT"


def node_root(base: Path, resource: str) -> dict[str, str]:
    """A node's own root (its raylet's environment, inherited by its keeper)."""
    root = base / f"{resource}-{os.urandom(3).hex()}"
    root.mkdir(mode=0o755)
    return {NODE_ROOT_ENV: str(root)}


@dataclass
class TestCluster:
    """The session's Ray cluster (tests/cluster/conftest.py starts it): nodes by custom resource."""

    __test__ = False  # a helper, not a test class

    cluster: Any
    address: str
    nodes: dict[str, str]  # custom resource name → node id
    base: Path
    roots: dict[str, Path] = field(default_factory=dict)  # custom resource name → the node's own root

    def add_worker(self, resource: str, env: dict[str, str] | None = None) -> Any:
        """A node with a custom resource of its own; ``env`` is added to its raylet's environment."""
        env = {**node_root(self.base, resource), **(env or {})}
        node = self.cluster.add_node(num_cpus=NODE_CPUS, resources={resource: 1000}, env_vars=env)
        self.cluster.wait_for_nodes()
        self.nodes[resource] = node.node_id
        self.roots[resource] = Path(env[NODE_ROOT_ENV])
        return node


# A node that dies is noticed within a few seconds (the defaults take about half a minute).
FAST_DEATH = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 1000, "health_check_failure_threshold": 3}


def kill_keepers(namespace: str) -> int:
    """Kill the node keepers of one namespace (a test's daemon; keepers are detached)."""
    import ray  # only the cluster tests import ray, after their conftest set its environment

    killed = 0
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry["namespace"] == namespace and entry["name"].startswith("roost-keeper-"):
            ray.kill(ray.get_actor(entry["name"], namespace=namespace))
            killed += 1
    return killed
