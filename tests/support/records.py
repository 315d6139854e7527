"""A running session's record, as the referee keeps it, for tests of what reads the session table."""

from __future__ import annotations

from roost.core.envelope import Envelope
from roost.core.manifest import parse_manifest
from roost.state.sessions import SessionRecord

MANIFEST = parse_manifest("name: worker\nversion: 0.1.0\n")


def running_session(sid: str, url: str | None, job_id: str | None = None) -> SessionRecord:
    """Session ``sid`` of a ``worker@0.1.0``, running, its door at ``url`` (or none)."""
    return SessionRecord(
        session_id=sid,
        name="worker",
        version="0.1.0",
        sha256="a" * 64,
        status="running",
        parent_id=None,
        depth_remaining=2,
        envelope=Envelope.from_manifest(MANIFEST),
        manifest=MANIFEST,
        trust="trusted",
        cred_nonce="n" * 16,
        handle_salt="s" * 32,
        created_ms=1000,
        capsule_url=url,
        job_id=job_id,
    )
