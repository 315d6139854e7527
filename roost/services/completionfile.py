"""The completion path: ``MURMUR_SPAWNER``, ``completion.json`` and its delivery.

Shared by the child's host (``roost-capsule``, ``reported_by: child``) and the daemon's
launcher (``reported_by: launcher``), so both write the same record the same way:

* the record is written atomically with ``delivered: false`` *before* anything is posted, then
  rewritten with ``delivered: true`` or ``delivery_error`` — a reader never sees a half file;
* delivery is one ``message/send`` to the parent's door with origin ``completion``, the trust
  the spawner handle carries, and ``x-murmur-delegation-id`` / ``x-murmur-completion-session``;
  the daemon's launcher seals it (:mod:`a2a.protocol.seal`, under the parent session's door key, over the
  message's body and delegation id) so the door believes that origin and trust — an unsealed
  completion is recorded untrusted. A child the launcher started therefore leaves its record
  for the launcher to deliver (``docs/security.md``, "Sealed origin and trust");
* the message names where the result is and never carries the child's output.

The record itself, the spawner handle and the fixed sentences are I/O-free and live in
:mod:`roost.core.completion` (re-exported here); this module writes, reads and delivers.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from a2a.client import A2AClient
from a2a.door import COMPLETION_SESSION_HEADER, DELEGATION_HEADER
from a2a.protocol import seal
from a2a.protocol.errors import A2AError, JsonRpcError, PeerHTTPError, PeerUnreachable
from a2a.protocol.ids import prefixed
from a2a.protocol.models import Message, Part, TaskState
from a2a.protocol.origin import ORIGIN_HEADER, TRUST_HEADER, Origin
from roost.core.completion import (
    COMPLETION_FILE,
    DETAIL_MAX_BYTES,
    OPERATOR_CANCEL_DETAIL,
    STDERR_LINES,
    TERMINATED_DETAIL,
    CompletionRecord,
    Reporter,
    SpawnerHandle,
    SpawnerHandleError,
    Status,
    crash_detail,
    cut_detail,
    deadline_detail,
    message_text,
)
from roost.system.fsutil import Place, write_atomic

__all__ = [
    "COMPLETION_FILE",
    "DETAIL_MAX_BYTES",
    "OPERATOR_CANCEL_DETAIL",
    "STDERR_LINES",
    "TERMINATED_DETAIL",
    "CompletionRecord",
    "Reporter",
    "SpawnerHandle",
    "SpawnerHandleError",
    "Status",
    "completion_request",
    "crash_detail",
    "cut_detail",
    "deadline_detail",
    "deliver",
    "message_text",
    "read_completion",
    "report",
    "write_completion",
    "write_json_atomic",
]


def write_json_atomic(path: Path, obj: object, *, mode: int = 0o600) -> None:
    """Pretty JSON + newline, written atomically and durably (blocking)."""
    write_atomic(path, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8"), mode=mode)


def write_completion(workdir: Path | Place, rec: CompletionRecord) -> Path:
    """Write ``completion.json``; into a :class:`Place` (the daemon's writes) without following links."""
    data = (json.dumps(rec.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    if isinstance(workdir, Place):
        workdir.write(COMPLETION_FILE, data)
        return workdir.path / COMPLETION_FILE
    path = workdir / COMPLETION_FILE
    write_atomic(path, data)
    return path


def read_completion(workdir: Path | Place) -> CompletionRecord | None:
    """The record in ``workdir``, or None when there is none or it is unreadable (or a link)."""
    try:
        raw = workdir.read(COMPLETION_FILE) if isinstance(workdir, Place) else (workdir / COMPLETION_FILE).read_bytes()
        obj = json.loads(raw)
    except (OSError, ValueError):
        return None
    if not isinstance(obj, dict):
        return None
    try:
        return CompletionRecord.from_dict(obj)
    except ValueError:
        return None


def completion_request(
    handle: SpawnerHandle, rec: CompletionRecord, *, seal_key: bytes | None = None
) -> tuple[Message, dict[str, str]]:
    """The message and headers that deliver ``rec`` to the parent's door named by ``handle``.

    With ``seal_key`` (the parent session's door key, which only the daemon and that session
    hold) the origin and trust are sealed over the message's body and delegation id, with the
    child's session as the sender (its delegation id when it never registered).
    """
    assert handle.trust is not None
    message = Message(
        message_id=prefixed("msg"),
        role="user",
        parts=[Part(kind="text", text=message_text(rec))],
        context_id=handle.context_id,
    )
    headers = {
        ORIGIN_HEADER: Origin.COMPLETION.value,
        TRUST_HEADER: handle.trust,
        DELEGATION_HEADER: handle.delegation_id,
        COMPLETION_SESSION_HEADER: handle.session_id,
    }
    if seal_key is not None:
        headers[seal.SEAL_HEADER] = seal.seal(
            seal_key,
            sender=rec.session_id or handle.delegation_id,
            receiver=handle.session_id,
            origin=Origin.COMPLETION.value,
            trust=handle.trust,
            traceparent="",  # a delivery carries no trace context of its own
            subject=seal.send_subject(message, handle.delegation_id),
        )
    return message, headers


async def deliver(
    client: A2AClient,
    handle: SpawnerHandle,
    rec: CompletionRecord,
    *,
    window_secs: float = 30.0,
    seal_key: bytes | None = None,
) -> str | None:
    """Post the completion to the parent's door; None on success, else the reason.

    Transport errors are retried with backoff (100 ms doubling to 2 s) for ``window_secs``,
    because the parent's listener may still be coming up; a refusal is final. ``seal_key``
    seals the delivery (:func:`completion_request`).
    """
    if handle.url is None or handle.trust is None:
        return "the spawner handle carries no completion address"
    message, headers = completion_request(handle, rec, seal_key=seal_key)
    deadline = time.monotonic() + window_secs
    delay = 0.1
    while True:
        try:
            task = await client.send_message(handle.url, message, dialect="0.3", headers=headers)
        except PeerUnreachable as exc:
            if time.monotonic() + delay > deadline:
                return str(exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
            continue
        except JsonRpcError as exc:
            return exc.message or "the parent refused the completion"
        except (PeerHTTPError, A2AError) as exc:
            return str(exc)
        if task.status.state == TaskState.REJECTED:
            return "the parent rejected the completion: its queue is full"
        return None


async def report(
    client: A2AClient,
    handle: SpawnerHandle | None,
    workdir: Path | Place,
    rec: CompletionRecord,
    *,
    run_blocking: Callable[..., Awaitable[object]] | None = None,
    window_secs: float = 30.0,
    seal_key: bytes | None = None,
) -> CompletionRecord:
    """Write ``delivered: false``, post (when addressed), rewrite with the result.

    ``run_blocking`` is an awaitable-returning callable ``(fn, *args)`` (the daemon's executor);
    without one the writes run inline (the capsule host's own loop has nothing else to serve).
    ``seal_key`` seals the delivery (see :func:`deliver`); only the daemon has one to give.
    """

    async def blocking(fn: Callable[..., object], *args: object) -> object:
        if run_blocking is None:
            return fn(*args)
        return await run_blocking(fn, *args)

    first = replace(rec, delivered=False, delivery_error=None)
    await blocking(write_completion, workdir, first)
    if handle is None or not handle.addressed:
        return first
    error = await deliver(client, handle, first, window_secs=window_secs, seal_key=seal_key)
    final = replace(first, delivered=error is None, delivery_error=error)
    await blocking(write_completion, workdir, final)
    return final
