"""What a launch starts: the job's record and its child's start spec, built from the request.

Pure but for the clock and fresh ids: the command line (:func:`roost.backends.process.spawn.child_argv`),
an environment that starts empty (only what both the child's and its parent's ``env.allow``
name, then the fixed names), and the approval as the child's stdin, never its argv or
environment (``docs/security.md``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from a2a.protocol.ids import prefixed
from roost.backends.base import StartSpec
from roost.backends.process.spawn import capsule_host_env, child_argv, child_env
from roost.core import ids
from roost.core.completion import SpawnerHandle
from roost.core.formation import FORMATION_ID_ENV
from roost.core.jobs import Job
from roost.core.requests import LaunchRequest
from roost.services.launcher.finalizer import child_dir
from roost.services.referee.service import wall_ms
from roost.state.config import Config
from roost.state.sessions import SessionRecord

if TYPE_CHECKING:
    from roost.state.registry import Artifact

__all__ = ["new_job", "start_spec"]


def new_job(
    job_id: str,
    req: LaunchRequest,
    artifact: Artifact,
    parent: SessionRecord | None,
    trust: str,
    workdir: str,
    uid: int | None,
    formation_id: str | None = None,
) -> Job:
    """The record of a job about to start: its ids, where its directory goes, its spawner handle,
    the formation it joins."""
    dlg = ids.delegation_id()
    handle: SpawnerHandle | None = None
    if parent is not None:
        # Without a door (no capsule_url) the handle is unaddressed: the child still writes
        # its own completion.json when it ends its session; there is just nobody to post it to.
        handle = SpawnerHandle(
            session_id=parent.session_id,
            context_id=prefixed("ctx"),
            delegation_id=dlg,
            url=parent.capsule_url or None,
            # A completion address is a url and a trust together, or neither.
            trust=("untrusted" if trust == "untrusted" else "trusted") if parent.capsule_url else None,
        )
    return Job(
        job_id=job_id,
        delegation_id=dlg,
        name=artifact.name,
        version=artifact.version,
        sha256=artifact.sha256,
        workdir=workdir,
        trust=trust,
        deadline_secs=req.deadline_secs or float(artifact.manifest.lifecycle.delegation_deadline_secs),
        created_ms=wall_ms(),
        parent_id=parent.session_id if parent is not None else None,
        parent_workdir=parent.workdir if parent is not None else None,
        handle=handle.to_env() if handle is not None else None,
        uid=parent.uid if parent is not None else uid,
        formation_id=formation_id,
    )


def start_spec(
    cfg: Config,
    job: Job,
    artifact: Artifact,
    parent: SessionRecord | None,
    approval: str | None,
    *,
    url: str,
    instance: str,
) -> StartSpec:
    """The child's command line, environment and stdin: the approval line, for a delegated child
    or a top-level one on another node (roost/services/launcher/tickets.py)."""
    allow = list(artifact.manifest.capabilities.env.allow)
    if parent is not None:
        allowed = set(parent.manifest.capabilities.env.allow)
        allow = [n for n in allow if n in allowed]
    env = child_env(
        os.environ,
        allow=allow,
        roost_url=url,
        job_id=job.job_id,
        registry_path=str(cfg.registry_path),
        spawner=job.handle,
    )
    env["MURMUR_ROOST_INSTANCE"] = instance
    if job.formation_id is not None:
        # Never through env.allow (child_env drops MURMUR_* names): the launcher hands it on.
        env[FORMATION_ID_ENV] = job.formation_id
    if job.traceparent is not None:
        # The job's span: the child's own spans and its delegations continue its trace.
        env["TRACEPARENT"] = job.traceparent
        env["OTEL_SERVICE_NAME"] = job.name
    if artifact.manifest.entrypoint:
        env.update(capsule_host_env(cfg))
    return StartSpec(
        dir=child_dir(job),
        argv=child_argv(cfg, artifact.manifest, job.workdir, delegated=approval is not None),
        env=env,
        cwd=job.workdir,
        stdin=approval.encode() + b"\n" if approval is not None else b"",
        uid=job.process_uid,
        resources=artifact.manifest.capabilities.resources,
        limits_in_child=bool(artifact.manifest.entrypoint),
        capsule=f"{job.name}@{job.version}",
        instance=instance,
        sha256=job.sha256,
        containment=artifact.manifest.capabilities.containment,
        limits_mode=cfg.resource_limits,
    )
