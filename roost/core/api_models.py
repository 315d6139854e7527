"""Pydantic models of every TCP endpoint's request and answer: the source of ``GET /openapi.json``.

Why a separate module of models rather than annotations on the handlers: the handlers stay
thin and fast (they parse with ``read_json`` and hand-built dicts, because pydantic on the
hot path of ``/spawn`` costs more than the referee itself), while the contract a peer or an
upstream runtime programs against lives in one reviewable place. ``tests/ops`` validates real
answers of a live daemon against the schema generated from here, so the two cannot drift
silently.

Answer models allow extra fields (``additionalProperties`` is left open): a client must ignore
fields it does not know, and a new field is not a breaking change. Request models describe
what the daemon reads; unknown request fields are ignored by the handlers, so they are open
too.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from roost.core.wire import JobState, SessionStatus

__all__ = [
    "ENDPOINTS",
    "A2ASendRequest",
    "A2ASendResponse",
    "A2ATaskRequest",
    "A2ATaskResponse",
    "CodedErrorBody",
    "DeregisterRequest",
    "Empty",
    "Endpoint",
    "ErrorBody",
    "HandleRequest",
    "HandleResponse",
    "JobRequest",
    "JobResponse",
    "JobState",
    "PeerFetchRequest",
    "PeerFetchResponse",
    "RegisterRequest",
    "RegisterResponse",
    "RenewResponse",
    "SpawnRequest",
    "SpawnResponse",
    "StatusResponse",
    "TaskSpec",
]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


# -- error bodies ------------------------------------------------------------------------------


class ErrorBody(BaseModel):
    """Every refusal of the referee, launcher and relay: one sentence a person can act on."""

    model_config = ConfigDict(extra="forbid")
    error: str = Field(description="One sentence saying what was refused and why; never a token.")


class CodedErrorBody(BaseModel):
    """The peer plane's refusals (upstream shape): a stable code plus its fixed sentence."""

    model_config = ConfigDict(extra="forbid")
    error: str = Field(description="Stable machine code, e.g. handle_not_valid, handle_expired, not_found.")
    message: str = Field(description="The fixed sentence for that code.")


class Empty(_Open):
    """An empty JSON object (``{}``)."""


# -- upstream referee ------------------------------------------------------------------------------


class SpawnRequest(_Open):
    name: str = Field(description="Capsule name of the child the session wants to spawn.")
    version: str = Field(description="Exact version in the registry.")


class SpawnResponse(_Open):
    approval: str = Field(description="Single-use msa1. spawn approval, valid 60 s.")
    name: str
    version: str
    sha256: str = Field(description="Digest of the artifact the approval pins.")
    expires_at_ms: int


class RegisterRequest(_Open):
    session_id: str
    name: str
    version: str
    workdir: str | None = Field(default=None, description="Absolute path of an existing directory.")
    pid: int | None = Field(default=None, description="The session's process id, for liveness checks.")
    capsule_url: str | None = Field(default=None, description="http://<host>:<port> of the session's A2A door.")
    containment: Literal["advisory", "scoped", "sealed"] | None = Field(
        default=None,
        description="The containment class the session's host achieved; decides the peer plane's symlink rule.",
    )
    formation_id: str | None = Field(
        default=None,
        pattern=r"^frm_[0-9a-f]{32}$",
        description="The formation the session belongs to (its MURMUR_FORMATION_ID); handed to its children.",
    )


class RegisterResponse(_Open):
    credential: str = Field(description="msc1. session credential; send it as x-murmur-spawn-credential.")
    door_key: str = Field(
        description="64 hex: the key the session's A2A door checks the daemon's seals with (x-murmur-task-seal)."
    )
    completion_delivery: Literal["launcher"] | None = Field(
        default=None,
        description="Present for a child the daemon's launcher started: the launcher delivers its "
        "completion.json to the parent's door, sealed, once the child exits; the child does not post it.",
    )


class DeregisterRequest(_Open):
    outcome: Literal["complete", "failed"]


class RenewResponse(_Open):
    lease_expires_at_ms: int | None = Field(
        description="When the calling session's lease lapses (wall-clock ms); null if it holds none "
        "(roost watches its process instead)."
    )
    lease_secs: float = Field(description="How long a lease lasts from each authenticated call.")


class StatusResponse(_Open):
    status: SessionStatus
    depth_remaining: int
    live_children: int
    live_capsules: int


# -- launch ---------------------------------------------------------------------------------------


class TaskSpec(_Open):
    objective: str
    instructions: str | None = None
    context: str | None = None
    output_format: str | None = None


