"""A2A objects (Message, Part, Task, AgentCard …) and their two wire dialects, 0.3 and 1.0.

Why one model and two serialisers: murmur peers speak a lenient 0.3 (no ``kind``), the official
SDK speaks strict 0.3 or 1.0 (no ``kind``, ``TASK_STATE_*``/``ROLE_*`` enums, flat parts), and a
door must answer in the dialect it was asked in. So the models are dialect-neutral, the parsers
accept every shape, and ``dump_*`` emit exactly one dialect. Serialisers build dicts by hand
(no ``model_dump``) because the door calls them on every request.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator, model_validator
from pydantic.alias_generators import to_camel

Dialect = Literal["0.3", "1.0"]
DIALECTS: tuple[Dialect, ...] = ("1.0", "0.3")


class TaskState(StrEnum):
    SUBMITTED = "submitted"
    WORKING = "working"
    INPUT_REQUIRED = "input-required"
    COMPLETED = "completed"
    CANCELED = "canceled"
    FAILED = "failed"
    REJECTED = "rejected"
    AUTH_REQUIRED = "auth-required"
    UNKNOWN = "unknown"

    @property
    def v1(self) -> str:
        """The 1.0 enum name (``TASK_STATE_INPUT_REQUIRED``); ``unknown`` is ``TASK_STATE_UNSPECIFIED``."""
        return _STATE_TO_V1[self]

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES

    @classmethod
    def parse(cls, value: str) -> TaskState:
        """Accept either dialect's spelling; anything unrecognised is ``unknown``."""
        state = _STATE_FROM_WIRE.get(value)
        return state if state is not None else cls.UNKNOWN


_STATE_TO_V1 = {
    s: ("TASK_STATE_UNSPECIFIED" if s == "unknown" else "TASK_STATE_" + s.value.upper().replace("-", "_"))
    for s in TaskState
}
_STATE_FROM_WIRE: dict[str, TaskState] = {s.value: s for s in TaskState} | {v: s for s, v in _STATE_TO_V1.items()}
TERMINAL_STATES = frozenset({TaskState.COMPLETED, TaskState.CANCELED, TaskState.FAILED, TaskState.REJECTED})

_ROLE_FROM_WIRE = {"user": "user", "agent": "agent", "ROLE_USER": "user", "ROLE_AGENT": "agent"}
_ROLE_TO_V1 = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}


def normalize_role(value: str) -> str:
    """``ROLE_USER``→``user``; murmur does not validate roles, so unknown spellings are kept."""
    return _ROLE_FROM_WIRE.get(value, value)


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True)


_M = TypeVar("_M", bound=BaseModel)


def build(cls: type[_M], values: dict[str, Any]) -> _M:
    """``cls.model_construct(**values)`` without its per-field bookkeeping, for the door's hot path.

    ``values`` must name every field of ``cls`` (no defaults are filled in) and hold values
    that are already valid: nothing is checked.
    """
    obj = _new(cls)
    _setattr(obj, "__dict__", values)
    fields = _ALL_FIELDS.get(cls)
    if fields is None:
        fields = _ALL_FIELDS[cls] = set(cls.model_fields)
    # One set per class, shared: it names every field already, so pydantic's own in-place change
    # (``.add(name)`` when a field is assigned) changes nothing, and ``model_copy`` copies it
    # before it adds to it. A kept door task holds two models: a set each was a fifth of it.
    _set_fields_set(obj, fields)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


_new = object.__new__
_setattr = object.__setattr__
_ALL_FIELDS: dict[type[BaseModel], set[str]] = {}
# BaseModel's own slots, set through their descriptors: a generic setattr looks each one up first.
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


class FileContent(_Model):
    """A file reference (``uri``) or inline base64 content (``bytes``; the door refuses those)."""

    uri: StrictStr | None = None
    bytes: StrictStr | None = None
    mime_type: StrictStr | None = None
    name: StrictStr | None = None


PartKind = Literal["text", "file", "data"]


