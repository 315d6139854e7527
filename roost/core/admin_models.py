"""The admin API's answers as types: what ``roost/admin/`` writes and ``roostctl`` and the dashboard read.

Why ``TypedDict`` and not pydantic models like :mod:`roost.core.api_models`: ``roostctl`` must
start in a few tens of milliseconds and imports neither pydantic nor aiohttp (``roost.ctl.main``,
bench/bench_roostctl.py), while ``typing`` is already loaded by the interpreter's own start-up.
A ``TypedDict`` costs nothing at run time: the answer stays the plain dict ``json.loads`` gives,
and mypy checks every key a producer writes and every key a reader takes. The admin socket
speaks only to this package's own clients, so nothing here is validated at run time; the TCP
API's models stay in :mod:`roost.core.api_models`, where an OpenAPI schema is generated.

A key marked ``NotRequired`` is absent from some answers (the producer omits it), never ``null``.
Answers keep their wire shape byte for byte: these types describe it, they do not change it.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

__all__ = [
    "ClusterReport",
    "ConfigView",
    "DrainAnswer",
    "DrainStatus",
    "DrainedJobView",
    "EventList",
    "ForgetAnswer",
    "HistoryAnswer",
    "JobList",
    "JobView",
    "LogLine",
    "LogsAnswer",
    "NodeView",
    "ObserveEvent",
    "RecordFiles",
    "ReloadAnswer",
    "ResourceLimitsView",
    "RotateAnswer",
    "SessionDetail",
    "SessionList",
    "SessionView",
    "StatusAnswer",
    "StatusSessions",
    "TreeAnswer",
    "TreeNode",
]


# -- jobs ------------------------------------------------------------------------------------------


class NodeView(TypedDict):
    """Where a child runs (absent: this host)."""

    node_id: str
    address: str


class JobView(TypedDict):
    """One job: ``GET /jobs/{id}``, ``POST /jobs``, ``POST /jobs/{id}/cancel`` (and TCP ``/jobs``)."""

    job_id: str
    delegation_id: str
    session_id: str | None
    capsule_url: str | None
    name: str
    version: str
    sha256: str
    workdir: str
    state: str
    parent_session_id: str | None
    created_ms: int
    ready_ms: int | None
    ended_ms: int | None
    exit_status: str | None
    outcome: str | None
    reason: str | None
    completion: dict[str, Any] | None
    node: NodeView | None
    trace_id: str | None
    """The W3C trace id of the job's delegation tree (its trace in an OpenTelemetry backend)."""
    uid: int | None
    """The job's owner: the uid it runs as, unless ``run_as`` made an operator's job run as another user."""
    formation_id: str | None
    """The formation its child joins (``MURMUR_FORMATION_ID``): its parent's, or the operator's."""
    out_files: NotRequired[list[str]]
    """A child on another node: its ``out/`` files, listed there (``GET /jobs/{id}`` only)."""


class JobList(TypedDict):
    """``GET /jobs[?state=S]``."""

    jobs: list[JobView]


# -- sessions and the tree -------------------------------------------------------------------------


class SessionView(TypedDict):
    """One session row: ``GET /sessions``, ``POST /sessions/{id}/end`` (no credential material)."""

    session_id: str
    name: str
    version: str
    sha256: str
    status: str
    parent_id: str | None
    depth_remaining: int
    trust: str
    uid: int | None
    workdir: str | None
    pid: int | None
    capsule_url: str | None
    job_id: str | None
    created_ms: int
    ended_ms: int | None
    end_reason: str | None
    live_children: int


class SessionDetail(SessionView):
    """``GET /sessions/{id}``: the row and its children's session ids."""

    children: list[str]


class SessionList(TypedDict):
    """``GET /sessions?state=...``."""

    sessions: list[SessionView]


class TreeNode(TypedDict):
    """One session in the delegation tree, its children nested under it."""

    session_id: str
    name: str
    version: str
    status: str
    trust: str
    job_id: str | None
    created_ms: int
    ended_ms: int | None
    end_reason: str | None
    """Why the session ended when something other than its own deregistration ended it."""
    depth: int
    children: list[TreeNode]
    job_state: NotRequired[str]
    """The launcher's state of the session's job, when it has one."""
    outcome: NotRequired[str | None]
    """How its job ended (present once the job is final)."""
    reason: NotRequired[str | None]


class TreeAnswer(TypedDict):
    """``GET /tree?state=...``."""

    roots: list[TreeNode]


# -- the daemon as a whole -------------------------------------------------------------------------


class StatusSessions(TypedDict):
    running: int
    running_by_uid: dict[str, int]
    total: int
    reserved_slots: int


