"""Multi-turn on non-terminal tasks (A2A 1.0 §3.4: "Agents MAY accept additional messages for tasks
in non-terminal states"; the official SDK servers and the 0.3-era conformance suite accept them).

A message naming a ``submitted`` or ``working`` task is kept in its history and queued as a further
turn: the task stays ``working``, runs once per turn in order, each turn's output is an artifact,
and it ends after the last one. A blocking sender of a follow-up gets the task once its turn ran.
"""

from __future__ import annotations

import asyncio

from a2a.protocol.models import TaskState
from tests.a2a.conformance.harness import Caller, Script


async def test_a_working_task_takes_further_turns(caller: Caller, script: Script) -> None:
    d = caller.d
    task = await caller.send("hold")
    tid = task["id"]
    await asyncio.wait_for(script.started.get(), 5)
    second = await caller.send("second", taskId=tid)
    third = await caller.send("third", taskId=tid, contextId=task["contextId"])
    assert second["id"] == third["id"] == tid
    assert second["status"]["state"] == d.state(TaskState.WORKING)
    script.release.set()
    done = await caller.wait(tid, TaskState.COMPLETED)
    assert [(t.id, t.turn, t.text) for t in script.seen] == [(tid, 1, "hold"), (tid, 2, "second"), (tid, 3, "third")]
    assert [(a["artifactId"], a["parts"]) for a in done["artifacts"]] == [
        ("response", [d.part("echo: hold")]),
        ("response-2", [d.part("echo: second")]),
        ("response-3", [d.part("echo: third")]),
    ]
    users = [m["parts"][0]["text"] for m in done["history"] if m["role"] in ("user", "ROLE_USER")]
    assert users == ["hold", "second", "third"]


async def test_a_queued_task_takes_a_further_turn(caller: Caller, script: Script) -> None:
    blocker = await caller.send("hold")
    await asyncio.wait_for(script.started.get(), 5)
    queued = await caller.send("first")
    assert queued["status"]["state"] == caller.d.state(TaskState.SUBMITTED)
    await caller.send("follow-up", taskId=queued["id"])
    script.release.set()
    done = await caller.wait(queued["id"], TaskState.COMPLETED)
    assert [t.text for t in script.seen] == ["hold", "first", "follow-up"]
    assert len(done["artifacts"]) == 2
    await caller.wait(blocker["id"], TaskState.COMPLETED)


async def test_a_blocking_follow_up_is_answered_when_its_turn_has_run(caller: Caller, script: Script) -> None:
    d = caller.d
    task = await caller.send("hold")
    await asyncio.wait_for(script.started.get(), 5)
    waiting = asyncio.ensure_future(caller.send("later", taskId=task["id"], immediate=False))
    await asyncio.sleep(0.1)
    assert not waiting.done()  # its turn has not run: the first one holds
    script.release.set()
    answered = await asyncio.wait_for(waiting, 5)
    assert [a["parts"] for a in answered["artifacts"]][-1] == [d.part("echo: later")]


async def test_a_failed_turn_ends_the_task_and_drops_later_turns(caller: Caller, script: Script) -> None:
    task = await caller.send("hold")
    await asyncio.wait_for(script.started.get(), 5)
    await caller.send("fail now", taskId=task["id"])
    await caller.send("never", taskId=task["id"])
    script.release.set()
    await caller.wait(task["id"], TaskState.FAILED)
    assert [t.text for t in script.seen] == ["hold", "fail now"]


async def test_cancel_drops_queued_turns(caller: Caller, script: Script) -> None:
    task = await caller.send("hold")
    await asyncio.wait_for(script.started.get(), 5)
    await caller.send("queued turn", taskId=task["id"])
    await caller.ok("cancel", {"id": task["id"]})
    script.release.set()
    await caller.wait(task["id"], TaskState.CANCELED)
    await asyncio.sleep(0.05)
    assert [t.text for t in script.seen] == ["hold"]
    err = await caller.error("send", caller.d.send_params("late", taskId=task["id"]))
    assert err["code"] == -32004 and "terminal" in err["message"]
