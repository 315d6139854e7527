"""Children on a Ray node reach the daemon over TLS, verifying it with their node's own CA.

The daemon's network listener serves TLS on a non-loopback address of this machine (the test
cluster shares it, so that address stands for the daemon's host as another node sees it), with
a certificate a test CA signed for that address, and children are given the ``https``
``advertise_url``. A node of the test's own carries ``MURMUR_ROOST_CA`` in its environment, as
an operator sets it before ``ray start``; its keeper hands it to the children it starts. Real
example capsules run there under the real ``roost-capsule``: the orchestrator registers top-level
with its job's approval, delegates to a worker on the same node, which registers with its spawn
approval, every call over TLS. Then the node's CA file is swapped for an unrelated CA's: the
next child cannot verify the daemon, and its registration fails with the sentence that says
what to set, so nothing ran unrefereed and verification was never off.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from roost.system.tlsclient import CA_ENV
from tests.net.support import make_pki
from tests.support.cluster import free_port, job_final, own_address, ray_settings, wait_for
from tests.support.daemon import RunningDaemon
from tests.support.registry import EXAMPLES

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

ON_TLS_NODE = {"orchestrator": {"resources": {"tls": 1}}, "worker": {"resources": {"tls": 1}}}


async def test_children_on_a_node_verify_the_daemon_with_that_nodes_ca(
    ray_ns: str, daemon_factory: Any, ray_cluster: Any, tmp_path: Path
) -> None:
    host = own_address()
    port = free_port(host)
    pki = make_pki(tmp_path / "pki", ips=(host,))
    node_ca = tmp_path / "node-ca.pem"  # the node's CA file (a path on that node)
    shutil.copy(pki.ca, node_ca)
    node_ca.chmod(0o644)
    node = ray_cluster.add_worker("tls", env={CA_ENV: str(node_ca)})
    try:
        settings = ray_settings(
            ray_cluster,
            tmp_path,
            ray_ns,
            ray_placement=ON_TLS_NODE,
            listen=f"{host}:{port}",
            tls_cert=pki.cert,
            tls_key=pki.key,
            advertise_url=f"https://{host}:{port}",
        )
        del settings["runtime_command"]  # the example capsules run under the real roost-capsule
        settings.update(spawn_allow=("orchestrator", "worker"), launch_timeout_secs=60.0)
        d: RunningDaemon = await daemon_factory(EXAMPLES / "registry", **settings)
        d.roost.launcher.delivery_window_secs = 2.0
        body = {"name": "orchestrator", "version": "0.1.0", "task": "red green blue"}

        status, orch, _, _ = await d.call("POST", "/jobs", json=body)
        assert status == 201, orch
        assert orch["node"]["node_id"] == node.node_id, orch
        worker = await wait_for(
            lambda: next((j for j in d.roost.launcher.jobs.values() if j.name == "worker"), None), timeout=60
        )
        final = await job_final(d, orch["job_id"], timeout=120)
        assert final["state"] == "complete", final
        await wait_for(lambda: worker.done.is_set(), timeout=30)
        assert worker.view()["state"] == "complete", worker.view()
        assert worker.node is not None and worker.node.node_id == node.node_id
        # Both registered with this daemon (over the network listener: the node was told only the
        # https URL): the orchestrator top-level as its job, the worker as its delegated child.
        parent = d.roost.table.get(orch["session_id"])
        assert parent is not None and parent.parent_id is None and parent.job_id == orch["job_id"], parent
        assert worker.session_id is not None
        child = d.roost.table.get(worker.session_id)
        assert child is not None and child.parent_id == orch["session_id"], child
        assert "worker report" in (Path(orch["workdir"]) / "out" / "result.txt").read_text()

        # The node's CA file now holds a CA that signed nothing here: the next child cannot
        # verify the daemon, so it never registers, and the refusal quotes its sentence.
        shutil.copy(pki.other_ca, node_ca)
        status, answer, _, _ = await d.call("POST", "/jobs", json=body)
        assert status == 502, answer
        url = f"https://{host}:{port}"
        assert f"failed to register this session with mur-roost at {url}: " in answer["error"], answer
        assert "is not trusted (" in answer["error"] and f"set {CA_ENV} (or pass --ca)" in answer["error"], answer
        refused = [j for j in d.roost.launcher.jobs.values() if j.name == "orchestrator" and j.job_id != orch["job_id"]]
        assert len(refused) == 1 and refused[0].session_id is None, refused
        assert (await job_final(d, refused[0].job_id))["state"] == "failed"
    finally:
        ray_cluster.cluster.remove_node(node, allow_graceful=False)
