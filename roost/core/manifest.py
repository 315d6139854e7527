"""The capsule manifest (``murmur.yaml``) as the daemon reads it.

Only the fields the daemon acts on are modelled; everything else in a manifest is accepted
and ignored, because real Murmur manifests carry many keys (inference, hooks, tools) that are
the runtime's business. Fields that *are* modelled are strict about their types: a manifest
whose ``capabilities.network.allow`` is a string instead of a list is refused, never guessed.

Parsing never resolves ``${VAR}`` secrets, so the daemon needs no provider key (upstream era G).

``capabilities.filesystem.scope`` and ``read_only`` must be relative paths inside the workdir
(E-CAP-002): checked here, where a manifest is first read (packing it into a registry, reading
it back out of one), so such a capsule is refused before it is published or launched, whatever
containment class a host would reach for it.
"""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = [
    "CONTAINMENT_ORDER",
    "Capabilities",
    "Containment",
    "Manifest",
    "ManifestError",
    "outside_workdir",
    "parse_byte_count",
    "parse_duration_secs",
    "parse_manifest",
    "scope_refusal",
]

Containment = Literal["advisory", "scoped", "sealed"]
CONTAINMENT_ORDER: dict[str, int] = {"advisory": 0, "scoped": 1, "sealed": 2}

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_VERSION_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$")
_DURATION_RE = re.compile(r"^([0-9]+)([smh]?)$")
_BYTES_RE = re.compile(r"^([0-9]+)(Ki|Mi|Gi)?$")


class ManifestError(ValueError):
    """A manifest that cannot be read or does not satisfy the model; the message is one sentence."""


def parse_duration_secs(value: object) -> int:
    """Integer seconds, or a string of digits with an optional ``s``/``m``/``h`` suffix; > 0."""
    if isinstance(value, bool):
        raise ValueError("must be a duration: an integer, optionally suffixed s/m/h")
    if isinstance(value, int):
        secs = value
    elif isinstance(value, str):
        m = _DURATION_RE.match(value.strip())
        if not m:
            raise ValueError("must be a duration: an integer, optionally suffixed s/m/h")
        secs = int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    else:
        raise ValueError("must be a duration: an integer, optionally suffixed s/m/h")
    if secs <= 0:
        raise ValueError("must be a duration greater than zero")
    return secs


def parse_byte_count(value: object) -> int:
    """Integer bytes, or digits with a ``Ki``/``Mi``/``Gi`` suffix; > 0."""
    if isinstance(value, bool):
        raise ValueError("must be a byte count, optionally suffixed Ki/Mi/Gi")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str):
        m = _BYTES_RE.match(value.strip())
        if not m:
            raise ValueError("must be a byte count, optionally suffixed Ki/Mi/Gi")
        n = int(m.group(1)) * {None: 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}[m.group(2)]
    else:
        raise ValueError("must be a byte count, optionally suffixed Ki/Mi/Gi")
    if n <= 0:
        raise ValueError("must be a byte count greater than zero")
    return n


def _string_list(value: object) -> object:
    if value is None:
        return []
    return value


StrList = Annotated[list[str], BeforeValidator(_string_list)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, strict=False)


def _destinations(entries: list[str]) -> list[str]:
    from roost.core.netrule import NetworkAllowRule

    for entry in entries:
        if NetworkAllowRule.parse(entry) is None:
            raise ValueError(
                f"'{entry}' is not a network destination (a bare host, host:port, or an http(s) URL with no path)"
            )
    return entries


class NetworkCaps(_Model):
    allow: StrList = Field(default_factory=list)
    unix_sockets: bool = False

    @field_validator("allow")
    @classmethod
    def _allow(cls, v: list[str]) -> list[str]:
        return _destinations(v)


class AllowList(_Model):
    allow: StrList = Field(default_factory=list)


class DestinationList(_Model):
    allow: StrList = Field(default_factory=list)

    @field_validator("allow")
    @classmethod
    def _allow(cls, v: list[str]) -> list[str]:
        return _destinations(v)


class FilesystemCaps(_Model):
    scope: str | None = None
    workdir_exec: bool = False
    # Subtrees of the workdir the capsule may read but not change (relative paths).
    read_only: StrList = Field(default_factory=list)


class InstallCaps(_Model):
    skill: StrList = Field(default_factory=list)
    tool: StrList = Field(default_factory=list)


