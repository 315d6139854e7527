"""The relay's bodies: ``POST /a2a/send``, ``/a2a/tasks/get`` and ``/a2a/tasks/cancel``.

Only the fields the relay reads are read: nothing in a body sets origin or trust (the relay
stamps those from the session record, :mod:`roost.services.relay`), and unknown fields are
ignored. A send is parsed once per relayed message, the daemon's hottest path: its optional
fields are checked in one loop rather than through a reader call each.
"""

from __future__ import annotations

from typing import Any

from a2a.protocol.ids import prefixed
from a2a.protocol.models import Part, parse_part, text_part
from roost.core.api_models import A2ATaskRequest
from roost.core.errors import BadRequest
from roost.core.fields import Body, not_a_string, optional_str, require_str
from roost.core.requests import SendRequest

__all__ = ["MAX_TEXT_BYTES", "parse_send", "parse_task_call"]

MAX_TEXT_BYTES = 48 * 1024  # the HTTP body ceiling is 64 KiB; leave room for the envelope


def parse_task_call(body: Body) -> A2ATaskRequest:
    """A ``/a2a/tasks/get`` or ``/a2a/tasks/cancel`` body: the peer and the task there."""
    peer_url = require_str(body, "peer_url").strip()
    task_id = require_str(body, "task_id")
    if not peer_url or not task_id:
        raise BadRequest("peer_url and task_id must not be empty")
    return A2ATaskRequest.model_construct(peer_url=peer_url, task_id=task_id)


def parse_send(body: Body) -> SendRequest:
    """A send body. ``text`` or ``parts`` is required; nothing sets origin or trust.

    ``task_id`` (with ``context_id``) makes the message continue a task the peer holds, e.g. one
    waiting for input; the seal covers both, so neither can be swapped on a sealed message.
    """
    peer_url = require_str(body, "peer_url").strip()
    if not peer_url:
        raise BadRequest("peer_url must not be empty")
    text = optional_str(body, "text")
    raw_parts = body.get("parts")
    parts: list[Part] = []
    if raw_parts is not None:
        if not isinstance(raw_parts, list) or not raw_parts:
            raise BadRequest("invalid JSON: field 'parts' must be a non-empty list of parts")
        try:
            parts = [parse_part(p, i) for i, p in enumerate(raw_parts)]
        except ValueError as exc:
            reason = str(exc).splitlines()[0] if str(exc) else "invalid part"
            raise BadRequest(f"invalid JSON: field 'parts': {reason}") from None
    if text is not None:
        parts.insert(0, text_part(text))
    if not parts:
        raise BadRequest("a send needs 'text' or 'parts'")
    size = 0
    for p in parts:
        if p.text is not None:
            size += len(p.text.encode())
    if size > MAX_TEXT_BYTES:
        raise BadRequest(f"the message text is {size} bytes; the relay carries at most {MAX_TEXT_BYTES}")
    get = body.get
    fields: tuple[Any, ...] = (
        get("context_id"),
        get("task_id"),
        get("message_id"),
        get("traceparent"),
        get("tracestate"),
    )
    for key, value in zip(_OPTIONAL, fields, strict=True):
        if value is not None and not isinstance(value, str):
            raise not_a_string(key)
    context_id, task_id, message_id, tp, tracestate = fields
    return SendRequest(
        peer_url, tuple(parts), context_id or None, task_id or None, message_id or prefixed("msg"), tp, tracestate
    )


_OPTIONAL = ("context_id", "task_id", "message_id", "traceparent", "tracestate")
