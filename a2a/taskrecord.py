"""One kept task: its current run, state, artifacts, bounded history and the callers waiting on it.

Why a plain ``__slots__`` class and not a model: the door touches a record several times per
request on its hot path; timestamps are kept as floats and formatted only when a Task is dumped.
"""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from a2a.protocol.models import (
    Artifact,
    Dialect,
    Message,
    Task,
    TaskState,
    TaskStatus,
    agent_message,
    build,
    dump_task,
    response_artifact,
)

if TYPE_CHECKING:
    from a2a.protocol.tasktypes import DoorTask

_SETTLED = frozenset(
    {
        TaskState.COMPLETED,
        TaskState.FAILED,
        TaskState.CANCELED,
        TaskState.REJECTED,
        TaskState.INPUT_REQUIRED,
        TaskState.AUTH_REQUIRED,
    }
)


def iso(ts: float) -> str:
    """RFC 3339 with milliseconds and ``Z``, the form every status timestamp is sent in.

    The part up to the second is formatted once per second (a busy door stamps many tasks in
    the same second); the milliseconds are appended.
    """
    global _iso_second, _iso_prefix
    frac, whole = math.modf(ts)
    micro = round(frac * 1e6)  # as datetime.fromtimestamp rounds (half to even), then cut to ms
    second, milli = int(whole) + micro // 1_000_000, micro % 1_000_000 // 1000
    if second != _iso_second:
        _iso_prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        _iso_second = second
    return f"{_iso_prefix}{milli:03d}Z"


_iso_second = -1
_iso_prefix = ""


class TaskRecord:
    """A task as the door keeps it. ``task`` is the current run; ``history`` its messages, oldest first."""

    __slots__ = (
        "artifacts",
        "history",
        "max_history",
        "message_ids",
        "output",
        "state",
        "status_id",
        "status_text",
        "task",
        "updated",
        "waiters",
    )

    def __init__(self, task: DoorTask, state: TaskState, max_history: int) -> None:
        self.task = task
        self.state = state
        self.status_text: str | None = None
        self.status_id: str | None = None  # the agent message's id when the status text is the agent's
        self.artifacts: list[Artifact] | None = None
        self.output = ""  # a completed run's output: the ``response`` artifact, built when shown
        self.updated = _clock()
        # Messages as sent, and the agent's as (message id, text): both are built into wire
        # Messages only when a caller asks for the history (most never do). The newest
        # ``max_history`` are kept; a list, not a bounded deque: a finished task stays in memory
        # with its one or two messages, and a deque's first block alone is half a kilobyte.
        self.history: list[Message | tuple[str, str]] = []
        self.max_history = max_history
        self.waiters: list[asyncio.Future[None]] | None = None
        self.message_ids: list[str] = []  # every message that opened or continued it (the door's replay index)

    @property
    def list_key(self) -> tuple[str, str]:
        return self.task.id, self.task.context_id

    @property
    def settled(self) -> bool:
        """Terminal or interrupted: what a blocking send waits for."""
        return self.state in _SETTLED

    def set(self, state: TaskState, status_text: str | None = None, *, agent: bool = False) -> None:
        """Move to ``state``; an ``agent`` text is also the agent's message in the history."""
        self.state = state
        self.status_text = status_text
        self.status_id = None
        self.updated = _clock()
        if agent and status_text:
            t = self.task
            self.status_id = f"msg_{t.id}_{t.turn}_{state._value_}"  # _value_: no enum property call
            self._keep((self.status_id, status_text))
        if self.waiters is not None and state in _SETTLED:
            waiters, self.waiters = self.waiters, None
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def add_history(self, message: Message) -> None:
        """Keep a message as sent; its ``taskId``/``contextId`` are filled in when it is shown."""
        self._keep(message)

    def _keep(self, item: Message | tuple[str, str]) -> None:
        history = self.history
        history.append(item)
        if len(history) > self.max_history:
            del history[0]

    def _shown(self, message: Message | tuple[str, str]) -> Message:
        t = self.task
        if isinstance(message, tuple):
            return agent_message(message[0], message[1], task_id=t.id, context_id=t.context_id)
        if message.task_id == t.id and message.context_id == t.context_id:
            return message
        return message.model_copy(update={"task_id": t.id, "context_id": t.context_id})

    async def wait_settled(self) -> None:
        """Return when the task is terminal or interrupted (callers bound the wait themselves)."""
        if self.settled:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.waiters is None:
            self.waiters = []
        self.waiters.append(fut)
        try:
            await fut
        finally:
            if self.waiters is not None and fut in self.waiters:
                self.waiters.remove(fut)

    def wire(self, dialect: Dialect, history_length: int | None = 0) -> dict[str, Any]:
        """``dump_task(self.to_task(history_length=...), dialect)``; a bare task (no status text,
        artifacts or history to show: what a send answers at once) is built straight into the
        dict, without the intermediate models."""
        if history_length == 0 and not self.status_text and self.artifacts is None and not self.output:
            t = self.task
            state = self.state
            status = {
                "state": _V1[state._value_] if dialect == "1.0" else state._value_,
                "timestamp": iso(self.updated),
            }
            if dialect == "1.0":
                return {"id": t.id, "contextId": t.context_id, "status": status}
            return {"kind": "task", "id": t.id, "contextId": t.context_id, "status": status}
        return dump_task(self.to_task(history_length=history_length), dialect)

    def to_task(self, *, history_length: int | None = 0, include_artifacts: bool = True) -> Task:
        """The wire Task: ``history_length`` None → the whole kept history, 0 → none."""
        t = self.task
        message: Message | None = None
        if self.status_id is not None and self.status_text:
            message = agent_message(self.status_id, self.status_text, task_id=t.id, context_id=t.context_id)
        elif self.status_text:
            message = agent_message(f"msg_{t.id}_status", self.status_text)
        artifacts = self.artifacts
        if artifacts is None and self.output:
            artifacts = [response_artifact(self.output)]
        history: list[Message] | None = None
        if history_length is None or history_length > 0:
            kept = self.history
            if history_length is not None and len(kept) > history_length:
                kept = kept[-history_length:]
            history = [self._shown(m) for m in kept]
        status = build(TaskStatus, {"state": self.state, "message": message, "timestamp": iso(self.updated)})
        return build(
            Task,
            {
                "id": t.id,
                "context_id": t.context_id,
                "status": status,
                "artifacts": artifacts if include_artifacts else None,
                "history": history,
                "metadata": None,
            },
        )


_clock = time.time
_V1 = {s.value: s.v1 for s in TaskState}  # by the state's plain value: no enum property call
