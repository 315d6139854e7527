"""Every check that can refuse a ``roost-capsule run`` launch, before any session exists.

Why this order: everything that can refuse the launch (``MURMUR_SPAWNER``, the lifeline, the
artifact, the approval, then the containment floor) is checked before ``session_start`` is
written, so a refused launch leaves an empty trace and no session. Registration, the last check,
needs the door bound first and so runs with the session (:mod:`roost.capsule.daemonlink`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from roost.capsule.entrypoint import EntrypointError, resolve_argv
from roost.capsule.interpreters import Unrunnable, unrunnable_sentence
from roost.capsule.interpreters import resolve as resolve_command
from roost.capsule.lifeline import ENV as LIFELINE_ENV
from roost.capsule.lifeline import LifelineError, lifeline_refusal, take_lifeline
from roost.capsule.probe import Decision, HostProbe, decide, probe_host, refusal
from roost.core.completion import SpawnerHandle, SpawnerHandleError
from roost.core.formation import FORMATION_ID_ENV, env_refusal, formation_problem
from roost.core.ids import session_id as mint_session_id
from roost.core.manifest import Manifest, outside_workdir, scope_refusal
from roost.observe.tracelines import TRACE_FILE, records_dir
from roost.state.registry import Registry
from roost.state.registry.errors import RegistryError

__all__ = [
    "ContainmentRefused",
    "LaunchRefused",
    "Prepared",
    "RunOptions",
    "prepare",
    "register_refusal",
    "say",
    "spawner_refusal",
]


class LaunchRefused(Exception):
    """The launch is refused before any session exists; the message is one sentence."""


class ContainmentRefused(LaunchRefused):
    """E-CAP-003: the declared containment floor is above what this host can enforce."""

    def __init__(self, message: str, prepared: Prepared) -> None:
        super().__init__(message)
        self.prepared = prepared


def spawner_refusal(reason: str) -> str:
    return (
        f"MURMUR_SPAWNER does not carry a readable spawner handle: {reason}; a delegated child must be able "
        "to tell its spawner that it finished, so the launch is refused rather than run unreportable"
    )


def register_refusal(url: str, reason: str) -> str:
    return (
        f"failed to register this session with mur-roost at {url}: {reason}; a capsule declaring "
        "capabilities.spawn.allow must be known to the daemon that referees its spawns, so the launch is "
        "refused rather than run unrefereed"
    )


@dataclass(frozen=True, slots=True)
class RunOptions:
    name: str
    version: str
    workdir: Path
    json: bool = False
    spawn_grant_stdin: bool = False
    registry_path: Path | None = None


@dataclass(slots=True)
class Prepared:
    opts: RunOptions
    manifest: Manifest
    workdir: Path
    session_id: str
    records: Path
    argv: list[str]
    handle: SpawnerHandle | None
    lifeline_fd: int | None
    approval: str | None
    roost_url: str | None
    started_mono: float
    probe: HostProbe
    decision: Decision
    formation_id: str | None = None


def _registry_root(opts: RunOptions) -> Path:
    if opts.registry_path is not None:
        return opts.registry_path
    env = os.environ.get("MURMUR_REGISTRY_PATH", "").strip()
    if env:
        return Path(env)
    return Path.home() / ".murmur" / "artifacts"


def prepare(opts: RunOptions) -> Prepared:
    """Every check that can refuse the launch, in upstream order (blocking, before the loop)."""
    started = time.monotonic()
    probe = probe_host()  # forks: before any thread or event loop exists
    raw_handle = os.environ.get("MURMUR_SPAWNER", "")
    handle: SpawnerHandle | None = None
    if raw_handle.strip():
        try:
            handle = SpawnerHandle.parse(raw_handle)
        except SpawnerHandleError as exc:
            raise LaunchRefused(spawner_refusal(str(exc))) from None
    formation = os.environ.get(FORMATION_ID_ENV, "").strip() or None
    if formation is not None:
        problem = formation_problem(formation)
        if problem is not None:
            raise LaunchRefused(env_refusal(problem))
    try:
        fd = take_lifeline(os.environ.get(LIFELINE_ENV))
    except LifelineError as exc:
        raise LaunchRefused(lifeline_refusal(str(exc))) from None
    workdir = opts.workdir.absolute()
    try:
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LaunchRefused(f"cannot use the workdir {workdir}: {exc.strerror or exc}") from None
    registry = Registry(_registry_root(opts))
    try:
        artifact = registry.resolve(opts.name, opts.version)
    except RegistryError as exc:
        raise LaunchRefused(str(exc)) from None
    manifest = artifact.manifest
    if not manifest.entrypoint:
        raise LaunchRefused(
            f"{artifact.coordinates} declares no entrypoint, so roost-capsule cannot run it; "
            "a capsule without one runs under its own runtime (mur run)"
        )
    approval: str | None = None
    if opts.spawn_grant_stdin:
        approval = sys.stdin.readline().strip() or None
        if approval is None:
            raise LaunchRefused("--spawn-grant-stdin was given but stdin carried no spawn approval line")
    sid = mint_session_id()
    records = records_dir(workdir, sid)
    records.mkdir(parents=True, mode=0o700)
    (records / TRACE_FILE).touch(mode=0o600)  # a refused launch still leaves an (empty) trace
    unpacked = records / "artifact"
    try:
        registry.extract(artifact, unpacked)
        argv = resolve_argv(manifest.entrypoint, unpacked)
    except (RegistryError, EntrypointError) as exc:
        raise LaunchRefused(str(exc)) from None
    url = os.environ.get("MURMUR_ROOST_URL", "").strip().rstrip("/") or None
    caps = manifest.capabilities
    decision = decide(probe, caps.containment, workdir_exec=caps.filesystem.workdir_exec)
    prepared = Prepared(
        opts, manifest, workdir, sid, records, argv, handle, fd, approval, url, started, probe, decision, formation
    )
    if not decision.floor_met:
        raise ContainmentRefused(refusal(manifest.coordinates, decision), prepared)
    if decision.achieved != "advisory":
        # A shim runs its manager's own scripts, which the class does not grant: run what it
        # would start instead (roost/capsule/interpreters.py), or refuse before anything runs.
        try:
            resolved = resolve_command(argv[0], os.environ.get("PATH", os.defpath))
        except Unrunnable as exc:
            raise LaunchRefused(unrunnable_sentence(manifest.entrypoint[0], exc, decision.achieved)) from None
        if resolved is not None and resolved.via is not None:
            prepared.argv = [resolved.run, *argv[1:]]
    # Parsing refuses such a manifest already (roost/core/manifest.py); kept for a manifest that
    # reached here another way, before any containment is drawn from it.
    bad = outside_workdir(manifest) if decision.achieved != "advisory" else None
    if bad is not None:
        raise LaunchRefused(scope_refusal(manifest, bad))
    return prepared


def say(text: str) -> None:
    """One line on stderr, as ``roost-capsule: ...``; a closed stderr is no reason to fail."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"roost-capsule: {text}\n")
        sys.stderr.flush()


def door_note(status: int, error: str) -> None:
    """A listener of this capsule answered a request it could not serve: one line, no bytes of it."""
    say(f"answered a request it could not serve with HTTP {status} ({error})")