def normalize_part(obj: object, index: int = 0) -> dict[str, Any]:
    """Map either dialect's part onto ``{kind, text|file|data, metadata?}``; ValueError if unusable.

    0.3: ``{kind?, text}`` / ``{kind?, file:{uri|bytes, mimeType?, name?}}`` / ``{kind?, data}``.
    1.0: ``{text}`` / ``{url|raw, mediaType?, filename?}`` / ``{data}``. A missing ``kind`` is
    inferred from the field present.
    """
    if not isinstance(obj, dict):
        raise ValueError(f"part {index} must be an object")
    out: dict[str, Any] = {}
    if "url" in obj or "raw" in obj:
        key = "uri" if "url" in obj else "bytes"
        file: dict[str, Any] = {key: obj.get("url") if key == "uri" else obj.get("raw")}
        if obj.get("mediaType") is not None:
            file["mimeType"] = obj["mediaType"]
        if obj.get("filename") is not None:
            file["name"] = obj["filename"]
        out["kind"], out["file"] = "file", file
    else:
        kind = obj.get("kind")
        if kind is None:
            kind = next((k for k in ("text", "file", "data") if k in obj), None)
            if kind is None:
                raise ValueError(f"part {index} has no text, file or data")
        elif kind not in ("text", "file", "data"):
            raise ValueError(f"part {index} has unknown kind {kind!r}")
        if kind not in obj:
            raise ValueError(f"part {index} of kind {kind} has no {kind} field")
        out["kind"], out[kind] = kind, obj[kind]
        if kind == "text" and not isinstance(out["text"], str):
            raise ValueError(f"part {index} text must be a string")
        if kind == "file" and not isinstance(out["file"], dict):
            raise ValueError(f"part {index} file must be an object")
    metadata = obj.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise ValueError(f"part {index} metadata must be an object")
        out["metadata"] = metadata
    return out


class Part(_Model):
    kind: PartKind
    text: StrictStr | None = None
    file: FileContent | None = None
    data: Any = None
    metadata: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, value: object) -> dict[str, Any]:
        return normalize_part(value)


class Message(_Model):
    message_id: StrictStr
    role: StrictStr
    parts: list[Part]
    context_id: StrictStr | None = None
    task_id: StrictStr | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("role")
    @classmethod
    def _role(cls, value: str) -> str:
        return normalize_role(value)

    @property
    def text(self) -> str:
        """All text parts joined with a newline (non-text parts are not task text)."""
        parts = self.parts
        if len(parts) == 1:  # the usual message
            return parts[0].text or ""
        return "\n".join(p.text for p in parts if p.text is not None)


def text_part(text: str) -> Part:
    return build(Part, {"kind": "text", "text": text, "file": None, "data": None, "metadata": None})


def agent_message(message_id: str, text: str, *, task_id: str | None = None, context_id: str | None = None) -> Message:
    return build(
        Message,
        {
            "message_id": message_id,
            "role": "agent",
            "parts": [text_part(text)],
            "context_id": context_id,
            "task_id": task_id,
            "metadata": None,
        },
    )


def response_artifact(text: str, artifact_id: str = "response") -> Artifact:
    """A task's output as the artifact murmur names ``response`` (a later turn's: ``response-<n>``)."""
    return build(
        Artifact,
        {
            "artifact_id": artifact_id,
            "name": "response",
            "description": None,
            "parts": [text_part(text)],
            "metadata": None,
        },
    )


class TaskStatus(_Model):
    state: TaskState
    message: Message | None = None
    timestamp: StrictStr | None = None

    @field_validator("state", mode="before")
    @classmethod
    def _state(cls, value: object) -> object:
        return TaskState.parse(value) if isinstance(value, str) else value


class Artifact(_Model):
    artifact_id: StrictStr = ""
    name: StrictStr | None = None
    description: StrictStr | None = None
    parts: list[Part]
    metadata: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _default_id(self) -> Artifact:
        if not self.artifact_id:  # murmur era B omits artifactId; era C sets it to the name
            self.artifact_id = self.name or "artifact"
        return self


class Task(_Model):
    id: StrictStr
    context_id: StrictStr | None = None
    status: TaskStatus
    artifacts: list[Artifact] | None = None
    history: list[Message] | None = None
    metadata: dict[str, Any] | None = None


# --- Agent card -------------------------------------------------------------------------------


class AgentInterface(_Model):
    url: str
    protocol_binding: str = "JSONRPC"
    protocol_version: str = "0.3"


class AgentExtension(_Model):
    uri: str
    description: str | None = None
    required: bool = False
    params: dict[str, Any] | None = None


class AgentCapabilities(_Model):
    streaming: bool = False
    push_notifications: bool = False
    extended_agent_card: bool = False
    extensions: list[AgentExtension] = Field(default_factory=list)


class AgentSkill(_Model):
    id: str
    name: str
    description: str = ""
    tags: list[str] = Field(default_factory=list)


