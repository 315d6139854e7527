"""A completion record, the spawner handle and the completion's fixed sentences: no I/O.

What a finished child leaves (``completion.json``), what ``MURMUR_SPAWNER`` tells it about its
parent, and the details the launcher writes when the child wrote none. Pure so that the
finalize decision (:mod:`roost.core.finalize`) and the process-backend interface can use
them without importing the delivery path; :mod:`roost.services.completionfile` writes, reads and delivers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

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
    "crash_detail",
    "cut_detail",
    "deadline_detail",
    "message_text",
]

COMPLETION_FILE = "completion.json"
TERMINATED_DETAIL = "the parent ended this delegation"
# A cancel from the admin socket (``roostctl cancel``, the dashboard): nobody's parent did it.
OPERATOR_CANCEL_DETAIL = "an operator cancelled this job"
DETAIL_MAX_BYTES = 2000
STDERR_LINES = 20

Status = Literal["ok", "error", "crashed", "terminated"]
Reporter = Literal["child", "launcher"]


def cut_detail(text: str, limit: int = DETAIL_MAX_BYTES) -> str:
    """At most ``limit`` UTF-8 bytes; a cut is marked `` […]``."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    marker = " […]"
    room = limit - len(marker.encode("utf-8"))
    return raw[:room].decode("utf-8", "ignore") + marker


def crash_detail(exit_status: str, stderr_lines: list[str]) -> str:
    text = f"the child process ended without recording a completion ({exit_status})"
    tail = [ln for ln in stderr_lines[-STDERR_LINES:] if ln.strip()]
    if tail:
        text += "; its last stderr lines were:\n" + "\n".join(tail)
    return cut_detail(text)


def deadline_detail(secs: int | float) -> str:
    return f"the capsule was still running after {int(secs)}s and was ended at the delegation deadline"


class SpawnerHandleError(ValueError):
    """``MURMUR_SPAWNER`` cannot be used; the message is the reason sentence."""


@dataclass(frozen=True, slots=True)
class SpawnerHandle:
    """Where a delegated child reports: parent door, parent session, context, trust, delegation."""

    session_id: str
    context_id: str
    delegation_id: str
    url: str | None = None
    trust: Literal["trusted", "untrusted"] | None = None

    @property
    def addressed(self) -> bool:
        return self.url is not None

    def to_env(self) -> str:
        obj: dict[str, Any] = {}
        if self.url is not None:
            obj["url"] = self.url
        obj["session_id"] = self.session_id
        obj["context_id"] = self.context_id
        if self.trust is not None:
            obj["trust"] = self.trust
        obj["delegation_id"] = self.delegation_id
        return json.dumps(obj, separators=(",", ":"))

    @classmethod
    def parse(cls, raw: str) -> SpawnerHandle:
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            raise SpawnerHandleError(f"it is not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise SpawnerHandleError("it is not a JSON object")
        for key in ("session_id", "context_id", "delegation_id"):
            if not isinstance(obj.get(key), str) or not obj[key]:
                raise SpawnerHandleError(f"it carries no '{key}'")
        url, trust = obj.get("url"), obj.get("trust")
        if url is not None and not isinstance(url, str):
            raise SpawnerHandleError("its 'url' is not a string")
        if trust is not None and trust not in ("trusted", "untrusted"):
            raise SpawnerHandleError(f"'{trust}' is not a trust class")
        if (url is None) != (trust is None):
            which = "a 'url' with no 'trust'" if url is not None else "a 'trust' with no 'url'"
            raise SpawnerHandleError(f"it carries {which}; a completion address is both or neither")
        return cls(
            session_id=obj["session_id"],
            context_id=obj["context_id"],
            delegation_id=obj["delegation_id"],
            url=url,
            trust=trust,
        )


@dataclass(slots=True)
class CompletionRecord:
    delegation_id: str
    capsule_name: str
    capsule_version: str
    session_id: str
    status: Status
    workdir: str
    duration_ms: int
    reported_by: Reporter
    result_path: str | None = None
    detail: str | None = None
    delivered: bool = False
    delivery_error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "delegation_id": self.delegation_id,
            "capsule_name": self.capsule_name,
            "capsule_version": self.capsule_version,
            "session_id": self.session_id,
            "status": self.status,
        }
        if self.result_path is not None:
            out["result_path"] = self.result_path
        out["workdir"] = self.workdir
        out["duration_ms"] = self.duration_ms
        if self.detail is not None:
            out["detail"] = self.detail
        out["reported_by"] = self.reported_by
        out["delivered"] = self.delivered
        if self.delivery_error is not None:
            out["delivery_error"] = self.delivery_error
        return out

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> CompletionRecord:
        try:
            return cls(
                delegation_id=str(obj["delegation_id"]),
                capsule_name=str(obj["capsule_name"]),
                capsule_version=str(obj["capsule_version"]),
                session_id=str(obj["session_id"]),
                status=obj["status"],
                workdir=str(obj["workdir"]),
                duration_ms=int(obj["duration_ms"]),
                reported_by=obj.get("reported_by", "child"),
                result_path=obj.get("result_path"),
                detail=obj.get("detail"),
                delivered=bool(obj.get("delivered", False)),
                delivery_error=obj.get("delivery_error"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"completion.json is not a completion record: {exc}") from None


def message_text(rec: CompletionRecord) -> str:
    lines = [
        "Delegated capsule finished.",
        f"delegation_id: {rec.delegation_id}",
        f"capsule: {rec.capsule_name}@{rec.capsule_version}",
        f"session_id: {rec.session_id}",
        f"status: {rec.status}",
        f"duration_ms: {rec.duration_ms}",
        f"workdir: {rec.workdir}",
        (
            f"result: {rec.result_path} (in that workdir)"
            if rec.result_path
            else "result: none (the child wrote no result file)"
        ),
    ]
    if rec.detail:
        lines.append(f"detail: {rec.detail}")
    lines.append("The child's output is not reproduced here; read it from the workdir named above.")
    return "\n".join(lines)
