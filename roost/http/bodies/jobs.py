"""``POST /jobs`` (the TCP port's and the admin socket's): the typed request the launcher takes.

Its wire schema is :class:`roost.core.api_models.JobRequest`; its typed request is
:class:`roost.core.requests.LaunchRequest` (the task becomes the code-task payload). Each
mistake gets one sentence (400).
"""

from __future__ import annotations

from roost.core.errors import BadRequest
from roost.core.fields import Body, is_number, optional_abspath, optional_formation, require_str
from roost.core.ids import require_id
from roost.core.requests import LaunchRequest
from roost.services.launcher.childrecords import TASK_FIELDS

__all__ = ["MAX_DEADLINE_SECS", "parse_launch", "parse_task"]

MAX_DEADLINE_SECS = 7 * 86400


def parse_task(task: object) -> dict[str, str | None] | None:
    """A request's ``task`` as the code_task payload; a string is the objective."""
    if task is None:
        return None
    if isinstance(task, str):
        return {"objective": task, "instructions": None, "context": None, "output_format": None}
    if not isinstance(task, dict):
        raise BadRequest("task must be a string or an object with objective, instructions, context, output_format")
    unknown = sorted(set(task) - set(TASK_FIELDS))
    if unknown:
        raise BadRequest(f"task has an unknown field '{unknown[0]}'")
    payload: dict[str, str | None] = {}
    for key in TASK_FIELDS:
        value = task.get(key)
        if value is not None and not isinstance(value, str):
            raise BadRequest(f"task.{key} must be a string")
        payload[key] = value
    if not payload["objective"]:
        raise BadRequest("task.objective must be a non-empty string")
    return payload


def parse_launch(body: Body, *, traceparent: str | None = None) -> LaunchRequest:
    """Validate a ``POST /jobs`` body: both coordinates' presence and type, then their grammar,
    then the optional fields (one sentence per mistake); ``traceparent`` is the header's."""
    name = require_str(body, "name", null_is_missing=True)
    version = require_str(body, "version", null_is_missing=True)
    require_id("name", name)
    require_id("version", version)
    deadline = body.get("deadline_secs")
    if deadline is not None and (not is_number(deadline) or not 0 < deadline <= MAX_DEADLINE_SECS):
        raise BadRequest("deadline_secs must be a number of seconds above 0 and at most 604800")
    untrusted = body.get("untrusted", False)
    if not isinstance(untrusted, bool):
        raise BadRequest("untrusted must be true or false")
    workdir = optional_abspath(body, "workdir")
    formation = optional_formation(body, "formation_id")
    return LaunchRequest(
        name=name,
        version=version,
        task=parse_task(body.get("task")),
        deadline_secs=float(deadline) if deadline is not None else None,
        untrusted=untrusted,
        workdir=workdir,
        traceparent=traceparent,
        formation_id=formation,
    )
