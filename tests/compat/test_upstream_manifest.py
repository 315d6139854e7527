"""An upstream-shaped capsule end to end: the seeds' field names, a registry-qualified allow
list, a formation id handed from parent to child — a real daemon, real ``roost-capsule`` hosts.

Seed 002 (plans), the ``capsule`` field::

    capsule	string	see notes	The bare name of a capsule in capabilities.spawn.allow — worker for
    local/worker — run as a sub-capsule through mur-roost

upstream-roost.md §7, the child's environment::

    | `MURMUR_FORMATION_ID` | parent is in a formation (`frm_` + 32 hex) |

Seed 000 (OTel span emission)::

    The `MURMUR_FORMATION_ID` host environment variable, when set, is forwarded into every hook's
    WASI environment and added as `murmur.formation_id` to the root span by `murmur-hook-grafana`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from roost.capsule.probe import probe_host
from tests.compat.limits_support import finished_job, run_job, session_lines
from tests.support.capsules import Capsules, base_env
from tests.support.launcher import RUNTIME, add_doubles, wait_for
from tests.support.registry import RegistryBuilder

FORMATION = "frm_019f01a93ff27c1e9a3b5d0c4e8f2a61"
CRED = "x-murmur-spawn-credential"

PLANNER = """
import json, os, subprocess, sys
task = sys.stdin.read().strip()
out = subprocess.run(["roost-capsule", "delegate", "worker@0.1.0", f"--task={task}", "--wait"],
                     capture_output=True, text=True)
