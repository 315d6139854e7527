# ruff: noqa: ASYNC240
"""The operator may cancel any job through the admin socket, delegated ones included."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ops.support import admin_http

from roost.observe.tracelines import read_trace, trace_path
from roost.state.registry.packing import pack_capsule
from tests.support.launcher import job_final
from tests.support.registry import EXAMPLES, RegistryBuilder

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
        admin_http(d.config.admin_socket_path) as admin,
        admin.post(f"http://roost/jobs/{job['job_id']}/cancel") as resp,
    ):
        view = await resp.json()
        assert resp.status == 200, view
    assert view["state"] == "terminated"
    final = await job_final(d, job["job_id"], {CRED: cred})
    assert final["state"] == "terminated"
    assert final["completion"]["status"] == "terminated"
    assert final["completion"]["reported_by"] == "launcher"


async def test_parallel_duplicate_cancels_end_a_job_once(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    """Cancels by the parent and by the operator, fired at once, end the job exactly once: every
    answer is the job's view, one completion, one ``delegation`` line, no 5xx."""
    registry.add("boss", capabilities={"spawn": {"allow": ["sleeper"]}})
    pack_capsule(EXAMPLES / "capsules" / "sleeper", registry.root)
    d = await daemon_factory(registry.root, spawn_allow=("boss",), stop_grace_secs=1.0)
    wd = tmp_path / "boss"
    wd.mkdir()
    sid, cred = await d.register_top("boss", workdir=str(wd))
    status, job, _, _ = await d.call(
        "POST", "/jobs", json={"name": "sleeper", "version": "0.1.0", "task": "600"}, headers={CRED: cred}
    )
    assert status == 201, job
    job_id = job["job_id"]

    async def by_parent() -> tuple[int, Any]:
        status, view, _, _ = await d.call("POST", f"/jobs/{job_id}/cancel", headers={CRED: cred})
        return status, view

    async def by_operator() -> tuple[int, Any]:
        async with (
            admin_http(d.config.admin_socket_path) as admin,
            admin.post(f"http://roost/jobs/{job_id}/cancel") as resp,
        ):
            return resp.status, await resp.json()

    answers = await asyncio.gather(*(f() for _ in range(6) for f in (by_parent, by_operator)))
    assert all(status == 200 for status, _ in answers), answers
    assert all(view["job_id"] == job_id for _, view in answers)
    final = await job_final(d, job_id, {CRED: cred})
    assert final["state"] == "terminated" and final["completion"]["status"] == "terminated"
    child = Path(job["workdir"])
    assert [p.name for p in child.iterdir() if p.name.startswith("completion")] == ["completion.json"]
    lines = read_trace(trace_path(wd, sid))
    assert [ln["delegation_id"] for ln in lines if ln["event_type"] == "delegation"] == [job["delegation_id"]]
