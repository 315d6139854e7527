"""``ListTasks`` and the request fields several methods share: parsed and checked, I/O-free.

Why here: the door's JSON-RPC side turns every bad field into -32602 with a sentence, and the
paging rules (newest status first, an opaque cursor token, ``totalSize`` before paging) are pure
functions that are tested on their own. Defaults and bounds are documented in ``docs/a2a.md``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from a2a.protocol import errors
from a2a.protocol.models import TaskState

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
_TOKEN_PREFIX = "v1:"


class Listable(Protocol):
    """What a listed record exposes (``TaskRecord`` satisfies it)."""

    @property
    def updated(self) -> float: ...

    @property
    def list_key(self) -> tuple[str, str]: ...  # (task id, context id)

    @property
    def state(self) -> TaskState: ...


@dataclass(frozen=True, slots=True)
class ListQuery:
    context_id: str | None
    status: TaskState | None
    status_after: float | None
    page_size: int
    cursor: tuple[float, str] | None
    history_length: int | None
    include_artifacts: bool


def history_length(params: Mapping[str, Any], where: str = "params") -> int | None:
    """``historyLength``: absent/null → None (server default); a negative or non-integer → -32602."""
    value = params.get("historyLength")
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise errors.invalid_params(f"{where}.historyLength must be an integer")
    if value < 0:
        raise errors.invalid_params(f"{where}.historyLength must not be negative (got {value})")
    return value


def _optional_bool(params: Mapping[str, Any], key: str) -> bool | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise errors.invalid_params(f"{key} must be true or false")
    return value


def parse_timestamp(value: object, key: str) -> float:
    """An RFC 3339 timestamp with a zone (``Z`` or an offset) → epoch seconds; else -32602."""
    if not isinstance(value, str) or not value:
        raise errors.invalid_params(f"{key} must be an RFC 3339 timestamp string")
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise errors.invalid_params(f"{key} is not an RFC 3339 timestamp: {value[:64]!r}") from None
    if parsed.tzinfo is None:
        raise errors.invalid_params(f"{key} needs a time zone (Z or an offset): {value[:64]!r}")
    return parsed.timestamp()


def encode_token(updated: float, task_id: str) -> str:
    raw = f"{_TOKEN_PREFIX}{updated!r}|{task_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str) -> tuple[float, str]:
    """The cursor a previous page ended at; -32602 for anything this door did not issue."""
    bad = errors.invalid_params("pageToken is not a page token this server issued")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise bad from None
    if not raw.startswith(_TOKEN_PREFIX) or "|" not in raw:
        raise bad
    ts, _, task_id = raw[len(_TOKEN_PREFIX) :].partition("|")
    try:
        when = float(ts)
    except ValueError:
        raise bad from None
    if not task_id:
        raise bad
    return when, task_id


_NO_STATUS = ("", "TASK_STATE_UNSPECIFIED", "UNRECOGNIZED")
"""``status`` values that mean "no filter": absent in any form, the proto's unspecified value, and
the official JS SDK's ``UNRECOGNIZED`` (its protobuf default for an unset enum, which its
``listTasks({})`` sends)."""


def parse_list(params: Mapping[str, Any]) -> ListQuery:
    """Every ``ListTasks`` field checked; -32602 with the field's name on the first bad one."""
    context_id = params.get("contextId")
    if context_id is not None and not isinstance(context_id, str):
        raise errors.invalid_params("contextId must be a string")
    raw_status = params.get("status")
    status: TaskState | None = None
    if raw_status is not None and raw_status not in _NO_STATUS:
        if not isinstance(raw_status, str):
            raise errors.invalid_params("status must be a task state name such as TASK_STATE_WORKING")
        status = TaskState.parse(raw_status)
        if status is TaskState.UNKNOWN and raw_status != "unknown":
            raise errors.invalid_params(f"status {raw_status[:64]!r} is not a task state")
    raw_after = params.get("statusTimestampAfter")
    status_after = parse_timestamp(raw_after, "statusTimestampAfter") if raw_after is not None else None
    raw_size = params.get("pageSize")
    if raw_size is None:
        page_size = DEFAULT_PAGE_SIZE
    elif not isinstance(raw_size, int) or isinstance(raw_size, bool):
        raise errors.invalid_params("pageSize must be an integer")
    elif not 1 <= raw_size <= MAX_PAGE_SIZE:
        raise errors.invalid_params(f"pageSize must be between 1 and {MAX_PAGE_SIZE} (got {raw_size})")
    else:
        page_size = raw_size
    token = params.get("pageToken")
    if token is not None and not isinstance(token, str):
        raise errors.invalid_params("pageToken must be a string")
    include = _optional_bool(params, "includeArtifacts")
    return ListQuery(
        context_id=context_id or None,
        status=status,
        status_after=status_after,
        page_size=page_size,
        cursor=decode_token(token) if token else None,
        history_length=history_length(params),
        include_artifacts=bool(include),
    )


def _sort_key(rec: Listable) -> tuple[float, str]:
    return rec.updated, rec.list_key[0]


def select(records: Iterable[Listable], query: ListQuery) -> tuple[Sequence[Listable], int, str]:
    """One page: (records newest status first, total matching before paging, next token or "")."""
    matching = [
        r
        for r in records
        if (query.context_id is None or r.list_key[1] == query.context_id)
        and (query.status is None or r.state is query.status)
        and (query.status_after is None or r.updated >= query.status_after)
    ]
    matching.sort(key=_sort_key, reverse=True)
    total = len(matching)
    start = 0
    if query.cursor is not None:
        cursor = query.cursor
        start = next((i for i, r in enumerate(matching) if _sort_key(r) < cursor), total)
    page = matching[start : start + query.page_size]
    more = start + query.page_size < total
    token = encode_token(*_sort_key(page[-1])) if more and page else ""
    return page, total, token
