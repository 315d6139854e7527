"""The limits policy on a Ray node: the keeper there decides and enforces a child's
``capabilities.resources`` with its own node's mechanisms, as the local backend does on the daemon's
host (docs/security.md, "Resource limits").

A real ``roost-capsule`` host runs a script capsule on worker node w1, as root. On this machine the
cgroup v2 hierarchy has no ``pids`` controller, so only a cgroup v1 ``pids`` cgroup of the job's own
can hold ``cgroup_pids_max``: the keeper must make one on its node. With job cgroups off, nothing on
the node can hold it, so the launch is refused naming the field — or, under ``advisory``, runs with
the limit listed as not enforced. Seed 000's ``shell`` row::

    | `resource_limit` | string | The `capabilities.resources` field this subprocess hit — ...
    Written only when the kernel's own evidence names exactly one limit ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from roost.backends.ray.placement import keeper_name
from tests.compat.limits_support import FORKS, finished_job, run_job, session_lines
from tests.support.cluster import ray_settings
from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder

# Above the test's worst-case waits, plus the session cluster's start for the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

PLACEMENT = {"forker": {"resources": {"w1": 1}}}


async def _daemon(
    daemon_factory: Any, registry: RegistryBuilder, cluster: Any, tmp_path: Path, ns: str, **more: Any
) -> RunningDaemon:
    """A daemon whose ``forker`` (60 forks under ``cgroup_pids_max: 20``) runs on w1 under the
    real capsule host."""
    registry.add("forker", capabilities={"resources": {"cgroup_pids_max": 20, "cpu_seconds": 60}}, script=FORKS)
    settings = ray_settings(cluster, tmp_path, ns, ray_placement=PLACEMENT, **more)
    del settings["runtime_command"]  # a script capsule: the node runs roost-capsule
    settings.update(spawn_allow=("forker",), launch_timeout_secs=60.0)
    d: RunningDaemon = await daemon_factory(registry.root, **settings)
    return d


def _forked(workdir: str) -> tuple[int, int]:
    out = (Path(workdir) / "out" / "result.txt").read_text()
    words = out.split("forked ")[1].split()
    return int(words[0]), int(words[3])


async def test_a_root_child_on_a_ray_node_cannot_fork_past_cgroup_pids_max(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, tmp_path: Path
) -> None:
    d = await _daemon(daemon_factory, registry, ray_cluster, tmp_path, ray_ns)
    w1 = ray_cluster.nodes["w1"]
    body = await run_job(d, "forker")
    assert body["node"]["node_id"] == w1
    assert Path(body["workdir"]).is_relative_to(ray_cluster.roots["w1"])
    job = await finished_job(d, body["job_id"], within=120)
    forked, uid = _forked(body["workdir"])
    assert uid == 0, "the child ran as root, which no rlimit on processes would hold"
    assert forked < 20, forked
    lines = session_lines(body["workdir"], body["session_id"])
    grants = lines[0]["effective_grants"]["resource_limits"]
    # What enforced it is what w1's own keeper has, not what the daemon's host has.
    ray = pytest.importorskip("ray")
    keeper = ray.get_actor(keeper_name(w1), namespace=ray_ns)
    here = (await keeper.info.remote())["resource_limits"]
    assert grants["mode"] == "enforce"
    assert grants["enforced"] == {"cpu_seconds": "rlimit RLIMIT_CPU", "cgroup_pids_max": here["cgroup_pids_max"]}
    assert str(here["cgroup_pids_max"]).startswith("cgroup v"), here
    shell = next(ln for ln in lines if ln["event_type"] == "shell")
    assert shell["resource_limit"] == "cgroup_pids_max", shell
    assert shell["exit_code"] == 3
    assert job.state == "failed" and job.outcome == "error"


async def test_a_limit_the_node_cannot_enforce_refuses_the_launch_naming_the_field(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, tmp_path: Path
) -> None:
    """No job cgroups on the node: nothing there can hold ``cgroup_pids_max``, so w1's keeper
    refuses the start before anything runs, and the daemon answers with its one sentence."""
    d = await _daemon(daemon_factory, registry, ray_cluster, tmp_path, ray_ns, job_cgroups="off")
    w1 = ray_cluster.nodes["w1"]
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "forker", "version": "0.1.0", "task": "go"})
    assert status == 409, body
    sentence = body["error"]
    head = f"forker@0.1.0 declares capabilities.resources.cgroup_pids_max, which Ray node {w1} cannot enforce "
    assert sentence.startswith(head + "(job cgroups are off"), sentence
    assert 'resource_limits = "advisory"' in sentence and "\n" not in sentence
    job = next(j for j in d.roost.launcher.jobs.values() if j.name == "forker")
    assert job.state == "failed" and job.pid is None
    assert job.node is not None and job.node.node_id == w1
    assert not list((Path(job.workdir) / ".murmur").glob("ses_*")), "no session ever started"


async def test_under_advisory_the_node_runs_it_and_lists_the_limit_as_not_enforced(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, tmp_path: Path
) -> None:
    d = await _daemon(
        daemon_factory, registry, ray_cluster, tmp_path, ray_ns, job_cgroups="off", resource_limits="advisory"
    )
    body = await run_job(d, "forker")
    assert body["node"]["node_id"] == ray_cluster.nodes["w1"]
    job = await finished_job(d, body["job_id"], within=120)
    assert _forked(body["workdir"])[0] == 60
    grants = session_lines(body["workdir"], body["session_id"])[0]["effective_grants"]["resource_limits"]
    assert grants["mode"] == "advisory"
    assert grants["enforced"] == {"cpu_seconds": "rlimit RLIMIT_CPU"}
    assert "job cgroups are off" in grants["not_enforced"]["cgroup_pids_max"], grants
    assert job.state == "complete"
