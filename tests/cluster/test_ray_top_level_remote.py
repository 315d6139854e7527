"""A top-level job placed on a Ray node registers over the network with an approval bound to it.

From another host ``/register`` needs an approval; a top-level job's child gets a single-use one
of its own on stdin (roost/services/launcher/tickets.py). The test cluster shares this machine, so the
daemon's network listener is put on a non-loopback address of this machine and the children are
given it as ``advertise_url``: their registration then arrives from a non-loopback address, as
from another host, and the reach rules apply to it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.cluster import add_doubles, free_port, job_final, own_address, ray_settings
from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]


@pytest.fixture
async def network_daemon(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, tmp_path: Path
) -> RunningDaemon:
    add_doubles(registry)
    host = own_address()
    port = free_port(host)
    settings = ray_settings(
        ray_cluster,
        tmp_path,
        ray_ns,
        listen=f"{host}:{port}",
        allow_plaintext_network=True,
        advertise_url=f"http://{host}:{port}",
    )
    d: RunningDaemon = await daemon_factory(registry.root, **settings)
    return d


async def test_a_top_level_job_on_a_worker_node_registers_with_its_own_approval(
    network_daemon: RunningDaemon, ray_cluster: Any
) -> None:
    d = network_daemon
    advertised = d.config.advertise_url
    assert advertised is not None
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "mid", "version": "0.1.0", "task": "sleep 0.2"})
    assert status == 201, job
    assert job["node"]["node_id"] == ray_cluster.nodes["w1"]
    final = await job_final(d, job["job_id"], timeout=60)
    assert final["state"] == "complete", final
    double = json.loads((Path(job["workdir"]) / "double.json").read_text())
    assert double["env"]["MURMUR_ROOST_URL"] == advertised  # it registered over the network listener
    assert double["approval_on_stdin"] and double["approval_prefix"] == "mra1.", double
    assert "--spawn-grant-stdin" in double["argv"]
    rec = d.roost.table.get(job["session_id"])
    assert rec is not None and rec.parent_id is None and rec.job_id == job["job_id"], rec

    # Still refused from another host: a top-level register without an approval, or with one
    # that no job was given (forged), or one already spent.
    body = {"session_id": "ses_" + "1" * 32, "name": "mid", "version": "0.1.0"}
    async with aiohttp.ClientSession() as http:
        async with http.post(advertised + "/register", json=body) as resp:
            answer = await resp.json()
            assert resp.status == 403, answer
        assert "needs a spawn approval" in answer["error"], answer
        forged = {"x-murmur-spawn-approval": f"mra1.{job['job_id']}.{'A' * 32}"}
        async with http.post(advertised + "/register", json=body, headers=forged) as resp:
            answer = await resp.json()
            assert resp.status == 403, answer
        assert d.roost.table.get(body["session_id"]) is None