class JobRequest(_Open):
    name: str
    version: str
    task: str | TaskSpec
    deadline_secs: float | None = Field(default=None, gt=0)
    workdir: str | None = Field(default=None, description="Top-level launches only: absolute working directory.")
    untrusted: bool | None = Field(default=None, description="Lower the child's trust class (never raises it).")
    formation_id: str | None = Field(
        default=None,
        pattern=r"^frm_[0-9a-f]{32}$",
        description="Top-level launches only: the formation the job joins (MURMUR_FORMATION_ID of its child).",
    )


class JobNode(_Open):
    node_id: str = Field(description="The Ray node id the child runs on.")
    address: str = Field(description="The node's address (its raylet's), as an operator reaches it.")


class JobResponse(_Open):
    job_id: str = Field(pattern=r"^job_[0-9a-f]{32}$")
    delegation_id: str | None = None
    session_id: str | None = None
    capsule_url: str | None = None
    name: str
    version: str
    sha256: str | None = None
    workdir: str | None = None
    state: JobState
    node: JobNode | None = Field(
        default=None, description='Where the child runs (launcher = "ray"); null: on the daemon\'s own host.'
    )
    trace_id: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{32}$",
        description="The W3C trace id of the job's delegation tree: its trace in an OpenTelemetry backend.",
    )
    formation_id: str | None = Field(
        default=None,
        pattern=r"^frm_[0-9a-f]{32}$",
        description="The formation the job belongs to (MURMUR_FORMATION_ID): given at launch, or its parent's.",
    )


# -- peer plane ------------------------------------------------------------------------------------


class HandleRequest(_Open):
    path: str = Field(description="A file under the session's exports.peer_files.root.")
    peer: str = Field(description="The audience peer's A2A URL; its agent card names <name>@<host:port>.")
    ttl_secs: int | None = Field(default=None, gt=0)


class HandleResponse(_Open):
    handle: str = Field(description="mh1. handle; the audience redeems it at GET /resources/peer/{handle}.")
    handle_id: str
    expires_at_ms: int


class PeerFetchRequest(_Open):
    peer: str
    handle: str
    etag: str | None = None


class PeerFetchResponse(_Open):
    """Where the fetched file was stored (under the session's ``peer-in/``) and what it holds."""


# -- relay -----------------------------------------------------------------------------------------


class A2ASendRequest(_Open):
    peer_url: str
    text: str | None = None
    parts: list[dict[str, Any]] | None = None
    context_id: str | None = None
    task_id: str | None = Field(
        default=None,
        description="Continue this task at the peer (one waiting for input) instead of starting a new one.",
    )
    message_id: str | None = Field(default=None, description="Default: a new msg_ id.")
    traceparent: str | None = None
    tracestate: str | None = None


class A2ASendResponse(_Open):
    task_id: str | None = None
    context_id: str | None = None
    message_id: str | None = None
    traceparent: str | None = None
    trust: Literal["trusted", "untrusted"] | None = None
    state: str | None = None


class A2ATaskRequest(_Open):
    peer_url: str
    task_id: str


class A2ATaskResponse(_Open):
    """The peer's task as relayed (``tasks/get``, ``tasks/cancel``)."""


# -- the table the OpenAPI document is generated from ---------------------------------------------

Body = type[BaseModel] | tuple[type[BaseModel], ...] | Literal["text", "json", "binary"]


class Endpoint:
    """One operation: method, path, models, and the statuses it may answer with which error body."""

    __slots__ = ("auth", "errors", "method", "ok", "ok_status", "path", "request", "summary", "tag")

    def __init__(
        self,
        method: str,
        path: str,
        summary: str,
        *,
        tag: str,
        ok: Body,
        ok_status: int = 200,
        request: type[BaseModel] | None = None,
        errors: dict[int, Body] | None = None,
        auth: str | None = None,
    ) -> None:
        self.method = method
        self.path = path
        self.summary = summary
        self.tag = tag
        self.ok = ok
        self.ok_status = ok_status
        self.request = request
        self.errors = errors or {}
        self.auth = auth


