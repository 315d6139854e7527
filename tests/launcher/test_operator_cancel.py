"""The operator may cancel any job through the admin socket, delegated ones included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import EXAMPLES, RegistryBuilder
from launcher.conftest import job_final
from ops.support import admin_http

from roost.packing import pack_capsule

CRED = "x-murmur-spawn-credential"


async def test_admin_cancels_a_delegated_job(daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path) -> None:
    registry.add("boss", capabilities={"spawn": {"allow": ["sleeper"]}})
    pack_capsule(EXAMPLES / "capsules" / "sleeper", registry.root)
    d = await daemon_factory(registry.root, spawn_allow=("boss",), stop_grace_secs=1.0)
    wd = tmp_path / "boss"
    wd.mkdir()
    _, cred = await d.register_top("boss", workdir=str(wd))
    status, job, _, _ = await d.call(
        "POST", "/jobs", json={"name": "sleeper", "version": "0.1.0", "task": "600"}, headers={CRED: cred}
    )
    assert status == 201, job
    async with (
        admin_http(d.roost.config.admin_socket_path) as admin,
        admin.post(f"http://roost/jobs/{job['job_id']}/cancel") as resp,
    ):
        view = await resp.json()
        assert resp.status == 200, view
    assert view["state"] == "terminated"
    final = await job_final(d, job["job_id"], {CRED: cred})
    assert final["state"] == "terminated"
    assert final["completion"]["status"] == "terminated"
    assert final["completion"]["reported_by"] == "launcher"
