"""A ``POST /jobs`` body, parsed at the edge into the typed request the launcher takes.

Its wire schema is :class:`roost.core.api_models.JobRequest`; each mistake gets one sentence (400).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from roost.core.errors import BadRequest
from roost.core.ids import require_id
from roost.services.launcher.childrecords import parse_task

__all__ = ["MAX_DEADLINE_SECS", "LaunchRequest", "parse_request"]

MAX_DEADLINE_SECS = 7 * 86400


@dataclass(frozen=True, slots=True)
class LaunchRequest:
    """A ``POST /jobs`` body once validated."""

    name: str
    version: str
    task: dict[str, str | None] | None = None
    deadline_secs: float | None = None
    untrusted: bool = False
    workdir: str | None = None
    traceparent: str | None = None
    """The request's W3C ``traceparent`` header: the job's span is its child (roost/observe/jobspans.py)."""


def parse_request(body: dict[str, object], *, traceparent: str | None = None) -> LaunchRequest:
    """Validate a ``POST /jobs`` body (one sentence per mistake); ``traceparent`` is the header's."""
    name, version = body.get("name"), body.get("version")
    for key, value in (("name", name), ("version", version)):
        if value is None:
            raise BadRequest(f"invalid JSON: missing field '{key}'")
        if not isinstance(value, str):
            raise BadRequest(f"invalid JSON: field '{key}' must be a string")
    assert isinstance(name, str) and isinstance(version, str)
    require_id("name", name)
    require_id("version", version)
    deadline = body.get("deadline_secs")
    if deadline is not None and (
        isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not 0 < deadline <= MAX_DEADLINE_SECS
    ):
        raise BadRequest("deadline_secs must be a number of seconds above 0 and at most 604800")
    untrusted = body.get("untrusted", False)
    if not isinstance(untrusted, bool):
        raise BadRequest("untrusted must be true or false")
    workdir = body.get("workdir")
    if workdir is not None and (not isinstance(workdir, str) or not os.path.isabs(workdir) or "\x00" in workdir):
        raise BadRequest("workdir must be an absolute path")
    return LaunchRequest(
        name=name,
        version=version,
        task=parse_task(body.get("task")),
        deadline_secs=float(deadline) if deadline is not None else None,
        untrusted=untrusted,
        workdir=os.path.normpath(workdir) if isinstance(workdir, str) else None,
        traceparent=traceparent,
    )
