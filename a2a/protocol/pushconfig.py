"""Push-notification configs as both dialects carry them: parsed, checked and dumped (I/O-free).

Why here: the door's config methods, a send's ``configuration`` and delivery all read the same
config, and the two dialects spell it differently. A2A 1.0 ``TaskPushNotificationConfig`` is
flat (``{taskId, id, url, token, authentication: {scheme, credentials}}``); 0.3 nests it
(``{taskId, pushNotificationConfig: {id, url, token, authentication: {schemes, credentials}}}``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from a2a.protocol import errors
from a2a.protocol.ids import prefixed
from a2a.protocol.models import Dialect

__all__ = ["MAX_CONFIGS_PER_TASK", "PushConfig", "dump_config", "field", "parse_config", "parse_inner"]

MAX_CONFIGS_PER_TASK = 10
MAX_URL = 2048
MAX_SECRET = 4096


@dataclass(frozen=True, slots=True)
class PushConfig:
    """Where one task's updates are posted, and how the webhook knows they are ours."""

    id: str
    task_id: str
    url: str
    token: str | None
    scheme: str | None  # the Authorization scheme (``Bearer``…), sent with ``credentials``
    credentials: str | None
    dialect: Dialect  # the dialect it was set in: the bodies posted to it are in that dialect


def _opt_str(obj: dict[str, Any], key: str, where: str, limit: int = MAX_SECRET) -> str | None:
    value = obj.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise errors.invalid_params(f"{where}.{key} must be a string")
    if len(value) > limit:
        raise errors.invalid_params(f"{where}.{key} is longer than {limit} characters")
    return value


def parse_inner(raw: object, task_id: str, dialect: Dialect, where: str) -> PushConfig:
    """One config's own fields (``url``, ``id``, ``token``, ``authentication``); -32602 when wrong."""
    if not isinstance(raw, dict):
        raise errors.invalid_params(f"{where} must be an object")
    url = _opt_str(raw, "url", where, MAX_URL)
    if url is None:
        raise errors.invalid_params(f"{where}.url is required")
    auth = raw.get("authentication")
    scheme = credentials = None
    if auth is not None:
        if not isinstance(auth, dict):
            raise errors.invalid_params(f"{where}.authentication must be an object")
        credentials = _opt_str(auth, "credentials", f"{where}.authentication")
        if dialect == "1.0":
            scheme = _opt_str(auth, "scheme", f"{where}.authentication", 64)
        else:
            schemes = auth.get("schemes")
            if schemes is not None and (
                not isinstance(schemes, list) or not all(isinstance(s, str) and s for s in schemes)
            ):
                raise errors.invalid_params(f"{where}.authentication.schemes must be a list of scheme names")
            scheme = schemes[0] if schemes else None
        for value in (scheme, credentials):
            if value is not None and any(c in value for c in "\r\n\0"):
                raise errors.invalid_params(f"{where}.authentication has a character that cannot be sent in a header")
    token = _opt_str(raw, "token", where)
    if token is not None and any(c in token for c in "\r\n\0"):
        raise errors.invalid_params(f"{where}.token has a character that cannot be sent in a header")
    # Unnamed: a new id in 1.0; the task's id in 0.3, as the official 0.3 SDK names it.
    config_id = _opt_str(raw, "id", where, 128) or (task_id if dialect == "0.3" and task_id else prefixed("pnc"))
    return PushConfig(config_id, task_id, url, token, scheme, credentials, dialect)


def field(params: dict[str, Any], name: str) -> Any:
    """A params field by its JSON name, else by the proto field name (``taskId`` / ``task_id``): a
    ProtoJSON reader accepts both, as the official SDK servers do, and some clients send the latter."""
    if name in params:
        return params[name]
    return params.get(re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name))


def parse_config(params: dict[str, Any], dialect: Dialect) -> PushConfig:
    """The params of 1.0 ``CreateTaskPushNotificationConfig`` or 0.3 ``tasks/pushNotificationConfig/set``."""
    task_id = field(params, "taskId")
    if not isinstance(task_id, str) or not task_id:
        raise errors.invalid_params("taskId is required")
    if dialect == "1.0":
        return parse_inner(params, task_id, dialect, "params")
    return parse_inner(field(params, "pushNotificationConfig"), task_id, dialect, "pushNotificationConfig")


def dump_config(config: PushConfig, dialect: Dialect) -> dict[str, Any]:
    """A config as its dialect shows it (the credentials are never shown back)."""
    inner: dict[str, Any] = {"id": config.id, "url": config.url}
    if config.token is not None:
        inner["token"] = config.token
    if config.scheme is not None:
        inner["authentication"] = {"scheme": config.scheme} if dialect == "1.0" else {"schemes": [config.scheme]}
    if dialect == "1.0":
        return {"taskId": config.task_id, **inner}
    return {"taskId": config.task_id, "pushNotificationConfig": inner}
