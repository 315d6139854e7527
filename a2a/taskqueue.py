"""A door's task queue and task store: admission, the three lanes, runs, interruptions, history.

Why it is separate from the HTTP side (:mod:`a2a.door`): everything here is plain asyncio and
can be driven by the capsule host (``submit``) as well as by JSON-RPC; the door only parses,
scopes and serialises. Rules, explained in ``docs/a2a.md``:

* Tasks run one at a time in a worker coroutine; the lane (user → peer → bg, FIFO within a lane,
  never preempted) follows from the origin. No room is a *successful* ``rejected`` task.
* A runner may end a run ``input-required`` (or ``auth-required``): the task is interrupted and
  the next message naming its ``taskId`` is queued as the task's next run. A message naming a
  task that is queued or running is queued behind it as a further turn: the task stays
  ``working`` and runs once per queued turn, in order, then ends (``docs/a2a.md``, "Multi-turn").
* What a runner writes while it runs (:meth:`TaskQueue.write_output`) is the turn's output
  artifact, told to the record's listeners chunk by chunk.
* Cancel is recorded synchronously; ``canceled`` wins over whatever the runner reports later.
* Each task keeps a bounded history of its messages. Finished tasks are kept for a retention
  period and up to a count per owner, then dropped; tasks waiting for input likewise, then they
  are canceled (:mod:`a2a.taskstore`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from typing import Any, TypedDict

from a2a.protocol import errors, traceparent
from a2a.protocol.ids import prefixed, prefixed_pair
from a2a.protocol.models import Dialect, Message, TaskState, build, text_part
from a2a.protocol.origin import LANE_ORDER, Provenance
from a2a.protocol.tasktypes import (
    BUSY,
    CLOSING,
    DEFAULT_MAX_FINISHED,
    DEFAULT_MAX_HISTORY,
    DEFAULT_MAX_WAITING,
    DEFAULT_RETENTION_SECS,
    INTERRUPTED,
    ActivateHook,
    CancelHook,
    CancelPhase,
    DoorTask,
    FinishHook,
    Incoming,
    Runner,
    TaskAcceptance,
    TaskOutcome,
)
from a2a.taskrecord import TaskRecord
from a2a.taskstore import Shelf

log = logging.getLogger("a2a.door")


_make = tuple.__new__


class QueueOptions(TypedDict, total=False):
    """:class:`TaskQueue`'s optional arguments, for a holder that passes them through as given
    (the door takes them as its own keyword arguments)."""

    task_acceptance: TaskAcceptance
    queue_depth: int
    on_activate: ActivateHook | None
    on_finish: FinishHook | None
    on_cancel: CancelHook | None
    max_finished: int
    retention_secs: float
    max_history: int
    max_waiting: int
    local_owner: str | None


class TaskQueue:
    """Admission, lanes, the worker and the store of one door's tasks."""

    def __init__(
        self,
        *,
        name: str,
        runner: Runner,
        task_acceptance: TaskAcceptance = "queue",
        queue_depth: int = 16,
        on_activate: ActivateHook | None = None,
        on_finish: FinishHook | None = None,
        on_cancel: CancelHook | None = None,
        max_finished: int = DEFAULT_MAX_FINISHED,
        retention_secs: float = DEFAULT_RETENTION_SECS,
        max_history: int = DEFAULT_MAX_HISTORY,
        max_waiting: int = DEFAULT_MAX_WAITING,
        local_owner: str | None = None,
    ) -> None:
        if task_acceptance not in ("single", "queue", "none"):
            raise ValueError(f"task_acceptance must be single, queue or none, not {task_acceptance!r}")
        if queue_depth < 1:
            raise ValueError("queue_depth must be at least 1")
        if max_history < 1:
            raise ValueError("max_history must be at least 1")
        self.name = name
        self.task_acceptance: TaskAcceptance = task_acceptance
        self.queue_depth = queue_depth
        self.local_owner = local_owner
        self.retention_secs = retention_secs
        self.max_history = max_history
        self._runner = runner
        self._on_activate = on_activate
        self._on_finish = on_finish
        self._on_cancel = on_cancel
        # One queue per lane, highest priority first; a lane's queue is found by its position
        # (Lane.position), not by hashing the enum, twice per request.
        self._lanes: tuple[deque[TaskRecord], ...] = tuple(deque() for _ in LANE_ORDER)
        self._pending = 0
        self._ever_held = False
        self._closed = False
        self._running: TaskRecord | None = None
        self._live: dict[str, TaskRecord] = {}  # queued and running
        self._waiting = Shelf(max_waiting)  # input-required / auth-required, per owner
        self._finished = Shelf(max_finished)  # terminal, per owner
        self._hook_calls: set[asyncio.Task[None]] = set()
        self._by_message: dict[tuple[str | None, str], TaskRecord] = {}  # (owner, message id) → its task
        self._expired_at = 0.0
        self._wake: asyncio.Future[None] | None = None  # the idle worker's wake-up, set by _enqueue
        self._worker: asyncio.Task[None] | None = None
        self._invoking: TaskRecord | None = None  # the record whose runner the worker is awaiting
        self._run_canceled = False  # the worker was cancelled to stop that run, not to stop
        self._stopping = False
        self.idle = asyncio.Event()
        self.idle.set()

    # -- state ------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending(self) -> int:
        """Tasks admitted and not yet started."""
        return self._pending

    @property
    def running(self) -> DoorTask | None:
        return self._running.task if self._running is not None else None

    def close(self) -> None:
        """Stop admission: every later send gets ``rejected`` / ``the session is closing``."""
        self._closed = True

    async def drain(self) -> None:
        """Wait until nothing is queued or running (admission may still be open)."""
        await self.idle.wait()

    async def wait_idle(self) -> None:
        await self.idle.wait()

    def record(self, task_id: str) -> TaskRecord | None:
        self._expire()
        return self._live.get(task_id) or self._waiting.get(task_id) or self._finished.get(task_id)

    def records(self) -> list[TaskRecord]:
        """Every task still kept: queued, running, waiting for input and finished (unordered)."""
        self._expire()
        return [*self._live.values(), *self._waiting.values(), *self._finished.values()]

    # -- admission ---------------------------------------------------------------------------------

    def submit_local(
        self,
        text: str,
        *,
        provenance: Provenance | None = None,
        context_id: str | None = None,
        message_id: str | None = None,
        caller_traceparent: str | None = None,
    ) -> TaskRecord:
        """Admit a task that did not come over HTTP (task.md / input.json): user/trusted by default.

        Same capacity rules as a send except that ``task_acceptance: none`` does not apply (it
        only closes the door to callers). The task belongs to ``local_owner``.
        """
        message = build(
            Message,
            {
                "message_id": message_id or prefixed("msg"),
                "role": "user",
                "parts": [text_part(text)],
                "context_id": context_id,
                "task_id": None,
                "metadata": None,
            },
        )
        tp = traceparent.parse(caller_traceparent)
        return self.admit(
            Incoming(
                message=message,
                provenance=provenance or Provenance.local_user(),
                raw_traceparent=caller_traceparent,
                trace=tp.child() if tp else traceparent.new(),
                tracestate=None,
                delegation_id=None,
                dialect=None,
                owner=self.local_owner,
            )
        )

    def _refusal(self) -> str | None:
        if self._closed:
            return CLOSING
        if self.task_acceptance == "single":
            return BUSY if self._ever_held else None
        return BUSY if self._pending >= self.queue_depth else None

    def admit(self, incoming: Incoming) -> TaskRecord:
        """A new task for a message without ``taskId`` (queued, or a ``rejected`` record)."""
        return self.admit_fields(*incoming)

    def admit_fields(
        self,
        message: Message,
        provenance: Provenance,
        raw_traceparent: str | None,
        trace: traceparent.TraceParent,
        tracestate: str | None,
        delegation_id: str | None,
        dialect: Dialect | None,
        owner: str | None,
    ) -> TaskRecord:
        """:meth:`admit` with :class:`Incoming`'s fields as arguments (the door's hot path builds none)."""
        context_id = message.context_id
        if context_id:
            task_id = prefixed("tsk")
        else:
            task_id, context_id = prefixed_pair("tsk", "ctx")
        task = _make(  # every field, in DoorTask's order, past its generated __new__: once per request
            DoorTask,
            (
                task_id,
                context_id,
                message.message_id,
                message.text,
                tuple(message.parts),
                provenance,
                provenance.lane,
                raw_traceparent,
                trace,
                tracestate,
                delegation_id,
                time.time_ns() // 1_000_000,
                dialect,
                owner,
                1,  # turn: a new task's first run
            ),
        )
        usual = not self._closed and self.task_acceptance == "queue" and self._pending < self.queue_depth
        refusal = None if usual else self._refusal()
        rec = TaskRecord(task, TaskState.REJECTED if refusal else TaskState.SUBMITTED, self.max_history)
        rec.history.append(message)
        if refusal is not None:
            rec.set(TaskState.REJECTED, refusal)
            self._remember(rec)
            return rec
        self._ever_held = True
        self._live[task_id] = rec
        rec.message_ids.append(message.message_id)  # the replay index (_index, inline: once per request)
        self._by_message[owner, message.message_id] = rec
        self._enqueue(rec)
        return rec

    def replayed(self, owner: str | None, message_id: str) -> TaskRecord | None:
        """The kept task that ``owner``'s message ``message_id`` already opened or continued, if any.

        A message id is its sender's (A2A: unique per message), so the same one again is a retry
        or a replay: the door answers that task instead of opening a second one. ``rejected``
        sends are not remembered (a retry after "busy" is a new attempt).
        """
        return self._by_message.get((owner, message_id))

    def _index(self, rec: TaskRecord, message_id: str) -> None:
        rec.message_ids.append(message_id)
        self._by_message[rec.task.owner, message_id] = rec

    def _forget(self, rec: TaskRecord) -> None:
        owner = rec.task.owner
        for message_id in rec.message_ids:
            if self._by_message.get((owner, message_id)) is rec:
                del self._by_message[owner, message_id]

    def continue_task(self, rec: TaskRecord, incoming: Incoming) -> TaskRecord:
        """Take a message naming a kept task: the next run of an interrupted task, or a further
        turn queued behind a queued or running one; -32004 when the task is terminal.

        The caller has already checked that the record is visible to it and that the message's
        ``contextId`` (if any) matches.
        """
        state = rec.state
        if state.terminal:
            raise errors.unsupported_operation(
                f"task {rec.task.id} is {state.value}, a terminal state, and takes no more messages"
            )
        if self._closed:
            raise errors.unsupported_operation(f"task {rec.task.id} cannot continue: the session is closing")
        message = incoming.message
        if state not in INTERRUPTED:  # submitted or working: one more turn behind the ones queued
            queued = rec.next_turns
            if queued is None:
                queued = rec.next_turns = deque()
            if len(queued) >= self.queue_depth:
                raise errors.unsupported_operation(
                    f"task {rec.task.id} already has {len(queued)} messages queued behind its running turn"
                )
            last = queued[-1] if queued else rec.task
            queued.append(last._replace(turn=last.turn + 1, **_from_message(incoming)))
            self._index(rec, message.message_id)
            rec.add_history(message)
            return rec
        prev = rec.task
        self._waiting.pop(prev.id)  # before it changes: a shelf keeps records in update order
        self._live[prev.id] = rec
        rec.task = prev._replace(turn=prev.turn + 1, **_from_message(incoming))
        self._index(rec, message.message_id)
        rec.add_history(message)
        rec.set(TaskState.SUBMITTED)
        self._enqueue(rec)
        return rec

    def write_output(self, task_id: str, text: str) -> None:
        """A chunk of what the running turn of ``task_id`` wrote (ignored for any other task)."""
        rec = self._running
        if rec is not None and rec.task.id == task_id and rec.state is TaskState.WORKING:
            rec.append_output(text)

    def _enqueue(self, rec: TaskRecord) -> None:
        self._lanes[rec.task.lane.position].append(rec)
        self._pending += 1
        self.idle.clear()
        wake = self._wake
        if wake is not None:
            self._wake = None
            if not wake.done():
                wake.set_result(None)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work(), name=f"a2a-door-{self.name}")

    # -- cancel and shutdown -----------------------------------------------------------------------

    async def cancel_record(self, rec: TaskRecord) -> TaskRecord:
        """Cancel a queued, running or interrupted task; -32002 when it is already terminal."""
        task_id = rec.task.id
        if rec.state.terminal:
            raise errors.task_not_cancelable(task_id, rec.state.value)
        rec.next_turns = None  # queued follow-ups end with the task (their messages stay in its history)
        phase: CancelPhase
        if rec is self._running:
            phase = "running"
            rec.set(TaskState.CANCELED, "task canceled")
            if self._invoking is rec and self._worker is not None and not self._run_canceled:
                self._run_canceled = True
                self._worker.cancel()  # the runner runs inside the worker: see _invoke
        else:
            phase = "queued"
            if rec.state is TaskState.SUBMITTED:
                self._lanes[rec.task.lane.position].remove(rec)
                self._pending -= 1
                rec.set(TaskState.CANCELED, "task canceled while queued")
            else:
                self._waiting.pop(task_id)
                rec.set(TaskState.CANCELED, "task canceled while waiting for input")
            self._retire(rec)
            if self._running is None and self._pending == 0:
                self.idle.set()
        await self._cancel_hook(rec.task, phase)
        return rec

    async def _cancel_hook(self, task: DoorTask, phase: CancelPhase) -> None:
        if self._on_cancel is not None:
            try:
                await self._on_cancel(task, phase)
            except Exception:
                log.exception("on_cancel hook failed for %s", task.id)

    def _end_waiting(self, rec: TaskRecord, reason: str) -> None:
        """Cancel a task the waiting shelf let go (expired, or its owner has too many waiting)."""
        rec.set(TaskState.CANCELED, reason)
        self._remember(rec)
        if self._on_cancel is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # looked at outside the loop: nobody to tell
            return
        call = loop.create_task(self._cancel_hook(rec.task, "queued"))
        self._hook_calls.add(call)
        call.add_done_callback(self._hook_calls.discard)

    async def cancel_id(self, task_id: str) -> TaskRecord:
        """Cancel by id, unscoped (the capsule host's own use); -32001 unknown, -32002 terminal."""
        rec = self.record(task_id)
        if rec is None:
            raise errors.task_not_found()
        return await self.cancel_record(rec)

    async def shutdown(self) -> None:
        """Stop the worker; tasks still queued, running or interrupted are recorded canceled."""
        self._closed = True
        self._stopping = True
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        for rec in [*self._live.values(), *self._waiting.values()]:
            self._waiting.pop(rec.task.id)
            rec.set(TaskState.CANCELED, "task canceled: the session ended")
            self._retire(rec)
        for lane in self._lanes:
            lane.clear()
        self._pending = 0
        self._running = None
        self.idle.set()

    # -- store -------------------------------------------------------------------------------------

    def _remember(self, rec: TaskRecord) -> None:
        dropped = self._finished.put(rec)  # past its owner's count, that owner's oldest finished task
        if dropped is not None:
            self._forget(dropped)

    def _retire(self, rec: TaskRecord) -> None:
        """Move a queued or running task to the finished shelf (one waiting for input is taken off
        its shelf by whoever ends it)."""
        self._live.pop(rec.task.id, None)
        self._remember(rec)

    def _expire(self, now: float | None = None) -> None:
        """Drop finished tasks and cancel tasks waiting for input, ``retention_secs`` after their
        last change (oldest first)."""
        horizon = (time.time() if now is None else now) - self.retention_secs
        for rec in self._finished.older_than(horizon):
            self._forget(rec)
        for rec in self._waiting.older_than(horizon):
            self._end_waiting(rec, f"task canceled: it waited for input longer than {self.retention_secs:g} s")

    # -- worker ------------------------------------------------------------------------------------

    def _next(self) -> TaskRecord | None:
        for queue in self._lanes:
            if queue:
                self._pending -= 1
                return queue.popleft()
        return None

    async def _work(self) -> None:
        while True:
            rec = self._next()
            if rec is None:
                self.idle.set()
                self._wake = asyncio.get_running_loop().create_future()
                await self._wake
                continue
            await self._run(rec)

    async def _run(self, rec: TaskRecord) -> None:
        self._running = rec
        rec.set(TaskState.WORKING)
        while True:  # one pass per turn; the usual task has one (no coroutine per turn: the hot path)
            task = rec.task
            rec.new_turn_output()
            outcome: TaskOutcome
            try:
                if self._on_activate is not None:
                    await self._on_activate(task)
            except Exception:
                log.exception("on_activate hook failed for %s", task.id)
                outcome = TaskOutcome.failed("task failed to start")
            else:
                outcome = TaskOutcome.canceled() if rec.state is TaskState.CANCELED else await self._invoke(rec)
            if rec.state is TaskState.CANCELED:  # canceled always wins over what the runner said
                outcome = TaskOutcome.canceled(rec.status_text or "task canceled")
                break
            queued = rec.next_turns
            if not queued or outcome.state not in _GOES_ON:
                break
            rec.end_output(outcome.output)  # this turn's output stays an artifact of the task
            rec.task = queued.popleft()
            rec.turn_ended()
        rec.next_turns = None  # a turn that failed or was canceled ends the task: later turns never run
        self._finish(rec, outcome)
        rec.turn_ended()
        self._running = None
        if self._on_finish is not None:
            try:
                await self._on_finish(task, outcome)
            except Exception:
                log.exception("on_finish hook failed for %s", task.id)

    async def _invoke(self, rec: TaskRecord) -> TaskOutcome:
        """Await the runner inside the worker itself (no task per run: this is the hot path).

        Canceling the running task cancels the worker with ``_run_canceled`` set; that cancel is
        taken back here (``uncancel``) and the run ends canceled, whatever the runner does with it.
        """
        self._invoking = rec
        try:
            outcome: object = await self._runner(rec.task)
        except asyncio.CancelledError:
            if not self._run_canceled or self._stopping or asyncio.current_task() is None:
                raise  # the door itself is shutting down
            return TaskOutcome.canceled()
        except Exception as exc:
            log.error("runner failed for %s", rec.task.id, exc_info=exc)
            return TaskOutcome.failed("task failed: the runner raised an error")
        finally:
            self._invoking = None
            if self._run_canceled and not self._stopping:
                worker = asyncio.current_task()
                if worker is not None:
                    self._run_canceled = False
                    worker.uncancel()
        if not isinstance(outcome, TaskOutcome):  # an untyped runner may return anything
            log.error("runner for %s returned %r, not a TaskOutcome", rec.task.id, type(outcome))
            return TaskOutcome.failed("task failed: the runner returned no outcome")
        return outcome

    def _finish(self, rec: TaskRecord, outcome: TaskOutcome) -> None:
        state = outcome.state
        if state is TaskState.COMPLETED:
            rec.artifacts = list(outcome.artifacts) if outcome.artifacts is not None else None
            rec.end_output(outcome.output)
            rec.set(TaskState.COMPLETED, outcome.status_text or outcome.output or None, agent=True)
        elif state is TaskState.FAILED:
            rec.end_output("")
            rec.set(TaskState.FAILED, outcome.status_text or outcome.output or "task failed", agent=True)
        elif state in INTERRUPTED:
            rec.end_output("")
            rec.set(state, outcome.status_text or outcome.output or f"the task is {state.value}", agent=True)
            del self._live[rec.task.id]
            crowded = self._waiting.put(rec)  # waits for the next message naming it
            if crowded is not None:
                self._end_waiting(
                    crowded,
                    f"task canceled: its owner has {self._waiting.per_owner} newer tasks waiting for input",
                )
            self._expire_now_and_then(rec.updated)
            return
        elif rec.state is not TaskState.CANCELED:  # a cancel already recorded (and told) it
            rec.set(TaskState.CANCELED, outcome.status_text or "task canceled")
        self._retire(rec)
        self._expire_now_and_then(rec.updated)  # the clock was just read for the new state

    def _expire_now_and_then(self, now: float) -> None:
        """:meth:`_expire` after a run, at most once a second (a look at a task always expires first,
        so nobody sees a task past its retention; this keeps memory to the retention too)."""
        if now - self._expired_at >= 1.0:
            self._expired_at = now
            self._expire(now)


_GOES_ON = frozenset({TaskState.COMPLETED, *INTERRUPTED})
"""A turn that ended so lets the next queued turn run (an interrupted turn's input is that turn)."""


def _from_message(incoming: Incoming) -> dict[str, Any]:
    """The task fields one message sets, whether it opens the task or continues it."""
    message = incoming.message
    return {
        "message_id": message.message_id,
        "text": message.text,
        "parts": tuple(message.parts),
        "provenance": incoming.provenance,
        "lane": incoming.provenance.lane,
        "traceparent_from_caller": incoming.raw_traceparent,
        "trace": incoming.trace,
        "tracestate": incoming.tracestate,
        "delegation_id": incoming.delegation_id,
        "received_at_ms": time.time_ns() // 1_000_000,
        "dialect": incoming.dialect,
    }
