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
from pathlib import Path

import pytest

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
# The keepers run on these nodes as Ray workers; they need not print usage statistics.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def _dev_extra_installed() -> bool:
    """Whether this environment has the ``dev`` extra (which includes ``ray``): its tools are here."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("mypy", "ruff", "hypothesis"))


try:
    import ray
except ImportError as exc:
    # Without the extra the cluster tests are skipped; with the dev extra (CI, a developer's
    # venv) a Ray that does not import is a broken install, and must fail, not skip quietly.
    if _dev_extra_installed() or os.environ.get("CI") or os.environ.get("ROOST_REQUIRE_RAY"):
        raise ImportError(
            f"the cluster tests need ray, which the dev extra installs, but it does not import ({exc}): "
            "reinstall with pip install -e '.[dev]'"
        ) from exc
    pytest.skip("the [ray] extra is not installed (pip install 'mur-roost[ray]')", allow_module_level=True)
from ray.cluster_utils import Cluster  # noqa: E402

from tests.support.cluster import (  # noqa: E402
    FAST_DEATH,
    NODE_CPUS,
    NODE_ROOT_ENV,
    TestCluster,
    kill_keepers,
    node_root,
)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[TestCluster]:
    """The session's cluster; this process is its one driver (in-process daemons join that
    connection), and every keeper a test started is killed with the test's namespace."""
    base = Path(tempfile.mkdtemp(prefix="roost-nodes-"))
    os.chmod(base, 0o755)
    head_env = node_root(base, "head")
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
            env = node_root(base, name)
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


@pytest.fixture
def ray_ns(ray_cluster: TestCluster) -> Iterator[str]:
    """A namespace of the test's own; its keepers are killed when the test ends. Request it
    *before* the daemon fixtures so its teardown runs after theirs (the daemon stops first)."""
    namespace = f"t-{os.urandom(4).hex()}"
    yield namespace
    kill_keepers(namespace)
