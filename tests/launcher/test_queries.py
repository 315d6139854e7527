"""The launcher's queries (what the admin API and probes ask instead of reading the tables)."""

from __future__ import annotations

from typing import Any

from tests.support.daemon import RunningDaemon
from tests.support.launcher import RUNTIME, add_doubles, job_final
from tests.support.registry import RegistryBuilder


async def test_list_stored_and_count_jobs(daemon_factory: Any, registry: RegistryBuilder) -> None:
    add_doubles(registry)
    d: RunningDaemon = await daemon_factory(registry.root, spawn_allow=("solo",), runtime_command=RUNTIME)
    launcher = d.roost.launcher
    ids = []
    for _ in range(2):
        status, body, _, _ = await d.call("POST", "/jobs", json={"name": "solo", "version": "0.1.0", "task": "sleep 0"})
        assert status == 201
        ids.append(body["job_id"])
        await job_final(d, body["job_id"])
        await launcher.jobs[body["job_id"]].done.wait()  # its final row is committed
    listed = await launcher.list_jobs()
    assert [j.job_id for j in listed] == ids  # oldest first
    assert [j.job_id for j in await launcher.list_jobs("complete")] == ids
    assert await launcher.list_jobs("running") == []
    assert launcher.counts_by_state() == {"complete": 2}
    # Gone from memory, still in the store.
    first = launcher.jobs.pop(ids[0])
    stored = await launcher.stored_job(ids[0])
    assert stored is not None and stored is not first
    assert (stored.job_id, stored.state, stored.name) == (ids[0], "complete", "solo")
    assert [j.job_id for j in await launcher.list_jobs()] == ids
    assert await launcher.stored_job("job_" + "0" * 32) is None
