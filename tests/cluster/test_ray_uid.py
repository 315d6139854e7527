"""A session's uid on a Ray node: its child runs there as that uid with its directory owned
accordingly, and a node whose keeper cannot switch users refuses such a launch with a sentence.

The caller is uid 65534 (tests/trust/attacker.py: a client process that dropped to it); the
daemon and the cluster's nodes run as root. The keeper that cannot switch users is a real keeper
on w2 whose Ray worker runs without CAP_SETUID/CAP_SETGID (started through Ray's own
``py_executable`` with ``setpriv``), as on a node whose Ray was started without them; the daemon
finds it by name like any keeper a previous daemon started.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roost.backends.ray.cluster import start_keeper
from roost.backends.ray.placement import node_root_name
from tests.support.cluster import add_doubles, job_final, ray_settings
from tests.support.daemon import RunningDaemon
from tests.support.launcher import DOUBLE
from tests.support.registry import RegistryBuilder
from tests.trust.attacker import NOBODY, owned_dir, request_as, system_python

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(420),
    pytest.mark.skipif(os.geteuid() != 0, reason="switching uids needs root"),
]


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory every uid can traverse (pytest's tmp_path is root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="roost-rayuid-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _ids(pid: int, field: str) -> tuple[int, ...]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return tuple(int(x) for x in line.split()[1:])
    raise AssertionError(f"no {field} line")


async def test_a_child_on_a_node_runs_as_the_sessions_uid_and_an_unable_keeper_refuses(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, scratch: Path
) -> None:
    add_doubles(registry)
    nodes_root = scratch / "nodes"
    settings = ray_settings(
        ray_cluster,
        scratch,
        ray_ns,
        runtime_command=(system_python(), str(DOUBLE)),  # an interpreter every uid can run
        launch_uids=(0, NOBODY),
    )
    assert settings["ray_node_root"] == nodes_root
    # w2's keeper: a real keeper whose Ray worker has no CAP_SETUID/CAP_SETGID.
    w2 = ray_cluster.nodes["w2"]
    wrapper = f"setpriv --inh-caps=-setuid,-setgid --bounding-set=-setuid,-setgid {sys.executable}"
    unable = start_keeper(w2, ray_ns, str(nodes_root), "auto", runtime_env={"py_executable": wrapper})
    identity = await unable.identity.remote()
    assert identity == {"uid": 0, "can_switch": False}, identity
    d: RunningDaemon = await daemon_factory(registry.root, **settings)
    wd = owned_dir(scratch, "wd", NOBODY)

    # On w1 (a keeper that can): the child runs as 65534, and its directory there is 65534's.
    launch = {"name": "mid", "version": "0.1.0", "workdir": str(wd), "task": "sleep 600"}
    status, job = await request_as(NOBODY, d.url, "POST", "/jobs", launch)
    assert status == 201, job
    assert job["node"]["node_id"] == ray_cluster.nodes["w1"]
    child = Path(job["workdir"])
    assert child.parent.parent.name == node_root_name(ray_cluster.nodes["w1"])
    pid = d.roost.launcher.jobs[job["job_id"]].pid
    assert pid is not None
    assert _ids(pid, "Uid") == (NOBODY,) * 4
    assert _ids(pid, "Gid") == (NOBODY,) * 4
    for p in (child, child / "input.json", child / "meta" / "job_id.txt", child / ".murmur" / "launcher.log"):
        assert p.stat().st_uid == NOBODY, p
    status, body = await request_as(NOBODY, d.url, "POST", f"/jobs/{job['job_id']}/cancel")
    assert status == 200, body
    final = await job_final(d, job["job_id"])
    assert final["state"] == "terminated", final
    assert (child / "completion.json").stat().st_uid == NOBODY

    # On w2 (the keeper that cannot): refused with the sentence, and nothing of the job is made.
    w2_jobs = Path((await unable.info.remote())["root"]) / "jobs"  # the node's own root (conftest)
    before = set(w2_jobs.iterdir())
    launch = {"name": "kid", "version": "0.1.0", "workdir": str(wd), "task": "sleep 0.2"}
    status, body = await request_as(NOBODY, d.url, "POST", "/jobs", launch)
    assert status == 409, body
    assert body["error"] == (
        f"the node keeper on Ray node {w2} runs as root without CAP_SETUID/CAP_SETGID, so it cannot start "
        f"a child as uid {NOBODY} (the session's own); give that node's Ray those capabilities, or place "
        "this capsule on another node"
    )
    assert set(w2_jobs.iterdir()) == before
    assert not [j for j in d.roost.launcher.jobs.values() if j.name == "kid"]
    # The same keeper still starts its own uid's children.
    status, mine, _, _ = await d.call("POST", "/jobs", json={**launch, "workdir": None})
    assert status == 201, mine
    assert mine["node"]["node_id"] == w2
    assert (await job_final(d, mine["job_id"]))["state"] == "complete"
