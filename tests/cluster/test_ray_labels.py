"""The operator's per-capsule placement (``ray_placement``: node labels, custom resources) lands
each child on the node that has what it asks for, and a placement no node can satisfy is refused
at once with a sentence naming what is missing.

The label used is one every Ray node carries (``ray.io/node-id``), so the session's cluster needs
no extra node; the custom resources are the nodes' own (``head``, ``w1``, ``w2``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from roost.backends.ray.placement import node_root_name
from tests.support.cluster import PLACEMENT, add_doubles, job_final, ray_settings
from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder

# Above the test's worst-case waits, plus the session cluster's start for the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

NODE_ID = "ray.io/node-id"


async def _launch(d: RunningDaemon, name: str) -> tuple[int, Any]:
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": name, "version": "0.1.0", "task": "sleep 0.2"})
    return status, body


async def test_labels_and_custom_resources_place_each_child_on_its_node(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, tmp_path: Path
) -> None:
    nodes = ray_cluster.nodes
    add_doubles(registry)
    placement = {
        **PLACEMENT,
        "bylabel": {"labels": {NODE_ID: nodes["w2"]}},
        "both": {"resources": {"head": 1}, "labels": {NODE_ID: nodes["head"]}},
        "nowhere": {"labels": {"zone": "nowhere"}},
        "split": {"resources": {"w1": 1}, "labels": {NODE_ID: nodes["w2"]}},
    }
    for name in ("bylabel", "both", "nowhere", "split"):
        registry.add(name)
    settings = ray_settings(ray_cluster, tmp_path, ray_ns, ray_placement=placement)
    settings["spawn_allow"] = (*settings["spawn_allow"], "bylabel", "both", "nowhere", "split")
    d: RunningDaemon = await daemon_factory(registry.root, **settings)
    placed = {}
    for name, where in (("bylabel", "w2"), ("both", "head"), ("mid", "w1"), ("kid", "w2")):
        status, job = await _launch(d, name)
        assert status == 201, job
        assert job["node"]["node_id"] == nodes[where], (name, job["node"])
        # The child's directory is that node keeper's own.
        assert Path(job["workdir"]).parent.parent.name == node_root_name(nodes[where])
        placed[name] = job
    for job in placed.values():
        final = await job_final(d, job["job_id"])
        assert final["state"] == "complete" and final["node"]["node_id"] == job["node"]["node_id"], final
    cluster = d.roost.launcher.backend.cluster
    held_before = set(await cluster.job_pgs())
    t0 = time.monotonic()
    status, body = await _launch(d, "nowhere")
    assert status == 409, body
    assert body["error"] == (
        "no node of the Ray cluster carries the label zone=nowhere, which this capsule's placement asks for, "
        "so the child can never be placed"
    )
    status, body = await _launch(d, "split")
    assert status == 409, body
    assert body["error"].startswith("no single node of the Ray cluster has all of"), body
    assert "1 of the custom resource 'w1'" in body["error"], body
    # Refused from the nodes' totals, without waiting out ray_busy_wait_secs (3 s here) twice.
    assert time.monotonic() - t0 < 3.0
    # Nothing of the refused launches is left: no job, no reservation.
    assert not [j for j in d.roost.launcher.jobs.values() if j.name in ("nowhere", "split")]
    assert set(await cluster.job_pgs()) <= held_before, "a refused launch left a reservation"