class ResourceCaps(BaseModel):
    """``capabilities.resources``: per-job limits, enforced by the limits policy (roost/core/limits.py).

    The seeds' names are the fields (``cpu_seconds``, ``max_file_size_bytes``,
    ``cgroup_memory_bytes``, ``cgroup_pids_max``); the project's own ``memory_bytes`` and
    ``max_processes`` are documented aliases of the last two (declaring both with different
    values is refused). A key this daemon does not know is kept (``model_extra``): packing or
    adding such a capsule to the registry refuses it, a spawn reports it as not enforced.
    """

    model_config = ConfigDict(extra="allow", frozen=True, strict=False)

    cpu_seconds: int | None = Field(default=None, gt=0)
    max_file_size_bytes: int | None = Field(default=None, gt=0)
    max_open_files: int | None = Field(default=None, gt=0)
    address_space_bytes: int | None = Field(default=None, gt=0)
    cgroup_memory_bytes: int | None = Field(default=None, gt=0)
    """The job's memory limit (cgroup ``memory.max``, or a v1 ``memory.limit_in_bytes``)."""
    cgroup_pids_max: int | None = Field(default=None, gt=0)
    """The most processes and threads the job may hold at once (cgroup ``pids.max``)."""
    max_processes: int | None = Field(default=None, gt=0)
    """Alias of ``cgroup_pids_max``."""
    memory_bytes: int | None = Field(default=None, gt=0)
    """Alias of ``cgroup_memory_bytes``."""
    cpu_percent: int | None = Field(default=None, gt=0, le=100_000)
    """The job's CPU bandwidth as a percentage of one CPU (cgroup ``cpu.max``)."""
    max_workdir_bytes: int | None = Field(default=None, gt=0)
    """What a script capsule's job may hold in its workdir, measured while a task runs and
    enforced by stopping it (eventually: roost/capsule/writecap.py)."""

    @field_validator(
        "max_file_size_bytes",
        "address_space_bytes",
        "memory_bytes",
        "cgroup_memory_bytes",
        "max_workdir_bytes",
        mode="before",
    )
    @classmethod
    def _bytes(cls, v: object) -> object:
        return None if v is None else parse_byte_count(v)

    @model_validator(mode="after")
    def _aliases(self) -> ResourceCaps:
        for seed, alias in (("cgroup_memory_bytes", "memory_bytes"), ("cgroup_pids_max", "max_processes")):
            a, b = getattr(self, seed), getattr(self, alias)
            if a is not None and b is not None and a != b:
                raise ValueError(f"{alias} is an alias of {seed}, and the two declare different values ({b} and {a})")
        return self

    @property
    def memory_limit(self) -> int | None:
        """The declared memory limit (``cgroup_memory_bytes``, or its alias ``memory_bytes``)."""
        return self.cgroup_memory_bytes if self.cgroup_memory_bytes is not None else self.memory_bytes

    @property
    def pids_limit(self) -> int | None:
        """The declared process limit (``cgroup_pids_max``, or its alias ``max_processes``)."""
        return self.cgroup_pids_max if self.cgroup_pids_max is not None else self.max_processes

    @property
    def unknown_keys(self) -> list[str]:
        """Keys of ``capabilities.resources`` this daemon does not know, sorted."""
        return sorted(str(k) for k in (self.model_extra or {}))


class StateCaps(_Model):
    store: str | None = None


class Capabilities(_Model):
    network: NetworkCaps = Field(default_factory=NetworkCaps)
    peer_fetch: DestinationList = Field(default_factory=DestinationList)
    shell: AllowList = Field(default_factory=AllowList)
    spawn: AllowList = Field(default_factory=AllowList)
    env: AllowList = Field(default_factory=AllowList)
    filesystem: FilesystemCaps = Field(default_factory=FilesystemCaps)
    install: InstallCaps = Field(default_factory=InstallCaps)
    containment: Containment = "advisory"
    resources: ResourceCaps = Field(default_factory=ResourceCaps)


class ArtifactCaps(_Model):
    state: StateCaps | None = None


class ArtifactRef(_Model):
    """A tool/skill/hook/driver artifact the capsule bundles; only its state store matters here."""

    name: str
    capabilities: ArtifactCaps = Field(default_factory=ArtifactCaps)

    def state_store(self) -> str | None:
        """The store this artifact opens: its declared ``store``, else one named after itself."""
        if self.capabilities.state is None:
            return None
        return self.capabilities.state.store or self.name


class Lifecycle(_Model):
    after_task: Literal["exit", "sleep"] = "exit"
    delegation_deadline_secs: int = Field(default=600, gt=0)
    task_acceptance: Literal["single", "queue", "none"] = "queue"
    queue_depth: int = Field(default=16, ge=1, le=10_000)

    @field_validator("delegation_deadline_secs", mode="before")
    @classmethod
    def _deadline(cls, v: object) -> object:
        return parse_duration_secs(v)


class FilesExport(_Model):
    root: str


