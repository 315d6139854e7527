"""A remote child's registered workdir is checked on its own node, never on the daemon's disk.

At ``POST /register`` the daemon accepts a workdir only if it belongs to the session's uid
(docs/security.md). For a child the launcher placed on a Ray node, that question is about the
node's disk: its keeper runs the check there. Children are the runtime double
(tests/launcher/runtime_double.py), which registers its job's directory, or — as an attacker —
a workdir it planted in that directory: a symbolic link to ``/etc``, or a directory of another
uid. Both are refused on the node with the sentence the daemon gives on its own host.

The first test runs the daemon in this process under the audit hook that fails it if the
daemon opens a node's file itself. The second runs the daemon as a process in a mount namespace
of its own in which the nodes' roots are hidden (an empty tmpfs over them), so no node path
exists on the daemon's host at all: a remote child still registers, and the attacker is still
refused with the node's sentence (a check on the daemon's disk would answer "workdir must be an
existing directory").
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from roost.core.jobs import Job
from tests.support.cluster import RUNTIME, add_doubles, ray_settings, wait_for
from tests.support.daemon import DaemonProcess, RunningDaemon, start_daemon_process
from tests.support.nodewatch import daemon_stays_off
from tests.support.registry import RegistryBuilder

# Above the test's worst-case waits, plus the session cluster's start for the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

OTHER_UID = 65534


def _link_refusal(workdir: str) -> str:
    return (
        f"the workdir path component {workdir}/evil is a symbolic link, which another user could repoint; "
        "name the real directory"
    )


def _other_refusal(theirs: Path) -> str:
    return f"the workdir {theirs} belongs to uid {OTHER_UID}, not to the calling uid {os.geteuid()}"


def _refused(workdir: str) -> Any:
    path = Path(workdir) / "refused.json"
    return json.loads(path.read_text()) if path.exists() else None


def _delegated(workdir: str) -> dict[str, Any] | None:
    path = Path(workdir) / "delegated.json"
    return dict(json.loads(path.read_text())) if path.exists() else None


@pytest.fixture
async def ray_daemon(
    ray_ns: str, daemon_factory: Any, registry: RegistryBuilder, ray_cluster: Any, tmp_path: Path
) -> RunningDaemon:
    add_doubles(registry)
    d: RunningDaemon = await daemon_factory(registry.root, **ray_settings(ray_cluster, tmp_path, ray_ns))
    return d


async def test_remote_workdirs_are_checked_on_their_node_and_planted_ones_refused(
    ray_daemon: RunningDaemon, ray_cluster: Any
) -> None:
    d = ray_daemon
    jobs = d.roost.launcher.jobs

    def kid_with(parent_id: str | None) -> Job | None:
        # The daemon's own index (this process reads no file of a node while it is watched).
        return next((j for j in jobs.values() if j.name == "kid" and j.parent_id == parent_id and j.final), None)

    with daemon_stays_off(ray_cluster.base) as opened:
        # Legit: mid (w1) delegates kid (w2); each registers its own directory on its node.
        status, mid, _, _ = await d.call(
            "POST", "/jobs", json={"name": "mid", "version": "0.1.0", "task": "sleep 60 delegate kid sleep 0"}
        )
        assert status == 201, mid
        kid = await wait_for(lambda: kid_with(mid["session_id"]), timeout=60)
        assert kid.state == "complete" and kid.session_id is not None, kid.view()
        assert kid.node is not None and kid.node.node_id == ray_cluster.nodes["w2"]
        # Attackers on w2: a delegated child names a link to /etc it planted; a top-level one a
        # directory of another uid. Neither registers.
        status, mid2, _, _ = await d.call(
            "POST", "/jobs", json={"name": "mid", "version": "0.1.0", "task": "sleep 60 delegate kid plant-link"}
        )
        assert status == 201, mid2
        # Planted beside w2's root by the test: a child holds no capability to chown one itself.
        theirs = ray_cluster.base / "theirs"
        theirs.mkdir(mode=0o755)
        os.chown(theirs, OTHER_UID, OTHER_UID)
        status, top, _, _ = await d.call(
            "POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": f"plant-other={theirs}"}
        )
        assert status == 502, top
        linked = await wait_for(lambda: kid_with(mid2["session_id"]), timeout=60)
        other = await wait_for(lambda: kid_with(None), timeout=60)
    assert opened == [], f"the daemon opened files on a node's root itself: {opened[:5]}"
    for job in (linked, other):
        assert job.node is not None and job.node.node_id == ray_cluster.nodes["w2"]
        assert job.session_id is None and job.state == "failed", job.view()
    assert _refused(linked.workdir) == {"status": 403, "body": {"error": _link_refusal(linked.workdir)}}
    assert _refused(other.workdir) == {"status": 403, "body": {"error": _other_refusal(theirs)}}
    for sid in (mid["session_id"], mid2["session_id"]):
        rec = d.roost.table.get(sid)
        assert rec is not None and rec.workdir is not None and Path(rec.workdir).is_relative_to(ray_cluster.roots["w1"])
    status, body, _, _ = await d.call("POST", f"/jobs/{mid['job_id']}/cancel")
    assert status == 200, body
    status, body, _, _ = await d.call("POST", f"/jobs/{mid2['job_id']}/cancel")
    assert status == 200, body


def _toml(tmp: Path, registry: Path, cluster: Any, namespace: str) -> Path:
    placement = "\n".join(
        f"[ray_placement.{name}]\nresources = {{ {res} = 1 }}" for name, res in (("mid", "w1"), ("kid", "w2"))
    )
    cfg = tmp / "roost.toml"
    cfg.write_text(
        f'registry_path = "{registry}"\nstate_dir = "{tmp / "state"}"\n'
        'spawn_allow = ["mid", "kid"]\nstop_grace_secs = 2.0\n'
        f"runtime_command = {json.dumps(list(RUNTIME))}\n"
        f'launcher = "ray"\nray_address = "{cluster.address}"\nray_namespace = "{namespace}"\n'
        f'ray_node_root = "{tmp / "nodes"}"\n' + placement + "\n"
    )
    return cfg


def _hidden(base: Path) -> list[str]:
    """Run the daemon in a mount namespace of its own with an empty tmpfs over ``base``."""
    script = 'mount -t tmpfs -o size=1m,mode=0755 roost-hidden "$0" && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(base)]


def _only_on_node(pid: int, path: str) -> bool:
    """``path`` exists here (where the nodes are) but not in the mount namespace of process ``pid``."""
    there = subprocess.run(["nsenter", "-t", str(pid), "-m", "test", "-e", path], check=False).returncode == 0
    return Path(path).is_dir() and not there


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)")
async def test_a_remote_child_registers_though_its_path_does_not_exist_on_the_daemons_host(
    ray_ns: str, tmp_path: Path, registry: RegistryBuilder, ray_cluster: Any, daemon_processes: list[DaemonProcess]
) -> None:
    add_doubles(registry)
    cfg = _toml(tmp_path, registry.root, ray_cluster, ray_ns)
    loop = asyncio.get_running_loop()
    daemon = await loop.run_in_executor(
        None, partial(start_daemon_process, ["--config", str(cfg)], timeout=90, prefix=_hidden(ray_cluster.base))
    )
    daemon_processes.append(daemon)
    async with aiohttp.ClientSession() as http:

        async def post(path: str, body: dict[str, Any]) -> tuple[int, Any]:
            async with http.post(daemon.url + path, json=body) as r:
                return r.status, await r.json()

        async def final(job_id: str) -> dict[str, Any] | None:
            # roostctl's view (the admin socket): a delegated job is not the test's to read over HTTP.
            connector = aiohttp.UnixConnector(path=str(tmp_path / "state" / "admin.sock"))
            async with (
                aiohttp.ClientSession(connector=connector) as admin,
                admin.get(f"http://admin/jobs/{job_id}") as r,
            ):
                assert r.status == 200, await r.text()
                view = await r.json()
            return dict(view) if view["state"] not in ("starting", "running") else None

        status, mid = await post("/jobs", {"name": "mid", "version": "0.1.0", "task": "sleep 60 delegate kid sleep 0"})
        assert status == 201, mid
        kid = await wait_for(lambda: _delegated(mid["workdir"]), timeout=60)
        # Both directories are on their nodes, and neither exists where the daemon runs.
        for job in (mid, kid):
            assert _only_on_node(daemon.proc.pid, job["workdir"]), job["workdir"]
        done = await wait_for(lambda: final(kid["job_id"]), timeout=60)
        assert done["state"] == "complete" and done["session_id"], done
        # An attacker on w2 is refused with the node's own sentence.
        before = set(ray_cluster.roots["w2"].glob("*/jobs/*/refused.json"))
        status, top = await post("/jobs", {"name": "kid", "version": "0.1.0", "task": "plant-link"})
        assert status == 502, top
        (found,) = set(ray_cluster.roots["w2"].glob("*/jobs/*/refused.json")) - before
        workdir = str(found.parent)
        assert json.loads(found.read_text()) == {"status": 403, "body": {"error": _link_refusal(workdir)}}
        status, body = await post(f"/jobs/{mid['job_id']}/cancel", {})
        assert status == 200, body
        await wait_for(lambda: final(mid["job_id"]), timeout=30)
    assert daemon.stop() == 0