sys.stderr.write(out.stderr)
print(json.dumps({"planner_formation": os.environ.get("MURMUR_FORMATION_ID"), "child": out.stdout.strip()}))
sys.exit(out.returncode)
"""

WORKER = """
import json, os, sys
print(json.dumps({"worker_formation": os.environ.get("MURMUR_FORMATION_ID"), "task": sys.stdin.read().strip()}))
"""

# What an upstream manifest carries beyond what the daemon acts on, kept as it is.
UPSTREAM_EXTRA: dict[str, Any] = {
    "description": "Plans with a worker (an upstream-shaped manifest).",
    "inference": {"model": "claude-sonnet", "max_turns": 12, "driver": {"artifact": "murmur-driver-anthropic"}},
    "tools": [{"name": "repo-files"}],
    "hooks": [{"name": "murmur-hook-eval"}],
    "lifecycle": {"after_task": "exit", "delegation_deadline_secs": "5m", "task_acceptance": "queue"},
    "observability": {"eval": {"scorers": [{"type": "exit_ok"}]}},
}


def _containment() -> str:
    return "scoped" if probe_host().offered != "advisory" else "advisory"


def _capabilities(spawn: list[str]) -> dict[str, Any]:
    return {
        "network": {"allow": ["127.0.0.1", "localhost"]},
        "spawn": {"allow": spawn},
        "env": {"allow": ["LANG"]},
        "resources": {
            "cpu_seconds": 120,
            "max_file_size_bytes": "64Mi",
            "cgroup_memory_bytes": "1Gi",
            "cgroup_pids_max": 256,
        },
        "containment": _containment(),
    }


async def test_an_upstream_manifest_runs_with_its_qualified_allow_list_and_formation(
    daemon_factory: Any, registry: RegistryBuilder
) -> None:
    registry.add("planner", capabilities=_capabilities(["local/worker"]), script=PLANNER, extra=UPSTREAM_EXTRA)
    worker_caps = _capabilities([])
    registry.add("worker", capabilities=worker_caps, script=WORKER, extra={"lifecycle": {"after_task": "exit"}})
    # The daemon's own allow list is qualified the same way.
    d = await daemon_factory(registry.root, spawn_allow=("local/planner",), launch_timeout_secs=60.0)
    d.roost.launcher.delivery_window_secs = 2.0
    body = await run_job(d, "planner", "plan it", formation_id=FORMATION)
    assert body["formation_id"] == FORMATION
    job = await finished_job(d, body["job_id"], within=90)
    out = (Path(body["workdir"]) / "out" / "result.txt").read_text()
    assert job.state == "complete", out
    answer = json.loads(out.strip().splitlines()[-1])
    assert answer["planner_formation"] == FORMATION
    assert json.loads(answer["child"].splitlines()[-1]) == {"worker_formation": FORMATION, "task": "plan it"}
    # Recorded on both sessions and both jobs, and the limits under the seeds' names were enforced.
    planner = d.roost.table.get(body["session_id"])
    assert planner is not None and planner.formation_id == FORMATION
    child = next(j for j in d.roost.launcher.jobs.values() if j.name == "worker")
    assert child.formation_id == FORMATION and child.state == "complete"
    grants = session_lines(body["workdir"], body["session_id"])[0]["effective_grants"]
    assert set(grants["resource_limits"]["enforced"]) == {
        "cpu_seconds",
        "max_file_size_bytes",
        "cgroup_memory_bytes",
        "cgroup_pids_max",
    }
    assert grants["spawn_allow"] == ["local/worker"]


async def test_a_bare_name_matches_exactly_and_another_registry_matches_nothing(
    daemon_factory: Any, registry: RegistryBuilder
) -> None:
    """Upstream's referee: ``POST /spawn`` of ``worker`` under ``spawn.allow: [other/worker]`` is
    refused with upstream's sentence, byte for byte; under ``[local/worker]`` and ``[worker]`` it is
    granted."""
    for name, allow in (("a", ["local/worker"]), ("b", ["worker"]), ("c", ["other/worker"])):
        registry.add(name, capabilities={"spawn": {"allow": allow}})
    registry.add("worker")
    d = await daemon_factory(registry.root, spawn_allow=("a", "b", "local/c"))
    for name, granted in (("a", True), ("b", True), ("c", False)):
        _, cred = await d.register_top(name)
        status, answer = await d.spawn(cred, "worker")
        if granted:
            assert status == 200, answer
        else:
            assert (status, answer) == (403, {"error": "capsule 'worker' is not in parent's spawn_allow"})
    status, answer, _, _ = await d.call(
        "POST", "/register", json={"session_id": "ses_qualified01", "name": "worker", "version": "0.1.0"}
    )
    assert (status, answer) == (403, {"error": "capsule 'worker' is not in --spawn-allow"})


async def test_a_formation_is_handed_on_from_an_upstream_runtimes_registration(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    """An upstream runtime registers with its ``formation_id``; the child the daemon launches for it
    gets ``MURMUR_FORMATION_ID``, which ``env.allow`` could never have passed on."""
    add_doubles(registry)
    d = await daemon_factory(registry.root, spawn_allow=("boss",), runtime_command=RUNTIME)
    wd = tmp_path / "wd"
    wd.mkdir()
    sid, cred = await d.register_top("boss", workdir=str(wd), formation_id=FORMATION)
    assert d.roost.table.get(sid).formation_id == FORMATION  # type: ignore[union-attr]
    status, job, _, _ = await d.call(
        "POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": "sleep 0"}, headers={CRED: cred}
    )
    assert status == 201, job
    double = Path(job["workdir"]) / "double.json"
    await wait_for(double.exists, 15)
    env = json.loads(double.read_text())["env"]
    assert env["MURMUR_FORMATION_ID"] == FORMATION


async def test_a_malformed_formation_id_is_refused_without_echoing_it(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    registry.add("solo", script="print('x')")
    d = await daemon_factory(registry.root, spawn_allow=("solo",))
    for bad in ("frm_ABC", "not-a-formation", FORMATION.upper(), FORMATION + "0"):
        status, body, _, _ = await d.call(
            "POST", "/jobs", json={"name": "solo", "version": "0.1.0", "task": "t", "formation_id": bad}
        )
        assert status == 400 and body["error"].startswith("formation_id is not a formation id: "), body
        assert bad not in body["error"]
        status, body, _, _ = await d.call(
            "POST",
            "/register",
            json={"session_id": "ses_frm0000001", "name": "solo", "version": "0.1.0", "formation_id": bad},
        )
        assert status == 400 and bad not in body["error"]
    # roost-capsule started with a malformed one refuses before any session exists (E-RUN-044).
    work = tmp_path / "w"
    work.mkdir()
    cp = await capsules.start(
        "solo@0.1.0", work, registry=registry.root, env=base_env(MURMUR_FORMATION_ID="frm_ABC"), expect_ready=False
    )
    assert await cp.wait(within=60) == 1
    said = "\n".join(cp.stderr)
    assert "E-RUN-044" in said and "frm_ABC" not in said and "lowercase hex" in said
    assert not (work / ".murmur").exists() or not [p for p in os.listdir(work / ".murmur") if p.startswith("ses_")]