class AgentCard(_Model):
    """The card fields murmur and the SDK read; unknown fields of a foreign card are ignored."""

    name: str
    description: str = ""
    version: str = ""
    url: str | None = None
    protocol_version: str | None = None
    preferred_transport: str | None = None
    supported_interfaces: list[AgentInterface] = Field(default_factory=list)
    capabilities: AgentCapabilities = Field(default_factory=AgentCapabilities)
    security_schemes: dict[str, Any] = Field(default_factory=dict)
    security_requirements: list[dict[str, Any]] = Field(default_factory=list)
    default_input_modes: list[str] = Field(default_factory=lambda: ["text/plain"])
    default_output_modes: list[str] = Field(default_factory=lambda: ["text/plain"])
    skills: list[AgentSkill] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# --- Serialisers --------------------------------------------------------------------------------


def dump_part(part: Part, dialect: Dialect) -> dict[str, Any]:
    out: dict[str, Any]
    if dialect == "1.0":
        if part.kind == "text":
            out = {"text": part.text}
        elif part.kind == "data":
            out = {"data": part.data}
        else:
            f = part.file or FileContent()
            out = {"url": f.uri} if f.uri is not None else {"raw": f.bytes}
            if f.mime_type is not None:
                out["mediaType"] = f.mime_type
            if f.name is not None:
                out["filename"] = f.name
    else:
        if part.kind == "text":
            out = {"kind": "text", "text": part.text}
        elif part.kind == "data":
            out = {"kind": "data", "data": part.data}
        else:
            f = part.file or FileContent()
            out = {"kind": "file", "file": f.model_dump(by_alias=True, exclude_none=True)}
    if part.metadata is not None:
        out["metadata"] = part.metadata
    return out


def dump_message(message: Message, dialect: Dialect) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "message"} if dialect == "0.3" else {}
    out["messageId"] = message.message_id
    out["role"] = _ROLE_TO_V1.get(message.role, "ROLE_UNSPECIFIED") if dialect == "1.0" else message.role
    out["parts"] = [dump_part(p, dialect) for p in message.parts]
    if message.context_id is not None:
        out["contextId"] = message.context_id
    if message.task_id is not None:
        out["taskId"] = message.task_id
    if message.metadata is not None:
        out["metadata"] = message.metadata
    return out


def dump_status(status: TaskStatus, dialect: Dialect) -> dict[str, Any]:
    out: dict[str, Any] = {"state": status.state.v1 if dialect == "1.0" else status.state.value}
    if status.message is not None:
        out["message"] = dump_message(status.message, dialect)
    if status.timestamp is not None:
        out["timestamp"] = status.timestamp
    return out


def dump_artifact(artifact: Artifact, dialect: Dialect) -> dict[str, Any]:
    out: dict[str, Any] = {"artifactId": artifact.artifact_id}
    if artifact.name is not None:
        out["name"] = artifact.name
    if artifact.description is not None:
        out["description"] = artifact.description
    out["parts"] = [dump_part(p, dialect) for p in artifact.parts]
    if artifact.metadata is not None:
        out["metadata"] = artifact.metadata
    return out


def dump_task(task: Task, dialect: Dialect) -> dict[str, Any]:
    """A Task in one dialect: 0.3 has ``kind`` and lowercase states, 1.0 has enums and no ``kind``."""
    out: dict[str, Any] = {"kind": "task"} if dialect == "0.3" else {}
    out["id"] = task.id
    if task.context_id is not None:
        out["contextId"] = task.context_id
    out["status"] = dump_status(task.status, dialect)
    if task.artifacts is not None:
        out["artifacts"] = [dump_artifact(a, dialect) for a in task.artifacts]
    if task.history is not None:
        out["history"] = [dump_message(m, dialect) for m in task.history]
    if task.metadata is not None:
        out["metadata"] = task.metadata
    return out


def dump_send_result(task: Task, dialect: Dialect) -> dict[str, Any]:
    """The ``message/send`` / ``SendMessage`` result: bare Task in 0.3, ``{"task": …}`` in 1.0."""
    body = dump_task(task, dialect)
    return {"task": body} if dialect == "1.0" else body


# --- Parsers ------------------------------------------------------------------------------------


