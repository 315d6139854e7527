"""Seed 000, ``capabilities.resources`` and the ``shell`` line's ``resource_limit``, through a real
daemon, real capsule hosts and the kernel's own limits (docs/security.md, "Resource limits").

The seed's row (``shell`` table)::

    | `resource_limit` | string | The `capabilities.resources` field this subprocess hit —
    `cpu_seconds`, `max_file_size_bytes`, `cgroup_memory_bytes` or `cgroup_pids_max`. Written only
    when the kernel's own evidence names exactly one limit, and omitted from the line otherwise |
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from roost.state.registry.packing import PackError
from tests.compat.limits_support import FORKS, finished_job, run_job, session_lines
from tests.ops.support import admin_http, roostctl
from tests.support.registry import RegistryBuilder

ALLOCATES = """
import sys
blocks = [bytearray(16 * 1024 * 1024) for _ in range(32)]  # 512 MiB, touched
for b in blocks:
    b[::4096] = b"x" * len(b[::4096])
print("allocated", len(blocks) * 16, "MiB")
"""

CPU = """
while True:
    pass
"""


def _shell(lines: list[dict[str, Any]]) -> dict[str, Any]:
    shells = [ln for ln in lines if ln["event_type"] == "shell"]
    assert len(shells) == 1, shells
    return shells[0]


def _grants(lines: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(lines[0]["effective_grants"]["resource_limits"])


async def test_cgroup_pids_max_binds_a_root_job_and_is_named(daemon_factory: Any, registry: RegistryBuilder) -> None:
    """``cgroup_pids_max: 20``: most of 60 forks are refused, the task fails, and the ``shell`` line
    names ``cgroup_pids_max`` (the kernel counted refused forks in the job's pids cgroup)."""
    registry.add("forker", capabilities={"resources": {"cgroup_pids_max": 20}}, script=FORKS)
    d = await daemon_factory(registry.root, spawn_allow=("forker",))
    body = await run_job(d, "forker")
    job = await finished_job(d, body["job_id"])
    out = (Path(body["workdir"]) / "out" / "result.txt").read_text()
    forked = int(out.split("forked ")[1].split()[0])
    assert forked < 20, out
    lines = session_lines(body["workdir"], body["session_id"])
    shell = _shell(lines)
    assert shell["resource_limit"] == "cgroup_pids_max", shell
    assert shell["exit_code"] == 3
    grants = _grants(lines)
    assert grants["mode"] == "enforce"
    assert str(grants["enforced"]["cgroup_pids_max"]).startswith("cgroup v"), grants
    assert job.state == "failed" and job.outcome == "error"  # its one task failed


async def test_cgroup_memory_bytes_binds_and_is_named(daemon_factory: Any, registry: RegistryBuilder) -> None:
    """``cgroup_memory_bytes: 128Mi``: an entrypoint that touches 512 MiB is OOM-killed in the job's
    memory cgroup, and the ``shell`` line names ``cgroup_memory_bytes``."""
    registry.add("hog", capabilities={"resources": {"cgroup_memory_bytes": "128Mi"}}, script=ALLOCATES)
    d = await daemon_factory(registry.root, spawn_allow=("hog",))
    body = await run_job(d, "hog")
    await finished_job(d, body["job_id"])
    out = (Path(body["workdir"]) / "out" / "result.txt").read_text()
    assert "allocated" not in out, out
    shell = _shell(session_lines(body["workdir"], body["session_id"]))
    assert shell["resource_limit"] == "cgroup_memory_bytes", shell
    assert shell["exit_code"] == 128 + 9


async def test_cpu_seconds_is_named_by_sigxcpu(daemon_factory: Any, registry: RegistryBuilder) -> None:
    """``cpu_seconds: 1``: the entrypoint dies of ``SIGXCPU`` and the line names ``cpu_seconds``."""
    registry.add("spinner", capabilities={"resources": {"cpu_seconds": 1}}, script=CPU)
    d = await daemon_factory(registry.root, spawn_allow=("spinner",))
    body = await run_job(d, "spinner")
    await finished_job(d, body["job_id"])
    shell = _shell(session_lines(body["workdir"], body["session_id"]))
    assert shell["resource_limit"] == "cpu_seconds", shell
    assert shell["exit_code"] == 128 + 24


async def test_no_evidence_no_field(daemon_factory: Any, registry: RegistryBuilder) -> None:
    """A run that hit nothing has a ``shell`` line without ``resource_limit`` (omitted, not null)."""
    registry.add("calm", capabilities={"resources": {"cgroup_pids_max": 64, "cpu_seconds": 30}}, script="print('hi')")
    d = await daemon_factory(registry.root, spawn_allow=("calm",))
    body = await run_job(d, "calm")
    await finished_job(d, body["job_id"])
    lines = session_lines(body["workdir"], body["session_id"])
    shell = _shell(lines)
    assert "resource_limit" not in shell and shell["exit_code"] == 0
    end = next(ln for ln in lines if ln["event_type"] == "task_end")
    assert end["shell_calls"] == 1
    assert next(ln for ln in lines if ln["event_type"] == "session_end")["total_shell_calls"] == 1


async def test_an_unenforceable_limit_refuses_the_launch_naming_the_field(
    daemon_factory: Any, registry: RegistryBuilder
) -> None:
    """With no cgroups (``job_cgroups = "off"``) nothing can hold ``max_processes``: the launch is
    refused before anything runs, with one sentence naming the field and the fix."""
    registry.add("forker", capabilities={"resources": {"max_processes": 20}}, script=FORKS)
    d = await daemon_factory(registry.root, spawn_allow=("forker",), job_cgroups="off")
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "forker", "version": "0.1.0", "task": "go"})
    assert status == 409, body
    sentence = body["error"]
    assert "capabilities.resources.max_processes" in sentence and 'resource_limits = "advisory"' in sentence
    assert "\n" not in sentence
    job = next(j for j in d.roost.launcher.jobs.values() if j.name == "forker")
    assert job.state == "failed" and job.pid is None
    assert not [n for n in os.listdir(Path(job.workdir) / ".murmur") if n.startswith("ses_")]


