"""Seed 000's ``task_canceled``, at a real ``roost-capsule`` door cancelled over A2A.

The seed's rows::

    | `turn` | u32 | The turn that was in flight, 0-based. Absent for a task cancelled before it ran |
    | `phase` | string | `"queued"` \\| `"turn"` \\| `"inference"` \\| `"input"` \\| `"delegation"` — which wait the
    cancel interrupted |

    | `delegation_ids` | array of string | Delegations still in flight when the loop stopped |

    Appears at most once per task, before that task's terminal `task_end`. A task cancelled at
    `"queued"` never started, so it has no `task_start` and no `task_end` — this is its only record.
    Nothing named in `detached_work_ids` or `delegation_ids` was stopped: both are reported so an
    operator knows what is still running, and both keep the lifecycle they already had.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from a2a.client import A2AClient
from a2a.protocol.models import Message, Part, TaskState
from tests.compat.limits_support import run_job, session_lines
from tests.support.capsules import Capsules, trace_events, wait_for
from tests.support.registry import RegistryBuilder
from tests.trace_checks import assert_trace_guarantees

SLOW = """
import sys, time
sys.stdin.read()
time.sleep(30)
"""


async def test_a_running_and_a_queued_task_are_recorded_where_they_stopped(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    registry.add(
        "slow",
        script=SLOW,
        extra={
            "lifecycle": {"after_task": "sleep", "task_acceptance": "queue"},
            "exports": {"peer_tasks": {"accept": True}},
        },
    )
    work = tmp_path / "w"
    work.mkdir()
    cp = await capsules.start("slow@0.1.0", work, registry=registry.root)
    async with A2AClient() as client:
        first = await client.send_message(
            cp.url, Message(message_id="m-1", role="user", parts=[Part(kind="text", text="a")])
        )
        second = await client.send_message(
            cp.url, Message(message_id="m-2", role="user", parts=[Part(kind="text", text="b")])
        )
        for _ in range(200):
            if (await client.get_task(cp.url, first.id)).status.state == TaskState.WORKING:
                break
            await asyncio.sleep(0.05)
        assert (await client.cancel_task(cp.url, second.id)).status.state == TaskState.CANCELED
        assert (await client.cancel_task(cp.url, first.id)).status.state == TaskState.CANCELED
    assert await cp.terminate() == 143
    lines = assert_trace_guarantees(cp.trace)
    canceled = {ln["task_id"]: ln for ln in lines if ln["event_type"] == "task_canceled"}
    queued, running = canceled[second.id], canceled[first.id]
    assert queued["phase"] == "queued" and "turn" not in queued
    assert queued["detached_work_ids"] == [] and queued["delegation_ids"] == []
    assert not [ln for ln in lines if ln.get("task_id") == second.id and ln["event_type"] != "task_canceled"]
    assert running["phase"] == "turn" and running["turn"] == 0
    order = [(ln["event_type"], ln.get("task_id")) for ln in lines]
    assert order.index(("task_canceled", first.id)) < order.index(("task_end", first.id))
    start = next(ln for ln in lines if ln["event_type"] == "task_start" and ln["task_id"] == first.id)
    assert running["parent_id"] == start["event_id"]
    assert len(trace_events(cp.trace)) == len(lines)


# The session's first task (its job's) only readies it; a task sent at its door then delegates
# twice: one child it waits for (it ends before the cancel), one it leaves running.
DELEGATOR = """
import pathlib, subprocess, sys, time
if sys.stdin.read().strip() == "ready":
    print("ready")
    sys.exit(0)
for args in (["--task=quick", "--wait"], ["--task=slow"]):
    subprocess.run(["roost-capsule", "delegate", "kid@0.1.0", *args], check=True, capture_output=True)
pathlib.Path("delegated").write_text("both")
time.sleep(60)
"""

KID = """
import sys, time
if sys.stdin.read().strip() == "slow":
    time.sleep(60)
print("kid done")
"""


async def test_a_cancelled_task_names_the_delegations_it_left_in_flight(
    daemon_factory: Any, registry: RegistryBuilder
) -> None:
    network = {"allow": ["127.0.0.1", "localhost"]}
    registry.add(
        "delegator",
        script=DELEGATOR,
        capabilities={"spawn": {"allow": ["kid"]}, "network": network},
        extra={"lifecycle": {"after_task": "sleep"}, "exports": {"peer_tasks": {"accept": True}}},
    )
    registry.add("kid", script=KID, capabilities={"network": network}, extra={"lifecycle": {"after_task": "exit"}})
    d = await daemon_factory(registry.root, spawn_allow=("delegator",), launch_timeout_secs=60.0)
    body = await run_job(d, "delegator", "ready")
    workdir = Path(body["workdir"])
    async with A2AClient() as client:
        task = await client.send_message(
            body["capsule_url"], Message(message_id="m-d", role="user", parts=[Part(kind="text", text="go")])
        )
        await wait_for(lambda: (workdir / "delegated").exists(), within=90)
        kids = [j for j in d.roost.launcher.jobs.values() if j.name == "kid"]
        quick = next(j for j in kids if j.state == "complete")
        slow = next(j for j in kids if j.state == "running")
        assert (await client.cancel_task(body["capsule_url"], task.id)).status.state == TaskState.CANCELED

    def canceled() -> list[dict[str, Any]]:
        lines = session_lines(workdir, body["session_id"])
        return [ln for ln in lines if ln["event_type"] == "task_canceled" and ln["task_id"] == task.id]

    await wait_for(canceled, within=20)
    (line,) = canceled()
    assert line["phase"] == "turn" and line["detached_work_ids"] == []
    # The one still running, by the id its delegation lines and its completion.json carry; not the
    # one that had already ended.
    assert line["delegation_ids"] == [slow.delegation_id], (line, quick.delegation_id)
    # Named, not stopped: it keeps the lifecycle it had.
    assert d.roost.launcher.jobs[slow.job_id].state == "running"
