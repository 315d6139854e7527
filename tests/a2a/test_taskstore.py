"""The per-owner shelf against a model: bounds per owner, no owner's put drops another's record,
expiry takes exactly the records at or before the horizon, oldest first."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from a2a.protocol.models import TaskState
from a2a.taskrecord import TaskRecord
from a2a.taskstore import Shelf
from tests.a2a.test_taskrecord import TASK

OWNERS = [None, "uid:1", "uid:2", "session:a"]

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 30), st.sampled_from(OWNERS)),
        st.tuples(st.just("pop"), st.integers(0, 30), st.none()),
        st.tuples(st.just("expire"), st.integers(0, 60), st.none()),
    ),
    max_size=60,
)


@given(st.integers(1, 4), _ops)
def test_shelf_against_a_model(per_owner: int, ops: list[tuple[str, int, str | None]]) -> None:
    shelf = Shelf(per_owner)
    model: dict[str, tuple[str | None, float]] = {}  # id → (owner, updated), insertion-ordered
    records: dict[str, TaskRecord] = {}
    clock = 0.0
    for op, n, owner in ops:
        task_id = f"tsk_{n}"
        if op == "put":
            clock += 1
            rec = records.get(task_id)
            if rec is None or rec.task.owner != owner:
                if rec is not None:  # an id belongs to one owner: take the old one off first
                    shelf.pop(task_id)
                    model.pop(task_id, None)
                rec = records[task_id] = TaskRecord(TASK._replace(id=task_id, owner=owner), TaskState.COMPLETED, 1)
            rec.updated = clock
            model.pop(task_id, None)
            model[task_id] = (owner, clock)
            dropped = shelf.put(rec)
            mine = [t for t, (o, _) in model.items() if o == owner]
            if len(mine) > per_owner:
                assert dropped is not None and dropped.task.id == mine[0]  # that owner's own oldest
                del model[mine[0]]
            else:
                assert dropped is None
        elif op == "pop":
            got = shelf.pop(task_id)
            assert (got is not None) == (task_id in model)
            model.pop(task_id, None)
        else:
            horizon = float(n)
            gone = [r.task.id for r in shelf.older_than(horizon)]
            want: list[str] = []
            for t, (_, updated) in list(model.items()):
                if updated > horizon:
                    break
                want.append(t)
                del model[t]
            assert gone == want
        assert [r.task.id for r in shelf.values()] == list(model)
        for o in OWNERS:
            assert shelf.owned(o) == sum(1 for x, _ in model.values() if x == o) <= per_owner
        assert len(shelf) == len(model)