def parse_part(obj: object, index: int = 0) -> Part:
    """One part of either dialect, checked as :class:`Part` validation would; ValueError on failure."""
    if type(obj) is dict and len(obj) <= 2:  # the usual part, ``{"text"}`` or ``{"kind": "text", "text"}``
        text = obj.get("text")
        if type(text) is str and (len(obj) == 1 or obj.get("kind") == "text"):
            return build(Part, {"kind": "text", "text": text, "file": None, "data": None, "metadata": None})
    p = normalize_part(obj, index)
    file = p.get("file")
    return build(
        Part,
        {
            "kind": p["kind"],
            "text": p.get("text"),
            "file": FileContent.model_validate(file) if file is not None else None,
            "data": p.get("data"),
            "metadata": p.get("metadata"),
        },
    )


def parse_message_lean(obj: object) -> Message:
    """A Message of either dialect read leniently without pydantic; ValueError on failure.

    Required: ``messageId`` (string), ``role`` (string, not validated), ``parts`` (a non-empty
    list of objects). ``contextId``/``taskId`` optional and nullable. Extra fields are ignored.
    The door does not use this: it refuses what its dialect does not allow (:mod:`a2a.protocol.inbound`).
    """
    if not isinstance(obj, dict):
        raise ValueError("message must be an object")
    message_id = obj.get("messageId")
    if not isinstance(message_id, str):
        raise ValueError("messageId must be a string")
    role = obj.get("role")
    if not isinstance(role, str):
        raise ValueError("role must be a string")
    raw_parts = obj.get("parts")
    if not isinstance(raw_parts, list):
        raise ValueError("parts must be a list of objects")
    if not raw_parts:
        raise ValueError("a message needs at least one part")
    parts: list[Part] = []
    for i, raw in enumerate(raw_parts):
        parts.append(parse_part(raw, i))
    context_id = obj.get("contextId")
    if context_id is not None and not isinstance(context_id, str):
        raise ValueError("contextId must be a string or null")
    task_id = obj.get("taskId")
    if task_id is not None and not isinstance(task_id, str):
        raise ValueError("taskId must be a string or null")
    metadata = obj.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ValueError("metadata must be an object")
    return build(
        Message,
        {
            "message_id": message_id,
            "role": _ROLE_FROM_WIRE.get(role, role),  # normalize_role, inline on the hot path
            "parts": parts,
            "context_id": context_id,
            "task_id": task_id,
            "metadata": metadata,
        },
    )


def parse_message(obj: object) -> Message:
    """Validate a Message of either dialect (pydantic ValidationError, a ValueError, on failure)."""
    return Message.model_validate(obj)


def parse_task(obj: object) -> Task:
    """Validate a Task of either dialect (``kind`` ignored, states in either spelling).

    The bare shape a send usually answers (ids, a state, a timestamp) is read by hand; anything
    richer goes through pydantic, which also words every error.
    """
    if isinstance(obj, dict) and not (obj.keys() - _BARE_TASK_KEYS):
        task_id, context_id, status = obj.get("id"), obj.get("contextId"), obj.get("status")
        if (
            isinstance(task_id, str)
            and (context_id is None or isinstance(context_id, str))
            and isinstance(status, dict)
            and not (status.keys() - _BARE_STATUS_KEYS)
            and isinstance(status.get("state"), str)
            and (status.get("timestamp") is None or isinstance(status.get("timestamp"), str))
        ):
            bare = {"state": TaskState.parse(status["state"]), "message": None, "timestamp": status.get("timestamp")}
            return build(
                Task,
                {
                    "id": task_id,
                    "context_id": context_id,
                    "status": build(TaskStatus, bare),
                    "artifacts": None,
                    "history": None,
                    "metadata": None,
                },
            )
    return Task.model_validate(obj)


_BARE_TASK_KEYS = frozenset({"kind", "id", "contextId", "status"})
_BARE_STATUS_KEYS = frozenset({"state", "timestamp"})


def parse_send_result(obj: object) -> Task:
    """Read a send result of either dialect: ``{"task"}``/``{"message"}`` (1.0) or a bare Task/Message.

    A Message answer (an agent that replies directly) becomes a completed Task carrying that
    message as its status message, so callers always get a Task.
    """
    if not isinstance(obj, dict):
        raise ValueError("result is not an object")
    if isinstance(obj.get("task"), dict):
        return parse_task(obj["task"])
    msg_obj = obj.get("message") if isinstance(obj.get("message"), dict) else None
    if msg_obj is None and (obj.get("kind") == "message" or ("messageId" in obj and "id" not in obj)):
        msg_obj = obj
    if msg_obj is not None:
        message = parse_message(msg_obj)
        return Task(
            id=message.task_id or "",
            context_id=message.context_id,
            status=TaskStatus(state=TaskState.COMPLETED, message=message),
        )
    return parse_task(obj)