class ResourceLimitsView(TypedDict):
    """The limits policy in force (``resource_limits`` of ``GET /status``)."""

    mode: str
    """``enforce`` (a limit nothing here enforces refuses the launch) or ``advisory``."""
    mechanisms: dict[str, str | None] | None
    """Each ``capabilities.resources`` field and what enforces it here (None: nothing); None as a
    whole when the backend cannot say."""


class StatusAnswer(TypedDict):
    """``GET /status``."""

    version: str
    pid: int
    uptime_secs: float
    url: str | None
    network_url: str | None
    advertise_url: str | None
    admin_socket: str
    state_dir: str
    ephemeral_keys: bool
    key_id: str
    run_id: str
    draining: bool
    sessions: StatusSessions
    max_live_capsules: int
    jobs: dict[str, int]
    resource_limits: ResourceLimitsView


class DrainedJobView(TypedDict):
    """A job a drain still waits for."""

    job_id: str
    name: str
    version: str
    state: str
    created_ms: int
    parent_session_id: str | None


class DrainStatus(TypedDict):
    """``GET /drain``."""

    draining: bool
    running_sessions: int
    active_jobs: int
    deadline_in_secs: float | None
    jobs: list[DrainedJobView]


class DrainAnswer(DrainStatus):
    """``POST /drain``: the status, and whether a drain was already under way."""

    already_draining: bool


class RotateAnswer(TypedDict):
    """``POST /keys/rotate``."""

    key_id: str
    previous_key_id: str
    sessions_affected: int
    approvals_revoked: int
    grace_secs: float
    """How long the replaced key keeps verifying (never minting); 0: revoked at once."""
    persisted: bool


class ReloadAnswer(TypedDict):
    """``POST /reload`` (and SIGHUP)."""

    reloaded: bool
    changed: list[str]
    needs_restart: list[str]
    error: NotRequired[str]


class ForgetAnswer(TypedDict):
    """``POST /registry/forget``."""

    forgotten: bool
    registry_path: str


class HistoryAnswer(TypedDict):
    """``GET /history``: the host gauges' last hour, one row per sample, in ``fields`` order
    (``t_ms``, ``live``, ``starting``, ``lag_ms`` — the worst since the sample before — and the
    running totals ``spawns`` and ``refusals``)."""

    interval_secs: float
    fields: list[str]
    samples: list[list[float]]


class ConfigView(TypedDict, total=False):
    """``GET /config``: every setting (``Config.public()``); these are the ones clients read."""

    registry_path: str
    registry_name: str
    spawn_allow: list[str]
    capsule_command: list[str]
    runtime_command: list[str]
    containment_max: str | None
    launcher: str
    dashboard_trace_url: str | None
    run_as: str | None


# -- streams and records ---------------------------------------------------------------------------


class ObserveEvent(TypedDict):
    """One observation event (:mod:`roost.observe.events`); also the ``events.lagged`` marker,
    which carries only ``type`` and ``dropped``."""

    type: str
    schemaVersion: NotRequired[int]
    eventId: NotRequired[str]
    sequence: NotRequired[int]
    timestamp: NotRequired[int]
    runId: NotRequired[str]
    executionId: NotRequired[str]
    spanId: NotRequired[str]
    parentSpanId: NotRequired[str | None]
    traceId: NotRequired[str]
    """The W3C trace id, when the span belongs to a trace (a caller's or a delegation tree's)."""
    subsystem: NotRequired[str]
    operation: NotRequired[str]
    attributes: NotRequired[dict[str, str | int | float | bool | None]]
    durationMs: NotRequired[float]
    itemCount: NotRequired[int]
    resultCount: NotRequired[int]
    error: NotRequired[dict[str, str | int | bool]]
    dropped: NotRequired[int]


class EventList(TypedDict):
    """``GET /events?replay=N``."""

    events: list[ObserveEvent]


class LogLine(TypedDict):
    """One line of a job's or session's output (``GET /logs/{id}``, and each NDJSON line of ``-f``)."""

    file: str
    stream: str
    line: str


class LogsAnswer(TypedDict):
    """``GET /logs/{id}?tail=N``."""

    files: list[str]
    lines: list[LogLine]


class RecordFiles(TypedDict):
    """``GET /records/{id}?dir=SUB``."""

    files: list[str]


class ClusterReport(TypedDict, total=False):
    """``GET /cluster``: ``{"launcher": "local"}``, or the Ray backend's cluster report (its nodes,
    each with its keeper's own checks, stay loosely typed: they come from another process)."""

    launcher: str
    address: str
    namespace: str
    connected: bool
    error: str | None
    version: str
    nodes: list[dict[str, Any]]
    available: dict[str, float]