class PeerFilesExport(_Model):
    root: str
    max_ttl: int = 3600
    max_bytes: int = 10 * 1024 * 1024

    @field_validator("root")
    @classmethod
    def _root(cls, v: str) -> str:
        if not v.strip() or v.startswith("/") or ".." in v.split("/") or "\x00" in v:
            raise ValueError("must be a relative path inside the workdir")
        return v

    @field_validator("max_ttl", mode="before")
    @classmethod
    def _ttl(cls, v: object) -> object:
        return parse_duration_secs(v)

    @field_validator("max_bytes", mode="before")
    @classmethod
    def _bytes(cls, v: object) -> object:
        return parse_byte_count(v)


class PeerTasksExport(_Model):
    accept: bool = True


class Exports(_Model):
    files: FilesExport | None = None
    peer_files: PeerFilesExport | None = None
    peer_tasks: PeerTasksExport = Field(default_factory=PeerTasksExport)


class Observability(_Model):
    otel_endpoint: str | None = None
    """OTLP/HTTP base URL a runtime posts its spans to (``<otel_endpoint>/v1/traces``); None: none."""

    @field_validator("otel_endpoint")
    @classmethod
    def _endpoint(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return v


class Manifest(_Model):
    """What the daemon reads of a ``murmur.yaml``."""

    name: str
    version: str
    description: str | None = None
    entrypoint: list[str] | None = None
    capabilities: Capabilities = Field(default_factory=Capabilities)
    lifecycle: Lifecycle = Field(default_factory=Lifecycle)
    exports: Exports = Field(default_factory=Exports)
    observability: Observability = Field(default_factory=Observability)
    tools: list[ArtifactRef] = Field(default_factory=list)
    skills: list[ArtifactRef] = Field(default_factory=list)
    hooks: list[ArtifactRef] = Field(default_factory=list)
    artifacts: list[ArtifactRef] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("must be lowercase letters, digits, '.', '_' or '-' (at most 64)")
        return v

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, v: object) -> object:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            v = str(v)
        if not isinstance(v, str) or not _VERSION_RE.match(v):
            raise ValueError("must be a version string such as 0.1.0")
        return v

    @field_validator("entrypoint", mode="before")
    @classmethod
    def _entrypoint(cls, v: object) -> object:
        if v is None:
            return None
        if isinstance(v, str):
            raise ValueError("must be a list of words (an argv), not a shell string")
        if not isinstance(v, list) or not v or not all(isinstance(w, str) and w for w in v):
            raise ValueError("must be a non-empty list of non-empty strings")
        return v

    @property
    def coordinates(self) -> str:
        return f"{self.name}@{self.version}"

    def state_stores(self) -> frozenset[str]:
        """Every state store an artifact of this capsule opens (envelope axis 9)."""
        stores: set[str] = set()
        for art in (*self.tools, *self.skills, *self.hooks, *self.artifacts):
            s = art.state_store()
            if s is not None:
                stores.add(s)
        return frozenset(stores)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "manifest"
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    return f"{loc}: {msg}"


def _relative_inside(entry: str) -> bool:
    if not entry or os.path.isabs(entry) or "\x00" in entry:
        return False
    depth = 0
    for part in PurePosixPath(entry).parts:
        if part == "..":
            depth -= 1
            if depth < 0:
                return False
        elif part not in ("", "."):
            depth += 1
    return True


def outside_workdir(manifest: Manifest) -> str | None:
    """The first ``filesystem.scope``/``read_only`` entry that is not a relative path inside the
    workdir (E-CAP-002), or None."""
    fs = manifest.capabilities.filesystem
    for entry in ([fs.scope] if fs.scope is not None else []) + list(fs.read_only):
        if not _relative_inside(entry):
            return entry
    return None


def scope_refusal(manifest: Manifest, bad: str) -> str:
    """The E-CAP-002 sentence for a filesystem path outside the workdir."""
    return (
        f"E-CAP-002: {manifest.coordinates} declares the filesystem path '{bad}', which is not a relative "
        "path inside the workdir, so its containment cannot be drawn"
    )


def parse_manifest(text: str | bytes) -> Manifest:
    """Parse ``murmur.yaml`` text into a :class:`Manifest`; raise :class:`ManifestError` with one sentence."""
    try:
        data: object = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ManifestError(f"murmur.yaml is not valid YAML: {exc}".replace("\n", " ")) from None
    if not isinstance(data, dict):
        raise ManifestError("murmur.yaml must be a mapping with at least 'name' and 'version'")
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        raise ManifestError(_first_error(exc)) from None
    bad = outside_workdir(manifest)
    if bad is not None:
        raise ManifestError(scope_refusal(manifest, bad))
    return manifest
