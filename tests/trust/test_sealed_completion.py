"""A completion the launcher delivers to a parent's door is sealed, so the door believes its trust.

End to end: a real parent capsule under ``roost-capsule`` (its door holds the seal key it got at
registration) delegates to the real sleeper with a one-second deadline; the launcher ends the
child at the deadline and delivers its own record to the parent's door. The parent's trace must
show that completion task with the delegation's trust: ``trusted`` for a trusted delegation
(unsealed, the door would have recorded ``untrusted``), ``untrusted`` for one made ``--untrusted``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roost.observe.tracelines import read_trace, trace_path
from roost.state.registry.packing import pack_capsule
from tests.support.launcher import job_final
from tests.support.registry import EXAMPLES, RegistryBuilder

PARENT = """
import subprocess
import sys

text = sys.stdin.read()
if text.startswith("Delegated capsule finished."):
    print("noted")
    sys.exit(0)
cmd = ["roost-capsule", "delegate", "sleeper@0.1.0", "--task=60", "--deadline-secs=1", "--wait"]
if "untrusted" in text:
    cmd.append("--untrusted")
subprocess.run(cmd, check=False)
"""


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
async def test_launcher_delivered_completion_carries_the_delegations_trust(
    daemon_factory: Any, registry: RegistryBuilder, trust: str
) -> None:
    registry.add(
        "boss",
        capabilities={"spawn": {"allow": ["sleeper"]}},
        script=PARENT,
        extra={"lifecycle": {"after_task": "exit"}},
    )
    pack_capsule(EXAMPLES / "capsules" / "sleeper", registry.root)
    d = await daemon_factory(registry.root, spawn_allow=("boss",), stop_grace_secs=1.0, launch_timeout_secs=30.0)
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "boss", "version": "0.1.0", "task": f"go {trust}"})
    assert status == 201, job
    final = await job_final(d, job["job_id"], timeout=60)
    assert final["state"] == "complete", final
    workdir = Path(job["workdir"])
    (child,) = (workdir / ".murmur" / "children").glob("sleeper-*")
    comp = json.loads((child / "completion.json").read_text())
    assert comp["reported_by"] == "launcher" and comp["status"] == "terminated" and comp["delivered"] is True, comp
    lines = read_trace(trace_path(workdir, job["session_id"]))
    received = [ln for ln in lines if ln["event_type"] == "task_start" and ln["origin"] == "completion"]
    assert len(received) == 1, received
    assert received[0]["delegation_id"] == comp["delegation_id"]
    assert received[0]["trust"] == trust, received[0]
    (start,) = [ln for ln in lines if ln["event_type"] == "delegation_start"]
    assert start.get("trust", trust) == trust, start
