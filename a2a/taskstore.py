"""A shelf of kept task records: oldest first, each for a retention period, at most so many per owner.

Why per owner: a door serves several callers (sessions through the relay, local uids), and one
caller's flood — even of ``rejected`` sends — must not push anybody else's tasks out. So the
count is bounded per owner, and a full owner's put drops that owner's own oldest record; the
retention applies to everyone. The door keeps two shelves (``docs/a2a.md``, "Retention"):
finished tasks, and tasks waiting for input. Plain data structure, no I/O, no clock of its own.
"""

from __future__ import annotations

from collections import OrderedDict

from a2a.taskrecord import TaskRecord


class Shelf:
    """Records by task id, in the order they were put; ``per_owner`` at most for each owner."""

    __slots__ = ("_all", "_owners", "per_owner")

    def __init__(self, per_owner: int) -> None:
        if per_owner < 1:
            raise ValueError("a shelf keeps at least one record per owner")
        self.per_owner = per_owner
        self._all: OrderedDict[str, TaskRecord] = OrderedDict()
        self._owners: dict[str | None, OrderedDict[str, TaskRecord]] = {}

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._all

    def get(self, task_id: str) -> TaskRecord | None:
        return self._all.get(task_id)

    def values(self) -> list[TaskRecord]:
        return list(self._all.values())

    def owned(self, owner: str | None) -> int:
        """How many records ``owner`` has on the shelf."""
        mine = self._owners.get(owner)
        return len(mine) if mine is not None else 0

    def put(self, rec: TaskRecord) -> TaskRecord | None:
        """Shelve ``rec`` as the newest (again, if it was here); the owner's oldest record if that
        owner is now over ``per_owner`` (taken off the shelf), else None."""
        task_id = rec.task.id
        owner = rec.task.owner
        if task_id in self._all:
            self.pop(task_id)
        self._all[task_id] = rec
        mine = self._owners.get(owner)
        if mine is None:
            mine = self._owners[owner] = OrderedDict()
        mine[task_id] = rec
        if len(mine) <= self.per_owner:
            return None
        _, oldest = mine.popitem(last=False)
        del self._all[oldest.task.id]
        return oldest

    def pop(self, task_id: str) -> TaskRecord | None:
        rec = self._all.pop(task_id, None)
        if rec is None:
            return None
        owner = rec.task.owner
        mine = self._owners[owner]
        del mine[task_id]
        if not mine:
            del self._owners[owner]
        return rec

    def older_than(self, horizon: float) -> list[TaskRecord]:
        """Take off, oldest first, every record last updated at or before ``horizon``.

        Records are shelved in update order (a shelved record does not change until it leaves),
        so this stops at the first younger one. Called after every run: the usual answer, none,
        costs a look at the oldest record.
        """
        entries = self._all
        if not entries or next(iter(entries.values())).updated > horizon:
            return _NONE
        gone: list[TaskRecord] = []
        while entries:
            first = next(iter(entries.values()))
            if first.updated > horizon:
                break
            self.pop(first.task.id)
            gone.append(first)
        return gone


_NONE: list[TaskRecord] = []  # never appended to: the shared empty answer
