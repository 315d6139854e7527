"""The door's parser of an arriving Message: strict per dialect, one sentence per refusal (I/O-free).

Why apart from :mod:`a2a.protocol.models`: the models read whatever a peer answers, in either dialect
and leniently (a client must cope). A door is the other side: a message that its dialect's
specification does not allow is refused (-32602), because a peer that is told nothing keeps
sending it. What each dialect requires (``docs/a2a.md``, "Sending"):

* 1.0: ``messageId`` non-empty, ``role`` ``ROLE_USER``/``ROLE_AGENT``, each part carries exactly
  one of ``text``, ``raw``, ``url`` or ``data`` (``kind`` is not a 1.0 field and is ignored).
* 0.3: ``kind: "message"``, ``messageId`` non-empty, ``role`` ``user``/``agent``, each part names
  its ``kind`` (``text``, ``file`` with a ``uri`` or ``bytes``, or ``data``) and carries that field.

Both: ``parts`` is a non-empty list; ``contextId``/``taskId`` strings or null; ``metadata`` an
object. The usual message (one text part) is read without the general path: this runs once per
request on the door's hot path.
"""

from __future__ import annotations

from typing import Any

from a2a.protocol.models import Dialect, FileContent, Message, Part, build

_ROLES: dict[Dialect, dict[str, str]] = {
    "1.0": {"ROLE_USER": "user", "ROLE_AGENT": "agent"},
    "0.3": {"user": "user", "agent": "agent"},
}
_ROLE_SENTENCE: dict[Dialect, str] = {
    "1.0": "role must be ROLE_USER or ROLE_AGENT",
    "0.3": 'role must be "user" or "agent"',
}
_V1_CONTENT = ("text", "raw", "url", "data")
_USUAL: dict[str, Any] = {"role": "user", "context_id": None, "task_id": None, "metadata": None}


def parse_message(obj: object, dialect: Dialect) -> Message:
    """One arriving Message of ``dialect``; ValueError with the sentence to answer (-32602)."""
    if type(obj) is not dict:
        raise ValueError("message must be an object")
    if dialect == "1.0" and len(obj) == 3:  # the usual 1.0 message: an id, a role and one text part
        message_id, role, raw_parts = obj.get("messageId"), obj.get("role"), obj.get("parts")
        if (
            type(message_id) is str
            and message_id
            and role == "ROLE_USER"
            and type(raw_parts) is list
            and len(raw_parts) == 1
            and type(raw_parts[0]) is dict
            and len(raw_parts[0]) == 1
            and type(raw_parts[0].get("text")) is str
        ):
            return build(Message, {**_USUAL, "message_id": message_id, "parts": [_text(raw_parts[0]["text"])]})
    if dialect == "0.3" and obj.get("kind") != "message":
        raise ValueError('an A2A 0.3 message needs kind "message"')
    message_id = obj.get("messageId")
    if type(message_id) is not str or not message_id:
        raise ValueError("messageId must be a non-empty string")
    raw_role = obj.get("role")
    role = _ROLES[dialect].get(raw_role) if type(raw_role) is str else None
    if role is None:
        raise ValueError(_ROLE_SENTENCE[dialect])
    raw_parts = obj.get("parts")
    if type(raw_parts) is not list:
        raise ValueError("parts must be a list of objects")
    if not raw_parts:
        raise ValueError("a message needs at least one part")
    part_of = _part_v1 if dialect == "1.0" else _part_v03
    parts = [part_of(raw, i) for i, raw in enumerate(raw_parts)]
    context_id = obj.get("contextId")
    if context_id is not None and type(context_id) is not str:
        raise ValueError("contextId must be a string or null")
    task_id = obj.get("taskId")
    if task_id is not None and type(task_id) is not str:
        raise ValueError("taskId must be a string or null")
    metadata = obj.get("metadata")
    if metadata is not None and type(metadata) is not dict:
        raise ValueError("metadata must be an object")
    return build(
        Message,
        {
            "message_id": message_id,
            "role": role,
            "parts": parts,
            "context_id": context_id,
            "task_id": task_id,
            "metadata": metadata,
        },
    )


