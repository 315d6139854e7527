"""A2A 1.0 §3.1.1: a message naming ``taskId`` continues that task (both dialects).

Unknown id → -32001; terminal task → -32004; an interrupted task (input-required) takes the
message as its input and runs again; a contextId that is not the task's → -32602.
"""

from __future__ import annotations

from a2a.protocol.models import TaskState
from tests.a2a.conformance.harness import Caller, Script


async def test_input_required_then_continued(caller: Caller, script: Script) -> None:
    first = await caller.send("ask:which colour?", immediate=False)
    assert first["status"]["state"] == caller.d.state(TaskState.INPUT_REQUIRED)
    assert first["status"]["message"]["parts"][0]["text"] == "which colour?"
    tid, ctx = first["id"], first["contextId"]
    second = await caller.send("blue", immediate=False, taskId=tid, contextId=ctx, message_id="m2")
    assert second["id"] == tid and second["contextId"] == ctx
    assert second["status"]["state"] == caller.d.state(TaskState.COMPLETED)
    assert second["artifacts"][0]["parts"][0]["text"] == "echo: blue"
    assert [(t.id, t.turn, t.text) for t in script.seen] == [(tid, 1, "ask:which colour?"), (tid, 2, "blue")]
    task = await caller.get(tid)
    texts = [m["parts"][0]["text"] for m in task["history"]]
    assert texts == ["ask:which colour?", "which colour?", "blue", "echo: blue"]
    assert all(m["taskId"] == tid and m["contextId"] == ctx for m in task["history"])


async def test_continuation_without_context_id(caller: Caller) -> None:
    first = await caller.send("ask:name?", immediate=False)
    done = await caller.send("Ada", immediate=False, taskId=first["id"], message_id="m2")
    assert done["status"]["state"] == caller.d.state(TaskState.COMPLETED)
    assert done["contextId"] == first["contextId"]


async def test_unknown_task_is_not_found(caller: Caller) -> None:
    err = await caller.error("send", caller.d.send_params("x", taskId="tsk_nope"))
    assert err == {"code": -32001, "message": "Task not found"}


async def test_terminal_task_is_unsupported(caller: Caller) -> None:
    for text, state in (("done", TaskState.COMPLETED), ("fail", TaskState.FAILED)):
        task = await caller.send(text, immediate=False)
        assert task["status"]["state"] == caller.d.state(state)
        err = await caller.error("send", caller.d.send_params("more", taskId=task["id"]))
        assert err["code"] == -32004 and "terminal" in err["message"]
    held = await caller.send("ask:?", immediate=False)
    await caller.ok("cancel", {"id": held["id"]})
    err = await caller.error("send", caller.d.send_params("late", taskId=held["id"]))
    assert err["code"] == -32004 and "canceled" in err["message"]


async def test_context_mismatch_is_invalid(caller: Caller) -> None:
    first = await caller.send("ask:?", immediate=False)
    err = await caller.error("send", caller.d.send_params("x", taskId=first["id"], contextId="ctx-other"))
    assert err["code"] == -32602 and "contextId" in err["message"]
    still = await caller.get(first["id"])
    assert still["status"]["state"] == caller.d.state(TaskState.INPUT_REQUIRED)


async def test_auth_required_then_continued(caller: Caller, script: Script) -> None:
    """An auth-required task takes the next message as its input, as an input-required one does."""
    first = await caller.send("auth:sign in at the portal, then say done", immediate=False)
    assert first["status"]["state"] == caller.d.state(TaskState.AUTH_REQUIRED)
    assert first["status"]["message"]["parts"][0]["text"] == "sign in at the portal, then say done"
    tid = first["id"]
    listed = await caller.ok("list", {})
    assert [t["status"]["state"] for t in listed["tasks"]] == [caller.d.state(TaskState.AUTH_REQUIRED)]
    done = await caller.send("done", immediate=False, taskId=tid, contextId=first["contextId"], message_id="m2")
    assert done["id"] == tid and done["status"]["state"] == caller.d.state(TaskState.COMPLETED)
    assert [(t.turn, t.text) for t in script.seen] == [(1, "auth:sign in at the portal, then say done"), (2, "done")]
    again = await caller.error("send", caller.d.send_params("more", taskId=tid, message_id="m3"))
    assert again["code"] == -32004  # completed now: terminal


async def test_auth_required_task_can_be_canceled(caller: Caller) -> None:
    first = await caller.send("auth:token?", immediate=False)
    canceled = await caller.ok("cancel", {"id": first["id"]})
    assert canceled["status"]["state"] == caller.d.state(TaskState.CANCELED)
    err = await caller.error("send", caller.d.send_params("token", taskId=first["id"], message_id="m2"))
    assert err["code"] == -32004
