"""The values a door's task queue works with: a task's run, a runner's outcome, an arriving message.

Why a module of their own: the capsule host, the queue and the JSON-RPC side all speak in these
types, and none of them should need the others to do so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from a2a.protocol import traceparent
from a2a.protocol.models import Artifact, Dialect, Message, Part, TaskState
from a2a.protocol.origin import Lane, Origin, Provenance, Trust

TaskAcceptance = Literal["single", "queue", "none"]
CancelPhase = Literal["queued", "running"]

BUSY = "task rejected: capsule is busy"
CLOSING = "task rejected: the session is closing"
INTERRUPTED = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})
DEFAULT_RETENTION_SECS = 3600.0
DEFAULT_MAX_FINISHED = 1000
DEFAULT_MAX_HISTORY = 64
DEFAULT_MAX_WAITING = 100


class DoorTask(NamedTuple):
    """One run of a task: everything the capsule host needs to start it and write its trace records.

    A task continued after ``input-required`` gets a new DoorTask with the same ``id`` and
    ``context_id``, the new message's fields and ``turn`` one higher. Immutable; a named tuple
    rather than a frozen dataclass because one is built per request on the door's hot path, and
    a frozen dataclass pays a ``object.__setattr__`` call per field.
    """

    id: str
    context_id: str
    message_id: str
    text: str
    parts: tuple[Part, ...]
    provenance: Provenance
    lane: Lane
    traceparent_from_caller: str | None
    trace: traceparent.TraceParent
    tracestate: str | None
    delegation_id: str | None
    received_at_ms: int
    dialect: Dialect | None
    owner: str | None = None
    turn: int = 1

    @property
    def origin(self) -> Origin:
        return self.provenance.origin

    @property
    def trust(self) -> Trust:
        return self.provenance.trust

    @property
    def message_parts_bytes(self) -> int:
        return len(self.text.encode())


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """What a runner reports. ``output`` becomes the ``response`` artifact of a completed task.

    ``input_required(question)`` and ``auth_required(what)`` interrupt the task: it waits for the
    next message naming it.
    """

    state: TaskState
    output: str = ""
    artifacts: tuple[Artifact, ...] | None = None
    status_text: str | None = None

    def __post_init__(self) -> None:
        if not (self.state.terminal or self.state in INTERRUPTED) or self.state is TaskState.REJECTED:
            raise ValueError(
                "a task outcome is completed, failed, canceled, input-required or auth-required, "
                f"not {self.state.value}"
            )

    @classmethod
    def completed(cls, output: str = "") -> TaskOutcome:
        return cls(TaskState.COMPLETED, output)

    @classmethod
    def failed(cls, reason: str) -> TaskOutcome:
        return cls(TaskState.FAILED, status_text=reason)

    @classmethod
    def canceled(cls, reason: str = "task canceled") -> TaskOutcome:
        return cls(TaskState.CANCELED, status_text=reason)

    @classmethod
    def input_required(cls, question: str) -> TaskOutcome:
        return cls(TaskState.INPUT_REQUIRED, status_text=question)

    @classmethod
    def auth_required(cls, what: str) -> TaskOutcome:
        """Interrupt the task until the caller authorizes (the next message naming it continues it)."""
        return cls(TaskState.AUTH_REQUIRED, status_text=what)


Runner = Callable[[DoorTask], Coroutine[Any, Any, TaskOutcome]]
ActivateHook = Callable[[DoorTask], Awaitable[None]]
FinishHook = Callable[[DoorTask, TaskOutcome], Awaitable[None]]
CancelHook = Callable[[DoorTask, CancelPhase], Awaitable[None]]


class Incoming(NamedTuple):
    """A parsed message plus how it arrived: the input of one admission (a named tuple, as
    :class:`DoorTask`, for the same reason)."""

    message: Message
    provenance: Provenance
    raw_traceparent: str | None
    trace: traceparent.TraceParent
    tracestate: str | None
    delegation_id: str | None
    dialect: Dialect | None
    owner: str | None
