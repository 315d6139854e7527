"""TaskRecord's direct dump of a bare task equals the dump through the models, and iso() the stdlib's."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from a2a import traceparent
from a2a.models import TaskState, dump_task, text_part
from a2a.origin import Provenance
from a2a.taskrecord import TaskRecord, iso
from a2a.tasktypes import DoorTask

TASK = DoorTask(
    id="tsk_1",
    context_id="ctx_1",
    message_id="msg_1",
    text="hi",
    parts=(text_part("hi"),),
    provenance=Provenance.from_wire("peer", None),
    lane=Provenance.from_wire("peer", None).lane,
    traceparent_from_caller=None,
    trace=traceparent.new(),
    tracestate=None,
    delegation_id=None,
    received_at_ms=0,
    dialect="1.0",
)


@given(
    state=st.sampled_from(list(TaskState)),
    text=st.none() | st.text(max_size=5),
    agent=st.booleans(),
    output=st.sampled_from(["", "out"]),
    history=st.none() | st.integers(0, 3),
    dialect=st.sampled_from(["1.0", "0.3"]),
)
def test_wire_is_dump_task_of_to_task(
    state: TaskState, text: str | None, agent: bool, output: str, history: int | None, dialect: str
) -> None:
    rec = TaskRecord(TASK, TaskState.SUBMITTED, 8)
    rec.set(state, text, agent=agent)
    rec.output = output
    assert rec.wire(dialect, history) == dump_task(rec.to_task(history_length=history), dialect)  # type: ignore[arg-type]


@given(st.floats(min_value=0, max_value=4e9, allow_nan=False) | st.integers(0, 4 * 10**15).map(lambda us: us / 1e6))
def test_iso_is_the_stdlibs(ts: float) -> None:
    assert iso(ts) == datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
