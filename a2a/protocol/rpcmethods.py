"""The JSON-RPC method table of a door and the request fields every method shares (I/O-free).

Why here: the door's dispatch is a lookup in :data:`OPS`; what each name means, which dialect it
belongs to and how a send's ``configuration`` reads are pure facts that are tested on their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from multidict import CIMultiDictProxy

from a2a.protocol import errors, listing
from a2a.protocol.models import Dialect

VERSION_HEADER = "A2A-Version"
"""The header a 1.0 client names its dialect in (A2A 1.0 §3.6.1); the door reads it, the client sends it."""

OPS: dict[str, tuple[str, Dialect]] = {
    "message/send": ("send", "0.3"),
    "tasks/get": ("get", "0.3"),
    "tasks/list": ("list", "0.3"),
    "tasks/cancel": ("cancel", "0.3"),
    "message/stream": ("stream", "0.3"),
    "tasks/resubscribe": ("subscribe", "0.3"),
    "agent/getAuthenticatedExtendedCard": ("extended_card", "0.3"),
    "SendMessage": ("send", "1.0"),
    "GetTask": ("get", "1.0"),
    "ListTasks": ("list", "1.0"),
    "CancelTask": ("cancel", "1.0"),
    "SendStreamingMessage": ("stream", "1.0"),
    "SubscribeToTask": ("subscribe", "1.0"),
    "GetExtendedAgentCard": ("extended_card", "1.0"),
}
for name_ in ("set", "get", "list", "delete"):
    OPS[f"tasks/pushNotificationConfig/{name_}"] = ("push", "0.3")
for name_ in ("Create", "Set", "Get", "List", "Delete"):
    OPS[f"{name_}TaskPushNotificationConfig"] = ("push", "1.0")
OPS["ListTaskPushNotificationConfigs"] = ("push", "1.0")
UNSUPPORTED = {
    "extended_card": "this agent's card declares no extended agent card",
    "batched_stream": "a streaming method answers with a stream of its own and cannot be a member of a batch",
}
STREAMING = frozenset({"stream", "subscribe"})
"""Methods answered with a Server-Sent Events stream rather than one JSON body."""


def send_configuration(raw: object, dialect: Dialect, *, push: bool = False) -> tuple[bool, int | None]:
    """(block?, historyLength) from a send's ``configuration``; -32602 on bad fields, -32003 for a
    push-notification config unless ``push`` (then :func:`send_push_config` reads it)."""
    if raw is None:
        return dialect == "1.0", None
    if type(raw) is dict and len(raw) == 1:  # the usual one: only the flag asking for an immediate answer
        if raw.get("returnImmediately") is True and dialect == "1.0":
            return False, None
        if raw.get("blocking") is False and dialect == "0.3":
            return False, None
    if not isinstance(raw, dict):
        raise errors.invalid_params("configuration must be an object")
    if not push and send_push_config(raw) is not None:
        raise errors.push_notification_not_supported()
    history = listing.history_length(raw, "configuration")
    key, block_when = ("returnImmediately", False) if dialect == "1.0" else ("blocking", True)
    value = raw.get(key)
    if value is None:
        return dialect == "1.0", history
    if not isinstance(value, bool):
        raise errors.invalid_params(f"configuration.{key} must be true or false")
    return value is block_when, history


def request_versions(headers: Mapping[str, str]) -> list[str]:
    """Every non-empty ``A2A-Version`` header value (a repeated header counts as conflicting)."""
    if type(headers) is CIMultiDictProxy:  # a request's headers: the usual case, read without getattr
        given = headers.getall(VERSION_HEADER, ())
        if len(given) == 1:
            value = given[0].strip()
            return [value] if value else []
        return [v.strip() for v in given if v.strip()]
    getall = getattr(headers, "getall", None)
    values: list[str] = getall(VERSION_HEADER, []) if getall is not None else []
    if getall is None and VERSION_HEADER in headers:
        values = [headers[VERSION_HEADER]]
    if len(values) == 1:  # the usual request
        value = values[0].strip()
        return [value] if value else []
    return [v.strip() for v in values if v.strip()]


def is_v1(version: str) -> bool:
    return version == "1.0" or version.startswith("1.0.")


def supported_version(version: str) -> bool:
    return is_v1(version) or version == "0.3" or version.startswith("0.3.")


def task_id_param(params: dict[str, Any], method: str) -> str:
    task_id = params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise errors.invalid_params(f"{method} requires an id")
    return task_id


def send_push_config(raw: object) -> object | None:
    """The push-notification config a send's ``configuration`` carries (1.0 SDKs name it
    ``taskPushNotificationConfig``, 0.3 ``pushNotificationConfig``), unparsed; None without one."""
    if not isinstance(raw, dict):
        return None
    found = raw.get("taskPushNotificationConfig")
    return found if found is not None else raw.get("pushNotificationConfig")
