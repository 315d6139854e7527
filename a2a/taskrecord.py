"""One kept task: its current run, state, artifacts, bounded history and who waits on or listens to it.

Why a plain ``__slots__`` class and not a model: the door touches a record several times per
request on its hot path; timestamps are kept as floats and formatted only when a Task is dumped.
Listeners (a stream's subscription, push delivery) hear every change as a
:mod:`~a2a.protocol.streamevents` update; a record nobody listens to builds none.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
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
from a2a.protocol.streamevents import ENDING, ArtifactUpdate, StatusUpdate, TaskEvent, ends_stream

if TYPE_CHECKING:
    from a2a.protocol.pushconfig import PushConfig
    from a2a.protocol.tasktypes import DoorTask

Listener = Callable[[TaskEvent], None]
"""Hears one update; must not block or raise (it queues the update for its own consumer)."""

RESPONSE = "response"
"""The id (and name) of the first output artifact; a later turn's output is ``response-<n>``."""

_SETTLED = ENDING  # what a blocking send waits for is what ends a stream: terminal or interrupted


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
        "earlier",
        "history",
        "listeners",
        "max_history",
        "message_ids",
        "next_turns",
        "output",
        "output_id",
        "push_configs",
        "state",
        "status_id",
        "status_text",
        "streamed",
        "task",
        "turns_done",
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
        self.listeners: list[Listener] | None = None
        self.output_id = RESPONSE  # the artifact the current turn's output goes to
        self.earlier: list[Artifact] | None = None  # earlier turns' output artifacts, oldest first
        self.streamed = False  # the current turn's output arrived in chunks (append_output)
        self.next_turns: deque[DoorTask] | None = None  # follow-up messages queued behind the running turn
        self.turns_done = 0  # runs that have ended
        self.push_configs: list[PushConfig] | None = None  # where its updates are posted (a2a.push)

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
            self._wake()
        if self.listeners is not None:
            t = self.task
            self._publish(StatusUpdate(t.id, t.context_id, self._status(), ends_stream(state)))

    def _wake(self) -> None:
        waiters, self.waiters = self.waiters, None
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(None)

    def _publish(self, event: TaskEvent) -> None:
        for listener in list(self.listeners or ()):
            listener(event)

    def listen(self, listener: Listener) -> None:
        if self.listeners is None:
            self.listeners = []
        self.listeners.append(listener)

    def unlisten(self, listener: Listener) -> None:
        if self.listeners is not None and listener in self.listeners:
            self.listeners.remove(listener)
            if not self.listeners:
                self.listeners = None

    # -- output ------------------------------------------------------------------------------------

    def new_turn_output(self) -> None:
        """A run starts: output from now on is the next artifact (earlier output is kept as it was)."""
        if self.output:
            if self.earlier is None:
                self.earlier = []
            self.earlier.append(response_artifact(self.output, self.output_id))
            self.output = ""
            self.output_id = f"{RESPONSE}-{len(self.earlier) + 1}"
        self.streamed = False

    def append_output(self, text: str) -> None:
        """A chunk of the running turn's output, as it was written: kept and told to listeners."""
        if not text:
            return
        first = not self.output
        self.output += text
        self.streamed = True
        if self.listeners is not None:
            self._chunk(text, append=not first, last=False)

    def end_output(self, output: str) -> None:
        """The turn's run ended with ``output``: the whole of it unless it was streamed (then the
        listeners get the artifact's closing chunk)."""
        if self.streamed:
            if self.listeners is not None:
                self._chunk("", append=True, last=True)
            return
        self.output = output
        if output and self.listeners is not None:
            self._chunk(output, append=False, last=True)

    def _chunk(self, text: str, *, append: bool, last: bool) -> None:
        t = self.task
        self._publish(ArtifactUpdate(t.id, t.context_id, response_artifact(text, self.output_id), append, last))

    # -- turns -------------------------------------------------------------------------------------

    def turn_ended(self) -> None:
        """One run ended (the task may go on with a queued turn): wake whoever waits for a turn."""
        self.turns_done += 1
        if self.waiters is not None:
            self._wake()

    async def wait_turn(self, turn: int) -> None:
        """Return once run ``turn`` has ended, or the task is terminal or interrupted."""
        while not self.settled and self.turns_done < turn:
            await self._changed()

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
        while not self.settled:
            await self._changed()

    async def _changed(self) -> None:
        """Wait for the next settle or turn end."""
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
        if (
            history_length == 0
            and not self.status_text
            and self.artifacts is None
            and not self.output
            and not self.earlier
        ):
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
        artifacts = self.artifacts
        if artifacts is None and (self.output or self.earlier):
            artifacts = [
                *(self.earlier or ()),
                *([response_artifact(self.output, self.output_id)] if self.output else ()),
            ]
        history: list[Message] | None = None
        if history_length is None or history_length > 0:
            kept = self.history
            if history_length is not None and len(kept) > history_length:
                kept = kept[-history_length:]
            history = [self._shown(m) for m in kept]
        status = self._status()
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

    def _status(self) -> TaskStatus:
        t = self.task
        message: Message | None = None
        if self.status_id is not None and self.status_text:
            message = agent_message(self.status_id, self.status_text, task_id=t.id, context_id=t.context_id)
        elif self.status_text:
            message = agent_message(f"msg_{t.id}_status", self.status_text)
        return build(TaskStatus, {"state": self.state, "message": message, "timestamp": iso(self.updated)})


_clock = time.time
_V1 = {s.value: s.v1 for s in TaskState}  # by the state's plain value: no enum property call