_E = ErrorBody
_C = CodedErrorBody
# Peer endpoints authenticate and parse JSON before the plane runs: those refusals are plain.
_EC = (ErrorBody, CodedErrorBody)
CRED = "credential"
APPROVAL = "approval"

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("get", "/health", "Liveness (upstream-compatible)", tag="referee", ok=Empty),
    Endpoint(
        "post",
        "/spawn",
        "Referee a spawn: credential → single-use approval",
        tag="referee",
        request=SpawnRequest,
        ok=SpawnResponse,
        errors={400: _E, 403: _E, 404: _E, 413: _E, 500: _E},
        auth=CRED,
    ),
    Endpoint(
        "post",
        "/register",
        "Register a session (top-level, or with a spawn approval) → credential",
        tag="referee",
        request=RegisterRequest,
        ok=RegisterResponse,
        errors={400: _E, 403: _E, 413: _E, 500: _E},
        auth=APPROVAL,
    ),
    Endpoint(
        "post",
        "/deregister",
        "End the calling session",
        tag="referee",
        request=DeregisterRequest,
        ok=Empty,
        errors={400: _E, 403: _E},
        auth=CRED,
    ),
    Endpoint(
        "post",
        "/renew",
        "Renew the calling session's lease (any authenticated call does too)",
        tag="referee",
        ok=RenewResponse,
        errors={403: _E},
        auth=CRED,
    ),
    Endpoint(
        "get",
        "/status/{session_id}",
        "A session's status and bounds",
        tag="referee",
        ok=StatusResponse,
        errors={400: _E, 404: _E},
    ),
    Endpoint(
        "post",
        "/jobs",
        "Referee and launch a capsule (delegation with a credential, top-level without)",
        tag="launch",
        request=JobRequest,
        ok=JobResponse,
        ok_status=201,
        errors={400: _E, 403: _E, 404: _E, 413: _E, 500: _E, 502: _E, 503: _E, 504: _E},
        auth=CRED,
    ),
    Endpoint(
        "get",
        "/jobs/{job_id}",
        "A job the calling session launched",
        tag="launch",
        ok=JobResponse,
        errors={400: _E, 403: _E, 404: _E},
        auth=CRED,
    ),
    Endpoint(
        "post",
        "/jobs/{job_id}/cancel",
        "Cancel a job the calling session launched",
        tag="launch",
        ok=JobResponse,
        errors={400: _E, 403: _E, 404: _E, 409: _E},
        auth=CRED,
    ),
    Endpoint(
        "post",
        "/handles",
        "Mint an audience-bound peer-file handle",
        tag="peer",
        request=HandleRequest,
        ok=HandleResponse,
        errors={400: _EC, 403: _EC, 404: _EC, 413: _EC, 500: _EC, 502: _EC},
        auth=CRED,
    ),
    Endpoint(
        "get",
        "/resources/peer/{handle}",
        "Redeem a peer-file handle (x-murmur-audience required)",
        tag="peer",
        ok="binary",
        errors={400: _C, 403: _C, 404: _C, 405: _C, 410: _C, 413: _C, 500: _C},
    ),
    Endpoint(
        "post",
        "/peer-fetch",
        "Fetch a peer's handle into the calling session's peer-in/",
        tag="peer",
        request=PeerFetchRequest,
        ok=PeerFetchResponse,
        errors={400: _EC, 403: _EC, 404: _EC, 409: _EC, 413: _EC, 500: _EC, 502: _EC, 504: _EC},
        auth=CRED,
    ),
    Endpoint(
        "post",
        "/a2a/send",
        "Relay an A2A message/send on the calling session's behalf",
        tag="relay",
        request=A2ASendRequest,
        ok=A2ASendResponse,
        errors={400: _E, 403: _E, 413: _E, 502: _E, 504: _E},
        auth=CRED,
    ),
    Endpoint(
        "post",
        "/a2a/tasks/get",
        "Relay an A2A tasks/get",
        tag="relay",
        request=A2ATaskRequest,
        ok=A2ATaskResponse,
        errors={400: _E, 403: _E, 502: _E, 504: _E},
        auth=CRED,
    ),
    Endpoint(
        "post",
        "/a2a/tasks/cancel",
        "Relay an A2A tasks/cancel",
        tag="relay",
        request=A2ATaskRequest,
        ok=A2ATaskResponse,
        errors={400: _E, 403: _E, 502: _E, 504: _E},
        auth=CRED,
    ),
    Endpoint("get", "/metrics", "Prometheus metrics (text exposition format)", tag="ops", ok="text"),
    Endpoint("get", "/openapi.json", "This document", tag="ops", ok="json"),
    Endpoint("get", "/livez", "Liveness: the event loop answers (?verbose for per-check lines)", tag="ops", ok="text"),
    Endpoint(
        "get",
        "/readyz",
        "Readiness: config, state dir, launcher; 503 while draining or stopping",
        tag="ops",
        ok="text",
        errors={503: "text"},
    ),
    Endpoint(
        "get",
        "/artifacts/{sha256}",
        "A registry artifact's zip by its sha256, for a node keeper (authorization: Bearer mnk1 token)",
        tag="network",
        ok="binary",
        errors={400: _E, 403: _E, 404: _E},
        auth="keeper",
    ),
)
