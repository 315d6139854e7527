"""The referee's bodies: ``POST /spawn``, ``/register`` and ``/deregister``, in upstream's words.

The typed requests are :mod:`roost.core.api_models`' (the models ``GET /openapi.json``
publishes); they are built with ``model_construct`` after the checks below, because the
sentences are upstream's, byte for byte, and pydantic's own messages are not.
"""

from __future__ import annotations

from typing import Literal, cast
from urllib.parse import urlsplit

from roost.core.api_models import DeregisterRequest, RegisterRequest, SpawnRequest
from roost.core.errors import BadRequest
from roost.core.fields import Body, optional_abspath, optional_formation, require_ident
from roost.core.manifest import CONTAINMENT_ORDER

__all__ = ["parse_deregister", "parse_register", "parse_spawn"]


def parse_spawn(body: Body) -> SpawnRequest:
    """``POST /spawn``: the child's coordinates."""
    name = require_ident(body, "name")
    version = require_ident(body, "version")
    return SpawnRequest.model_construct(name=name, version=version)


def _pid(body: Body) -> int | None:
    pid = body.get("pid")
    if pid is None:
        return None
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        raise BadRequest("pid must be a process id (a whole number above 1)")
    return pid


def _capsule_url(body: Body) -> str | None:
    url = body.get("capsule_url")
    if url is None:
        return None
    if not isinstance(url, str):
        raise BadRequest("capsule_url must be a string")
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise BadRequest("capsule_url must be http://<host>:<port> (the session's A2A door)")
    return f"http://{parts.hostname}:{parts.port}"


def _containment(body: Body) -> Literal["advisory", "scoped", "sealed"] | None:
    containment = body.get("containment")
    if containment is not None and containment not in CONTAINMENT_ORDER:
        raise BadRequest("containment must be one of advisory, scoped, sealed")
    return cast('Literal["advisory", "scoped", "sealed"] | None', containment)


def parse_register(body: Body) -> RegisterRequest:
    """``POST /register``: identity and coordinates, then the optional fields in the order they are checked.

    The workdir comes back absolute and normalised, the capsule url as ``http://host:port``.
    """
    session_id = require_ident(body, "session_id")
    name = require_ident(body, "name")
    version = require_ident(body, "version")
    return RegisterRequest.model_construct(
        session_id=session_id,
        name=name,
        version=version,
        workdir=optional_abspath(body, "workdir"),
        pid=_pid(body),
        capsule_url=_capsule_url(body),
        containment=_containment(body),
        formation_id=optional_formation(body, "formation_id"),
    )


def parse_deregister(body: Body) -> DeregisterRequest:
    """``POST /deregister``: how the session ended."""
    outcome = body.get("outcome")
    if outcome not in ("complete", "failed"):
        shown = outcome if isinstance(outcome, str) else ("" if outcome is None else str(outcome))
        raise BadRequest(f"outcome '{shown}' is not 'complete' or 'failed'")
    return DeregisterRequest.model_construct(outcome=outcome)
