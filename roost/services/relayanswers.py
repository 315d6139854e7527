"""How the relay shows a peer's Task and streamed updates to the sending session (pure).

Why apart from :mod:`roost.services.relay`: these are the relay's answer shapes (docs/api.md,
"Relay"), plain functions of the peer's wire objects, while the relay itself is the I/O around
them.
"""

from __future__ import annotations

from typing import Any

from a2a.protocol.models import Task
from a2a.protocol.streamevents import ArtifactUpdate, StatusUpdate, TaskEvent

__all__ = ["stream_item", "task_answer"]


def stream_item(item: Task | TaskEvent) -> dict[str, Any]:
    """One streamed update as the relay shows it to the sender (docs/api.md, "Streaming a send")."""
    if isinstance(item, StatusUpdate):
        message = item.status.message
        return {
            "kind": "status",
            "task_id": item.task_id,
            "state": str(item.status.state),
            "status_text": message.text if message is not None else None,
            "final": item.final,
        }
    if isinstance(item, ArtifactUpdate):
        return {
            "kind": "artifact",
            "task_id": item.task_id,
            "artifact_id": item.artifact.artifact_id,
            "name": item.artifact.name,
            "text": "".join(p.text for p in item.artifact.parts if p.text is not None),
            "append": item.append,
            "last_chunk": item.last_chunk,
        }
    return {"kind": "task_state", **task_answer(item)}


def task_answer(task: Task) -> dict[str, Any]:
    """A peer's Task as the relay answers it: ids, state, status text and artifact texts."""
    status_text = task.status.message.text if task.status.message is not None else None
    artifacts = [
        {"name": a.name, "text": "\n".join(p.text for p in a.parts if p.text is not None)} for a in task.artifacts or []
    ]
    return {
        "task_id": task.id,
        "context_id": task.context_id,
        "state": task.status.state.value,
        "status_text": status_text,
        "artifacts": artifacts,
    }
