"""TaskRecord's direct dump of a bare task equals the dump through the models, and iso() the stdlib's."""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from a2a.protocol import traceparent
from a2a.protocol.models import Message, TaskState, build, dump_task, text_part
from a2a.protocol.origin import Provenance
from a2a.protocol.tasktypes import DoorTask
from a2a.taskrecord import TaskRecord, iso

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


@given(
    bound=st.integers(1, 5),
    steps=st.lists(
        st.one_of(st.text(max_size=3).map(lambda t: ("user", t)), st.text(max_size=3).map(lambda t: ("agent", t))),
        max_size=12,
    ),
)
def test_history_keeps_the_newest_like_a_bounded_deque(bound: int, steps: list[tuple[str, str]]) -> None:
    rec = TaskRecord(TASK, TaskState.SUBMITTED, bound)
    model: deque[object] = deque(maxlen=bound)
    for kind, text in steps:
        if kind == "user":
            message = build(
                Message,
                {
                    "message_id": f"m{text}",
                    "role": "user",
                    "parts": [text_part(text)],
                    "context_id": None,
                    "task_id": None,
                    "metadata": None,
                },
            )
            rec.add_history(message)
            model.append(message)
        else:
            rec.set(TaskState.INPUT_REQUIRED, text or "q", agent=True)
            model.append(rec.history[-1])
        assert rec.history == list(model)
        assert len(rec.history) <= bound


def test_built_models_share_a_fields_set_that_never_changes() -> None:
    first, second = text_part("a"), text_part("b")
    assert first.model_fields_set == set(type(first).model_fields) == second.model_fields_set
    copied = first.model_copy(update={"text": "c"})
    assert copied.text == "c" and first.text == "a" and second.text == "b"
    first.text = "d"  # pydantic adds the assigned field to the set: it is there already
    assert second.model_fields_set == set(type(second).model_fields)
    assert first.model_dump(exclude_unset=True) == {
        "kind": "text",
        "text": "d",
        "file": None,
        "data": None,
        "metadata": None,
    }