async def test_advisory_runs_and_lists_what_is_not_enforced(daemon_factory: Any, registry: RegistryBuilder) -> None:
    """``resource_limits = "advisory"``: the same job runs, and ``effective_grants`` lists the
    limit as not enforced while the rlimit one stays enforced."""
    registry.add("forker", capabilities={"resources": {"max_processes": 20, "cpu_seconds": 30}}, script=FORKS)
    d = await daemon_factory(registry.root, spawn_allow=("forker",), job_cgroups="off", resource_limits="advisory")
    body = await run_job(d, "forker")
    await finished_job(d, body["job_id"])
    assert "forked 60" in (Path(body["workdir"]) / "out" / "result.txt").read_text()
    grants = _grants(session_lines(body["workdir"], body["session_id"]))
    assert grants["mode"] == "advisory"
    assert "job cgroups are off" in grants["not_enforced"]["max_processes"]
    assert grants["enforced"] == {"cpu_seconds": "rlimit RLIMIT_CPU"}


async def test_status_and_doctor_say_what_enforces_each_limit(daemon_factory: Any, registry: RegistryBuilder) -> None:
    """The admin ``GET /status`` names each field's mechanism here, and ``roostctl doctor`` lists
    the ones nothing enforces (advisory: they run unenforced)."""
    registry.add("calm", script="print('hi')")
    d = await daemon_factory(registry.root, spawn_allow=("calm",), job_cgroups="off", resource_limits="advisory")
    async with admin_http(d.config.admin_socket_path) as http, http.get("http://admin/status") as resp:
        status = await resp.json()
    limits = status["resource_limits"]
    assert limits["mode"] == "advisory"
    assert limits["mechanisms"]["cgroup_pids_max"] is None
    assert limits["mechanisms"]["cpu_seconds"] == "rlimit RLIMIT_CPU"
    doctor = await asyncio.to_thread(roostctl, "doctor", "--json", state_dir=d.config.state_dir)
    out = doctor.out
    findings = {f["check"]: f for f in json.loads(out)["findings"]}
    finding = findings["resource-limits"]
    assert finding["status"] == "warn"
    assert "not enforced here: cgroup_memory_bytes, cgroup_pids_max, cpu_percent" in finding["detail"]


def test_an_unknown_resource_key_is_refused_at_packing(registry: RegistryBuilder) -> None:
    """A key this daemon does not know could never be enforced: packing refuses it by name."""
    with pytest.raises(PackError, match=r"capabilities\.resources\.gpu_count is not a resource limit"):
        registry.add("odd", capabilities={"resources": {"gpu_count": 1}}, script="print(1)")


async def test_an_unknown_resource_key_in_a_published_artifact_is_reported(
    daemon_factory: Any, registry: RegistryBuilder
) -> None:
    """An artifact published elsewhere with a key this host does not know still runs; the key is
    listed as not enforced (an upstream manifest may carry fields this host does not know)."""
    registry.publish_unchecked(
        "odd", capabilities={"resources": {"gpu_count": 1, "cpu_seconds": 30}}, script="print('ok')"
    )
    d = await daemon_factory(registry.root, spawn_allow=("odd",))
    body = await run_job(d, "odd")
    await finished_job(d, body["job_id"])
    grants = _grants(session_lines(body["workdir"], body["session_id"]))
    assert "does not know the resource field 'gpu_count'" in grants["not_enforced"]["gpu_count"]
    assert grants["enforced"]["cpu_seconds"] == "rlimit RLIMIT_CPU"
