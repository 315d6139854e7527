"""Admission and continuation fill every DoorTask field from the message and how it arrived.

The door builds a DoorTask positionally on its hot path; these checks name each field, so a
field order that drifts from the constructor call is caught here.
"""

from __future__ import annotations

import time

from a2a.protocol import traceparent
from a2a.protocol.models import Message, TaskState, build, text_part
from a2a.protocol.origin import Lane, Provenance
from a2a.protocol.tasktypes import DoorTask, Incoming, TaskOutcome
from a2a.taskqueue import TaskQueue


async def _interrupt(_task: DoorTask) -> TaskOutcome:
    return TaskOutcome.input_required("which one?")


def _incoming(text: str, *, context_id: str | None, n: int) -> Incoming:
    parts = [text_part(text), text_part(f"{text}-2")]
    message = build(
        Message,
        {
            "message_id": f"msg-{n}",
            "role": "user",
            "parts": parts,
            "context_id": context_id,
            "task_id": None,
            "metadata": None,
        },
    )
    caller = traceparent.new()
    return Incoming(
        message=message,
        provenance=Provenance.from_wire("completion", "trusted"),
        raw_traceparent=caller.format(),
        trace=caller.child(),
        tracestate=f"vendor=s{n}",
        delegation_id=f"dlg-{n}",
        dialect="0.3" if n == 1 else "1.0",
        owner=f"uid:{n}",
    )


def _expected(incoming: Incoming) -> dict[str, object]:
    message = incoming.message
    return {
        "message_id": message.message_id,
        "text": message.text,
        "parts": tuple(message.parts),
        "provenance": incoming.provenance,
        "lane": Lane.BG,
        "traceparent_from_caller": incoming.raw_traceparent,
        "trace": incoming.trace,
        "tracestate": incoming.tracestate,
        "delegation_id": incoming.delegation_id,
        "dialect": incoming.dialect,
    }


async def test_admit_and_continue_fill_every_field() -> None:
    queue = TaskQueue(name="t", runner=_interrupt)
    first = _incoming("one", context_id="ctx-given", n=1)
    before_ms = time.time_ns() // 1_000_000
    rec = queue.admit(first)
    task = rec.task._asdict()
    assert task.pop("id").startswith("tsk_")
    assert task.pop("context_id") == "ctx-given"
    assert task.pop("owner") == "uid:1"
    assert task.pop("turn") == 1
    assert before_ms <= task.pop("received_at_ms") <= time.time_ns() // 1_000_000
    assert task == _expected(first)
    assert task["text"] == "one\none-2"

    await queue.drain()
    assert rec.state is TaskState.INPUT_REQUIRED
    second = _incoming("two", context_id=None, n=2)
    queue.continue_task(rec, second)
    again = rec.task._asdict()
    assert (again.pop("id"), again.pop("context_id"), again.pop("turn")) == (task_id := rec.task.id, "ctx-given", 2)
    assert task_id.startswith("tsk_")
    assert again.pop("owner") == "uid:1"  # the task stays its creator's
    again.pop("received_at_ms")
    assert again == _expected(second)
    await queue.shutdown()


async def test_admit_mints_a_context_when_none_is_given() -> None:
    queue = TaskQueue(name="t", runner=_interrupt)
    rec = queue.admit(_incoming("one", context_id=None, n=1))
    assert rec.task.context_id.startswith("ctx_") and rec.task.context_id != rec.task.id
    assert len(rec.task) == len(DoorTask._fields) and rec.task == DoorTask(**rec.task._asdict())
    await queue.shutdown()
