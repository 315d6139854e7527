"""Seed 000's ``task_canceled``, at a real ``roost-capsule`` door cancelled over A2A.

The seed's rows::

    | `turn` | u32 | The turn that was in flight, 0-based. Absent for a task cancelled before it ran |
    | `phase` | string | `"queued"` \\| `"turn"` \\| `"inference"` \\| `"input"` \\| `"delegation"` — which wait the
    cancel interrupted |

    Appears at most once per task, before that task's terminal `task_end`. A task cancelled at
    `"queued"` never started, so it has no `task_start` and no `task_end` — this is its only record.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from a2a.client import A2AClient
from a2a.protocol.models import Message, Part, TaskState
from tests.support.capsules import Capsules, trace_events
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
