"""One Ray test cluster per test session: a head and two worker nodes on this machine.

Each node carries its own custom resource (``head``, ``w1``, ``w2``) so a test can place a child
on a chosen node through the per-capsule placement config, and its own root directory for child
directories (``MURMUR_ROOST_NODE_ROOT`` in that node's environment, distinct per node): the
daemon is never told where those are, as on machines that share no filesystem, so every record
of a remote child has to reach the daemon through its node's keeper. Every byte stays on loopback
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``: each node binds 127.0.0.1), no dashboard runs, and the
cluster is stopped by its own handle at the end — never by a command that stops every Ray
process on the machine (other test sessions may run theirs).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
# The keepers run on these nodes as Ray workers; they need not print usage statistics.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

ray = pytest.importorskip("ray", reason="the [ray] extra is not installed (pip install 'mur-roost[ray]')")
from ray.cluster_utils import Cluster  # noqa: E402

NODE_CPUS = 16


NODE_ROOT_ENV = "MURMUR_ROOST_NODE_ROOT"


def _node_root(base: Path, resource: str) -> dict[str, str]:
    """A node's own root (its raylet's environment, inherited by its keeper)."""
    root = base / f"{resource}-{os.urandom(3).hex()}"
    root.mkdir(mode=0o755)
    return {NODE_ROOT_ENV: str(root)}


@dataclass
class TestCluster:
    cluster: Any
    address: str
    nodes: dict[str, str]  # custom resource name → node id
    base: Path
    roots: dict[str, Path] = field(default_factory=dict)  # custom resource name → the node's own root

    def add_worker(self, resource: str) -> Any:
        env = _node_root(self.base, resource)
        node = self.cluster.add_node(num_cpus=NODE_CPUS, resources={resource: 1000}, env_vars=env)
        self.cluster.wait_for_nodes()
        self.nodes[resource] = node.node_id
        self.roots[resource] = Path(env[NODE_ROOT_ENV])
        return node


# A node that dies is noticed within a few seconds (the defaults take about half a minute).
FAST_DEATH = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 1000, "health_check_failure_threshold": 3}


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[TestCluster]:
    """The session's cluster; this process is its one driver (in-process daemons join that
    connection), and every keeper a test started is killed with the test's namespace."""
    base = Path(tempfile.mkdtemp(prefix="roost-nodes-"))
    os.chmod(base, 0o755)
    head_env = _node_root(base, "head")
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": NODE_CPUS,
            "resources": {"head": 1000},
            "include_dashboard": False,
            "_system_config": FAST_DEATH,
            "env_vars": head_env,
        },
    )
    try:
        test_cluster = TestCluster(cluster=cluster, address=cluster.address, nodes={}, base=base)
        test_cluster.nodes["head"] = cluster.head_node.node_id
        test_cluster.roots["head"] = Path(head_env[NODE_ROOT_ENV])
        for name in ("w1", "w2"):
            env = _node_root(base, name)
            node = cluster.add_node(num_cpus=NODE_CPUS, resources={name: 1000}, env_vars=env)
            test_cluster.nodes[name] = node.node_id
            test_cluster.roots[name] = Path(env[NODE_ROOT_ENV])
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace="roost-tests", log_to_driver=False, configure_logging=False)
        yield test_cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(base, ignore_errors=True)


def kill_keepers(namespace: str) -> int:
    """Kill the node keepers of one namespace (a test's daemon; keepers are detached)."""
    killed = 0
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry["namespace"] == namespace and entry["name"].startswith("roost-keeper-"):
            ray.kill(ray.get_actor(entry["name"], namespace=namespace))
            killed += 1
    return killed


@pytest.fixture
def ray_ns(ray_cluster: TestCluster) -> Iterator[str]:
    """A namespace of the test's own; its keepers are killed when the test ends. Request it
    *before* the daemon fixtures so its teardown runs after theirs (the daemon stops first)."""
    namespace = f"t-{os.urandom(4).hex()}"
    yield namespace
    kill_keepers(namespace)
