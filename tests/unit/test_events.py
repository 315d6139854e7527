"""Observation events: versioned shape, monotonic sequence, scalar attributes, lag marker."""

from __future__ import annotations

import re

import pytest

from roost.observe.events import EventBus, ObservedError


def test_span_lifecycle_shape() -> None:
    bus = EventBus(run_id="run1", clock=lambda: 42)
    span = bus.start("roost.process.start", job_id="job_1", pid=7)
    span.completed(exit_code=0)
    span.completed()  # finishing twice reports once
    started, done = bus.recent()
    assert started["schemaVersion"] == 1
    assert started["type"] == "operation.started" and done["type"] == "operation.completed"
    assert (started["sequence"], done["sequence"]) == (0, 1)
    assert started["eventId"] == f"{bus.execution_id}:0"
    assert started["runId"] == "run1" and started["timestamp"] == 42
    assert started["spanId"] == done["spanId"] and started["parentSpanId"] == bus.root_span
    assert started["subsystem"] == "process" and started["operation"] == "roost.process.start"
    assert done["attributes"] == {"job_id": "job_1", "pid": 7, "exit_code": 0}
    assert done["durationMs"] >= 0


def test_span_ids_are_random_16_hex_and_distinct() -> None:
    bus = EventBus()
    ids = [bus.start("roost.relay.send").span_id for _ in range(3000)]  # past one 4 KiB pool refill
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)
    assert len(set(ids)) == len(ids) and bus.root_span not in ids


def test_failed_carries_observed_error_and_child_span() -> None:
    bus = EventBus()
    parent = bus.start("roost.process.reconcile")
    child = bus.start("roost.completion.deliver", parent=parent)
    child.failed(ObservedError(name="DeliveryError", category="network", retryable=True, message="refused"))
    ev = bus.recent()[-1]
    assert ev["type"] == "operation.failed"
    assert ev["parentSpanId"] == parent.span_id
    assert ev["error"] == {"name": "DeliveryError", "category": "network", "retryable": True, "message": "refused"}


def test_attributes_must_be_scalars() -> None:
    bus = EventBus()
    with pytest.raises(TypeError, match="scalar"):
        bus.start("roost.process.start", argv=["a", "b"])


async def test_slow_subscriber_gets_a_lag_marker() -> None:
    bus = EventBus()
    sub = bus.subscribe(maxsize=3)
    for i in range(10):
        bus.start("roost.process.start", n=i)
    first = await sub.get()
    assert first == {"type": "events.lagged", "dropped": 7}
    rest = [await sub.get() for _ in range(3)]
    assert [e["attributes"]["n"] for e in rest] == [7, 8, 9]
    sub.close()
    bus.start("roost.process.start")
    assert sub._queue.empty()


def test_each_read_is_a_new_event_and_durations_are_rounded_to_microseconds() -> None:
    bus = EventBus()
    bus.start("roost.relay.send", session="ses_a").completed(state="submitted")
    first, second = bus.recent(), bus.recent()
    first[1]["attributes"]["state"] = "tampered"  # type: ignore[index]
    assert second[1]["attributes"] == {"session": "ses_a", "state": "submitted"}
    assert bus.recent(1)[0]["type"] == "operation.completed"
    duration = second[1]["durationMs"]
    assert isinstance(duration, float) and round(duration, 3) == duration


def test_a_forked_child_draws_other_span_ids_than_its_parent() -> None:
    import os

    bus = EventBus()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next span ids, to the parent
        os.close(read)
        os.write(write, ",".join(bus.start("roost.relay.send").span_id for _ in range(4)).encode())
        os._exit(0)
    os.close(write)
    mine = {bus.start("roost.relay.send").span_id for _ in range(4)}
    with os.fdopen(read) as pipe:
        theirs = set(pipe.read().split(","))
    os.waitpid(pid, 0)
    assert len(theirs) == 4 and not mine & theirs
