"""A task's updates as A2A streams and push notifications carry them, in either dialect (I/O-free).

Why here: the door's SSE streams, its push notifications and our client's stream reader all speak
these shapes, and the shapes differ by dialect. A2A 1.0 wraps every stream item in a
``StreamResponse`` (``{"task": …}``, ``{"statusUpdate": …}``, ``{"artifactUpdate": …}``, no
``final``); 0.3 sends the objects themselves, told apart by ``kind`` (``task``, ``status-update``
with ``final``, ``artifact-update``). docs/a2a.md, "Streaming".
"""

from __future__ import annotations

from typing import Any, NamedTuple

from a2a.protocol.models import (
    Artifact,
    Dialect,
    Task,
    TaskState,
    TaskStatus,
    dump_artifact,
    dump_status,
    dump_task,
    parse_task,
)

__all__ = [
    "ENDING",
    "ArtifactUpdate",
    "StatusUpdate",
    "TaskEvent",
    "dump_event",
    "ends_stream",
    "parse_event",
    "wrap_task",
]


class StatusUpdate(NamedTuple):
    """The task's status changed. ``final``: the stream ends with it (terminal or interrupted)."""

    task_id: str
    context_id: str
    status: TaskStatus
    final: bool


class ArtifactUpdate(NamedTuple):
    """Output arrived: a chunk of an artifact. ``append``: it continues the artifact of the same
    id; ``last_chunk``: that artifact is complete."""

    task_id: str
    context_id: str
    artifact: Artifact
    append: bool
    last_chunk: bool


TaskEvent = StatusUpdate | ArtifactUpdate

ENDING = frozenset(
    {
        TaskState.COMPLETED,
        TaskState.FAILED,
        TaskState.CANCELED,
        TaskState.REJECTED,
        TaskState.INPUT_REQUIRED,
        TaskState.AUTH_REQUIRED,
    }
)


def ends_stream(state: TaskState) -> bool:
    """A stream closes at a terminal or interrupted state (A2A 1.0 §3.1.2)."""
    return state in ENDING


def wrap_task(task: dict[str, Any], dialect: Dialect) -> dict[str, Any]:
    """A dumped Task as a stream item: ``{"task": …}`` in 1.0, the Task itself in 0.3."""
    return {"task": task} if dialect == "1.0" else task


def dump_event(event: TaskEvent, dialect: Dialect) -> dict[str, Any]:
    """One update as a stream item (the JSON-RPC ``result`` of one SSE event, or a 1.0 push body)."""
    if isinstance(event, StatusUpdate):
        body: dict[str, Any] = {
            "taskId": event.task_id,
            "contextId": event.context_id,
            "status": dump_status(event.status, dialect),
        }
        if dialect == "1.0":
            return {"statusUpdate": body}
        return {"kind": "status-update", **body, "final": event.final}
    body = {
        "taskId": event.task_id,
        "contextId": event.context_id,
        "artifact": dump_artifact(event.artifact, dialect),
        "append": event.append,
        "lastChunk": event.last_chunk,
    }
    if dialect == "1.0":
        return {"artifactUpdate": body}
    return {"kind": "artifact-update", **body}


def parse_event(obj: object) -> Task | TaskEvent:
    """A stream item of either dialect: the Task, or an update. ValueError if it is neither."""
    if not isinstance(obj, dict):
        raise ValueError("a stream item must be an object")
    kind = obj.get("kind")
    if "task" in obj and isinstance(obj["task"], dict):
        return parse_task(obj["task"])
    if kind == "task" or (kind is None and "status" in obj and "id" in obj):
        return parse_task(obj)
    status = obj.get("statusUpdate") if "statusUpdate" in obj else (obj if kind == "status-update" else None)
    if isinstance(status, dict):
        parsed = TaskStatus.model_validate(status.get("status"))
        return StatusUpdate(
            _str(status, "taskId"),
            _str(status, "contextId"),
            parsed,
            bool(status.get("final", ends_stream(parsed.state))),
        )
    art = obj.get("artifactUpdate") if "artifactUpdate" in obj else (obj if kind == "artifact-update" else None)
    if isinstance(art, dict):
        return ArtifactUpdate(
            _str(art, "taskId"),
            _str(art, "contextId"),
            Artifact.model_validate(art.get("artifact")),
            art.get("append") is True,
            art.get("lastChunk") is True,
        )
    raise ValueError("a stream item must be a task, a status update or an artifact update")


def _str(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value


def task_of(task: Task, dialect: Dialect) -> dict[str, Any]:
    """``wrap_task(dump_task(task, dialect), dialect)``."""
    return wrap_task(dump_task(task, dialect), dialect)
