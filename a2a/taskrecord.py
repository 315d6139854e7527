"""One kept task: its current run, state, artifacts, bounded history and the callers waiting on it.

Why a plain ``__slots__`` class and not a model: the door touches a record several times per
request on its hot path; timestamps are kept as floats and formatted only when a Task is dumped.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from a2a.models import Artifact, Message, Task, TaskState, TaskStatus, agent_message

if TYPE_CHECKING:
    from a2a.tasktypes import DoorTask

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


def now_iso() -> str:
    return iso(time.time())


def iso(ts: float) -> str:
    """RFC 3339 with milliseconds and ``Z``, the form every status timestamp is sent in."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TaskRecord:
    """A task as the door keeps it. ``task`` is the current run; ``history`` its messages, oldest first."""

    __slots__ = ("artifacts", "history", "run", "state", "status_message", "status_text", "task", "updated", "waiters")

    def __init__(self, task: DoorTask, state: TaskState, max_history: int) -> None:
        self.task = task
        self.state = state
        self.status_text: str | None = None
        self.status_message: Message | None = None
        self.artifacts: list[Artifact] | None = None
        self.updated = _clock()
        self.run: asyncio.Task[Any] | None = None
        self.history: deque[Message] = deque(maxlen=max_history)
        self.waiters: list[asyncio.Future[None]] | None = None

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
        self.status_message = None
        self.updated = _clock()
        if agent and status_text:
            t = self.task
            message = agent_message(f"msg_{t.id}_{t.turn}_{state.value}", status_text)
            message.task_id = t.id
            message.context_id = t.context_id
            self.status_message = message
            self.history.append(message)
        if self.waiters is not None and state in _SETTLED:
            waiters, self.waiters = self.waiters, None
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def add_history(self, message: Message, task_id: str, context_id: str) -> None:
        if message.task_id != task_id or message.context_id != context_id:
            message = message.model_copy(update={"task_id": task_id, "context_id": context_id})
        self.history.append(message)

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

    def to_task(self, *, history_length: int | None = 0, include_artifacts: bool = True) -> Task:
        """The wire Task: ``history_length`` None → the whole kept history, 0 → none."""
        t = self.task
        message = self.status_message
        if message is None and self.status_text:
            message = agent_message(f"msg_{t.id}_status", self.status_text)
        history: list[Message] | None = None
        if history_length is None:
            history = list(self.history)
        elif history_length > 0:
            kept = self.history
            history = list(kept)[-history_length:] if len(kept) > history_length else list(kept)
        return Task.model_construct(
            id=t.id,
            context_id=t.context_id,
            status=TaskStatus.model_construct(state=self.state, message=message, timestamp=iso(self.updated)),
            artifacts=self.artifacts if include_artifacts else None,
            history=history,
            metadata=None,
        )


_clock = time.time
