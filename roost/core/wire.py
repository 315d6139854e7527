"""Names on the wire that several modules share, each defined once: header names, job and session states.

Why a module of its own: the daemon's routes, the capsule host, its small ``roost-capsule``
client and ``roostctl`` all speak these names, and the clients must stay cheap to import (no
aiohttp, no pydantic), so the names live where importing them costs nothing.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = [
    "ACTIVE_JOB_STATES",
    "APPROVAL_HEADER",
    "AUDIENCE_HEADER",
    "BLOCKING_CAP_ENV",
    "CREDENTIAL_HEADER",
    "FINAL_JOB_STATES",
    "GENERATION_HEADER",
    "HANDLE_ID_HEADER",
    "HOST_ERROR_HEADER",
    "JOB_STATES",
    "MTIME_HEADER",
    "RECORD_START_HEADER",
    "SESSION_STATES",
    "TASK_TRUST_HEADER",
    "JobState",
    "SessionStatus",
]

CREDENTIAL_HEADER: Final = "x-murmur-spawn-credential"
"""Carries a session's ``msc1.`` credential on every call a session makes to the daemon."""

APPROVAL_HEADER: Final = "x-murmur-spawn-approval"
"""Carries a ``msa1.`` spawn approval on the ``POST /register`` of the child it was granted for."""

RECORD_START_HEADER: Final = "roost-record-start"
"""Where the bytes of an admin ``GET /records/{id}?name=…`` answer start in the file."""

AUDIENCE_HEADER: Final = "x-murmur-audience"
"""Names the reader of a peer handle (``name@host:port``) on ``GET /resources/peer/{handle}``."""

HOST_ERROR_HEADER: Final = "x-roost-capsule-error"
"""Marks an answer the capsule host produced itself (no daemon, daemon unreachable)."""

TASK_TRUST_HEADER: Final = "x-roost-task-trust"
"""Set by a capsule host on what it forwards for an entrypoint: the trust of the task that
process is running. It can only lower what the daemon stamps (any value but ``trusted`` is
``untrusted``); an upstream runtime sends none and keeps its session's trust."""

BLOCKING_CAP_ENV: Final = "MURMUR_A2A_BLOCKING_CAP_SECS"
"""Tells a capsule host how long its door may hold a blocking send (the daemon passes
``door_blocking_cap_secs``; docs/a2a.md, "Sending")."""

JobState = Literal["starting", "running", "complete", "failed", "crashed", "terminated"]
JOB_STATES: Final[tuple[str, ...]] = get_args(JobState)
"""Every job state, in lifecycle order."""
FINAL_JOB_STATES: Final[frozenset[str]] = frozenset({"complete", "failed", "crashed", "terminated"})
"""The states a job never leaves."""
ACTIVE_JOB_STATES: Final[tuple[str, ...]] = tuple(s for s in JOB_STATES if s not in FINAL_JOB_STATES)
"""The states of a job that still runs (or is starting), in lifecycle order."""

SessionStatus = Literal["running", "complete", "failed"]
SESSION_STATES: Final[tuple[str, ...]] = get_args(SessionStatus)
"""Every session state: ``running``, then how it ended."""

HANDLE_ID_HEADER: Final = "x-murmur-handle-id"
"""On a redeem's answer (from the shape check on): the 16-hex id of the handle presented."""

GENERATION_HEADER: Final = "x-murmur-generation"
"""On a redeem's answer: the task generation of the file served (always ``0`` here)."""

MTIME_HEADER: Final = "x-murmur-mtime-ms"
"""On a served redeem: the file's modification time, in milliseconds since the epoch."""
