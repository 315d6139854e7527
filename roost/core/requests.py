"""The typed requests whose parsed form is not their wire model.

Every route hands its service one typed request, parsed at the edge (:mod:`roost.http.bodies`).
Where the parsed request *is* the body as published, it is that route's model from
:mod:`roost.core.api_models` (built with ``model_construct`` once the field readers checked it),
so the schema and the value cannot drift. Two routes turn their body into something else, and
their typed request is a named tuple here:

* ``POST /a2a/send`` (:class:`SendRequest`): ``text`` and ``parts`` become one tuple of parsed
  parts and ``message_id`` gets its default. One is made per relayed send, the daemon's hottest
  path, and a named tuple costs a fraction of a frozen dataclass's ``__init__`` or a model's
  ``model_construct``.
* ``POST /jobs`` (:class:`LaunchRequest`, the launcher's and the admin socket's): ``task`` becomes
  the code-task payload, ``deadline_secs`` a float, ``untrusted`` a boolean, ``workdir`` normal.

Pure: no I/O.
"""

from __future__ import annotations

from typing import NamedTuple

from a2a.protocol.models import Part

__all__ = ["LaunchRequest", "SendRequest"]


class SendRequest(NamedTuple):
    """The only fields of a ``POST /a2a/send`` body the relay reads."""

    peer_url: str
    parts: tuple[Part, ...]
    context_id: str | None
    task_id: str | None
    message_id: str
    traceparent: str | None
    tracestate: str | None


class LaunchRequest(NamedTuple):
    """A ``POST /jobs`` body once validated (wire schema: :class:`roost.core.api_models.JobRequest`)."""

    name: str
    version: str
    task: dict[str, str | None] | None = None
    deadline_secs: float | None = None
    untrusted: bool = False
    workdir: str | None = None
    traceparent: str | None = None
    """The request's W3C ``traceparent`` header: the job's span is its child (roost/observe/jobspans.py)."""
    formation_id: str | None = None