def _text(text: str) -> Part:
    return build(Part, {"kind": "text", "text": text, "file": None, "data": None, "metadata": None})


def _part_v1(raw: object, i: int) -> Part:
    if type(raw) is not dict:
        raise ValueError(f"part {i} must be an object")
    if len(raw) == 1:  # the usual part, {"text": …}
        text = raw.get("text")
        if type(text) is str:
            return _text(text)
    present = [k for k in _V1_CONTENT if raw.get(k) is not None]
    if len(present) != 1:
        if present:
            raise ValueError(f"part {i} carries {' and '.join(present)}; a part carries exactly one of them")
        hint = " (file is the A2A 0.3 shape; a 1.0 part sends url or raw)" if "file" in raw else ""
        raise ValueError(f"part {i} has no text, raw, url or data{hint}")
    key = present[0]
    value = raw[key]
    metadata = _metadata(raw, i)
    if key == "data":
        return build(Part, {"kind": "data", "text": None, "file": None, "data": value, "metadata": metadata})
    if type(value) is not str:
        raise ValueError(f"part {i} {key} must be a string")
    if key == "text":
        return build(Part, {"kind": "text", "text": value, "file": None, "data": None, "metadata": metadata})
    media_type, filename = _optional_str(raw, "mediaType", i), _optional_str(raw, "filename", i)
    file = build(
        FileContent,
        {
            "uri": value if key == "url" else None,
            "bytes": value if key == "raw" else None,
            "mime_type": media_type,
            "name": filename,
        },
    )
    return build(Part, {"kind": "file", "text": None, "file": file, "data": None, "metadata": metadata})


def _part_v03(raw: object, i: int) -> Part:
    if type(raw) is not dict:
        raise ValueError(f"part {i} must be an object")
    kind = raw.get("kind")
    if kind == "text":
        text = raw.get("text")
        if type(text) is not str:
            raise ValueError(f"part {i} of kind text needs a text string")
        return (
            _text(text)
            if len(raw) == 2
            else build(Part, {**_EMPTY, "kind": "text", "text": text, "metadata": _metadata(raw, i)})
        )
    if kind == "file":
        return build(
            Part, {**_EMPTY, "kind": "file", "file": _file_v03(raw.get("file"), i), "metadata": _metadata(raw, i)}
        )
    if kind == "data":
        if raw.get("data") is None:
            raise ValueError(f"part {i} of kind data needs data")
        return build(Part, {**_EMPTY, "kind": "data", "data": raw["data"], "metadata": _metadata(raw, i)})
    if kind is None:
        raise ValueError(f"part {i} has no kind; an A2A 0.3 part names its kind (text, file or data)")
    raise ValueError(f"part {i} has unknown kind {kind!r}; an A2A 0.3 part is text, file or data")


_EMPTY: dict[str, Any] = {"text": None, "file": None, "data": None, "metadata": None}


def _file_v03(file: object, i: int) -> FileContent:
    if type(file) is not dict:
        raise ValueError(f"part {i} of kind file needs a file object")
    uri, data = _optional_str(file, "uri", i, "file."), _optional_str(file, "bytes", i, "file.")
    if (uri is None) == (data is None):
        raise ValueError(f"part {i} file carries exactly one of uri or bytes")
    return build(
        FileContent,
        {
            "uri": uri,
            "bytes": data,
            "mime_type": _optional_str(file, "mimeType", i, "file."),
            "name": _optional_str(file, "name", i, "file."),
        },
    )


def _optional_str(obj: dict[str, Any], key: str, i: int, prefix: str = "") -> str | None:
    value = obj.get(key)
    if value is not None and type(value) is not str:
        raise ValueError(f"part {i} {prefix}{key} must be a string")
    return value


def _metadata(raw: dict[str, Any], i: int) -> dict[str, Any] | None:
    metadata = raw.get("metadata")
    if metadata is not None and type(metadata) is not dict:
        raise ValueError(f"part {i} metadata must be an object")
    return metadata
