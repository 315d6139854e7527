"""Daemon configuration: defaults, the TOML file, and validation — kept apart from the CLI.

Precedence: built-in defaults < ``--config`` TOML file < command-line flags. Relative paths in
the TOML file are resolved against the file's own directory, so ``deploy/roost.toml`` works
from any working directory.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from pathlib import Path
from typing import Literal, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from roost.core.ids import allow_entry_problem, identifier_problem
from roost.core.loopback import is_loopback_host
from roost.core.peerauth import PeerAuthEntry

__all__ = [
    "LAUNCHERS",
    "NETWORK_KEYS",
    "Config",
    "ConfigError",
    "LauncherName",
    "RayPlacement",
    "default_max_live_capsules",
    "default_state_dir",
    "load_toml",
    "parse_advertise_url",
    "parse_listen",
]


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message is one sentence naming it."""


LauncherName = Literal["local", "ray"]
"""The process backends, by the ``launcher`` value that picks one (roost/backends/choose.py)."""
LAUNCHERS: tuple[LauncherName, ...] = get_args(LauncherName)


def default_max_live_capsules() -> int:
    """cores × 8 clamped to [16, 256]; 16 when the core count cannot be read (upstream)."""
    cores = os.cpu_count()
    if not cores:
        return 16
    return max(16, min(256, cores * 8))


def default_state_dir() -> Path:
    """``$STATE_DIRECTORY`` under systemd, else ``$HOME/.murmur/roost``."""
    sd = os.environ.get("STATE_DIRECTORY")
    if sd:
        return Path(sd.split(":")[0])
    home = os.environ.get("HOME")
    if not home or not os.path.isabs(home):
        raise ConfigError("--state-dir is required: the home directory could not be resolved")
    return Path(home) / ".murmur" / "roost"


def default_registry_path() -> Path:
    home = os.environ.get("HOME")
    if not home or not os.path.isabs(home):
        raise ConfigError("--registry-path is required")
    return Path(home) / ".murmur" / "artifacts"


class RayPlacement(BaseModel):
    """Where a capsule's children may run on a Ray cluster, beyond what their manifest asks for
    (one entry of the Ray backend's ``ray_placement``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    resources: dict[str, float] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("resources")
    @classmethod
    def _positive(cls, v: dict[str, float]) -> dict[str, float]:
        for name, amount in v.items():
            if not name or amount <= 0:
                raise ValueError(f"resource '{name}' must have a positive amount")
        return v


class Config(BaseModel):
    """Every setting the daemon reads. Field names are the TOML keys (``spawn_allow`` etc.)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    port: int = Field(default=7700, ge=0, le=65535)
    bind: str = "127.0.0.1"
    allow_remote: bool = False
    registry_path: Path = Field(default_factory=default_registry_path)
    registry_name: str = "local"
    """The registry's name: an allow-list entry ``<registry_name>/<name>`` admits ``<name>``
    (roost/core/allownames.py)."""
    spawn_allow: tuple[str, ...] = ()
    max_depth: int = Field(default=3, ge=0, le=1_000)
    max_concurrent: int = Field(default=4, ge=0, le=100_000)
    max_live_capsules: int = Field(default_factory=default_max_live_capsules, ge=0, le=1_000_000)
    state_dir: Path = Field(default_factory=default_state_dir)
    ephemeral_keys: bool = False
    log_format: Literal["json", "console", "auto"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    admin_socket: Path | None = None
    launch_timeout_secs: float = Field(default=180.0, gt=0, le=3600)
    max_starting: int = Field(default=0, ge=0, le=10_000)
    stop_grace_secs: float = Field(default=5.0, gt=0, le=600)
    lifeline_grace_secs: float = Field(default=20.0, gt=0, le=600)
    registry_recheck_secs: float = Field(default=1.0, ge=0, le=3600)
    runtime_command: tuple[str, ...] = ("mur", "run")
    capsule_command: tuple[str, ...] = ()
    header_timeout_secs: float = Field(default=10.0, gt=0, le=3600)
    """A TCP connection that has not sent a complete first request head by then is closed."""
    keepalive_timeout_secs: float = Field(default=15.0, gt=0, le=3600)
    """An idle kept-alive connection (or one trickling its next head) is closed after this."""
    max_connections_per_uid: int = Field(default=1024, ge=1, le=1_000_000)
    """Open TCP connections one uid may hold; more are closed on accept."""
    job_cgroups: Literal["auto", "off"] = "auto"
    """``auto``: a cgroup v2 per job where one can be made; ``off``: always the fallback sweep."""
    launcher_log_max_bytes: int = Field(default=16 * 1024 * 1024, ge=0)
    """A child's ``.murmur/launcher.log`` past this is rotated to ``launcher.log.1`` (0: never)."""
    resource_limits: Literal["enforce", "advisory"] = "enforce"
    """``enforce``: a declared limit this host cannot enforce refuses the launch; ``advisory``: the
    job runs and the limit is listed as not enforced (roost/core/limits.py)."""
    launch_uids: tuple[int, ...] | None = None
    """Loopback uids that may launch a top-level job without a credential (None: the daemon's own)."""
    run_as: str | None = None
    """A user (name or uid) every operator's job runs as instead of root or the daemon's user
    (the sysusers file creates ``mur-roost-jobs``); None: as the operator's own uid."""
    run_as_capsules: dict[str, str] = Field(default_factory=dict)
    """``run_as`` per capsule name, over ``run_as`` for that capsule's operator jobs."""
    peer_fetch_max_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    peer_timeout_secs: float = Field(default=30.0, gt=0, le=3600)
    door_blocking_cap_secs: float = Field(default=120.0, gt=0, le=86400)
    """The longest a capsule host's door holds a blocking send before answering the task as it stands."""
    # Start with a new key although roost.db exists and master.key is gone (revokes everything).
    reset_keys: bool = False
    # Per-uid quotas (docs/operations.md, Per-user quotas); None: three quarters of max_live_capsules.
    uid_max_live_sessions: int | None = Field(default=None, ge=1)
    uid_max_live_jobs: int | None = Field(default=None, ge=1)
    uid_registrations_per_minute: int = Field(default=6000, ge=0)
    # A session roost cannot watch ends this long after its last authenticated call.
    session_lease_secs: float = Field(default=300.0, ge=5, le=30 * 86400)
    # Retention (roost/services/retention.py, docs/operations.md "Retention").
    retention_secs: float = Field(default=7 * 86400.0, gt=0)
    session_memory_secs: float = Field(default=600.0, gt=0)
    retention_sweep_secs: float = Field(default=30.0, gt=0, le=3600)
    # The strongest containment class capsule hosts may offer (None: whatever the host can enforce).
    containment_max: Literal["advisory", "scoped", "sealed"] | None = None
    # Process backend (docs/operations.md "Running with Ray"): "local" spawns on this host.
    launcher: LauncherName = "local"
    # A backend's own section: its keys are named after it (``ray_*``) and only its package reads
    # them, through a typed value of its own (roost/backends/ray/settings.py). They are declared
    # here, with the rest of the one flat [roost] table, so that every key is parsed, defaulted,
    # refused with its sentence and listed (GET /config, deploy/roost.toml) in one place,
    # whichever backend runs; this layer cannot import the backends (docs/architecture.md,
    # "Process backends").
    ray_address: str | None = None
    """Unset: start an embedded local Ray; ``auto`` or ``host:port``: join that cluster."""
    ray_namespace: str = Field(default="mur-roost", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    ray_node_root: Path | None = None
    """Each node keeper's root for child directories and the artifact cache (default: <state_dir>/ray-nodes)."""
    ray_busy_wait_secs: float = Field(default=60.0, gt=0, le=86400)
    """How long a launch waits for a busy cluster to free the resources it asks for."""
    ray_child_cpus: float = Field(default=0.1, gt=0, le=1024)
    """CPUs reserved for a child whose manifest declares no ``cpu_percent``."""
    ray_placement: dict[str, RayPlacement] = Field(default_factory=dict)
    """Per capsule name: extra custom resources (and node labels) its children are placed by."""
    # Other hosts (docs/operations.md, "Network"): an extra listener for them, its TLS, and the
    # URL children on other nodes are given for the daemon. ``bind`` stays the host's listener.
    listen: str | None = None
    """``host:port`` of a listener for other hosts (TLS with tls_cert/tls_key); None: none."""
    advertise_url: str | None = None
    """The daemon's URL as children on other nodes reach it; None: the local URL."""
    tls_cert: Path | None = None
    tls_key: Path | None = None
    allow_plaintext_network: bool = False
    """Serve a non-loopback address without TLS (a private network the operator vouches for)."""
    # Authenticated peers (docs/operations.md, "Authenticated peers"): per peer origin, the
    # schemes the relay may answer a peer's card with; secrets in files the daemon owns.
    peer_auth: tuple[PeerAuthEntry, ...] = ()

    # -- OpenTelemetry traces and the dashboard's trace links (docs/operations.md, "OpenTelemetry
    # traces"). The standard OTEL_* variables by their lower-case names (upper-case works in the
    # file too); a variable set in the daemon's environment wins. Read at start-up.
    otel_exporter_otlp_endpoint: str | None = None
    otel_exporter_otlp_traces_endpoint: str | None = None
    otel_exporter_otlp_headers: str | None = None
    """Secret (API keys): ``GET /config`` shows only whether it is set."""
    otel_exporter_otlp_traces_headers: str | None = None
    """Secret, as ``otel_exporter_otlp_headers``."""
    otel_exporter_otlp_protocol: str | None = None
    otel_exporter_otlp_timeout: int | None = None
    otel_service_name: str | None = None
    otel_resource_attributes: str | None = None
    otel_traces_exporter: str | None = None
    otel_traces_sampler: str | None = None
    otel_traces_sampler_arg: float | None = None
    otel_sdk_disabled: bool | None = None
    otel_bsp_max_queue_size: int | None = None
    otel_bsp_max_export_batch_size: int | None = None
    otel_bsp_schedule_delay: int | None = None
    dashboard_trace_url: str | None = None
    """A URL template for a job's trace in the operator's trace UI; ``{trace_id}`` is replaced
    (e.g. ``http://phoenix:6006/projects/<id>/traces/{trace_id}``)."""

    @field_validator("bind")
    @classmethod
    def _bind(cls, v: str) -> str:
        if v == "localhost":
            return v
        try:
            ipaddress.ip_address(v)
        except ValueError:
            raise ValueError(f"'{v}' is not an IP address") from None
        return v

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str | None) -> str | None:
        if v is not None:
            parse_listen(v)
        return v

    @field_validator("advertise_url")
    @classmethod
    def _advertise(cls, v: str | None) -> str | None:
        return None if v is None else parse_advertise_url(v)

    @field_validator("spawn_allow", mode="before")
    @classmethod
    def _names(cls, v: object) -> object:
        if isinstance(v, str):
            return (v,)
        return v

    @field_validator("spawn_allow")
    @classmethod
    def _entries(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for entry in v:
            problem = allow_entry_problem(entry)
            if problem is not None:
                raise ValueError(f"'{entry}' {problem}")
        return v

    @field_validator("registry_name")
    @classmethod
    def _registry_name(cls, v: str) -> str:
        problem = identifier_problem(v)
        if problem is not None:
            raise ValueError(f"'{v}' {problem}")
        return v

    def is_loopback_bind(self) -> bool:
        return is_loopback_host(self.bind)

    def check(self) -> None:
        """Cross-field rules a type cannot express."""
        if not self.is_loopback_bind() and not self.allow_remote:
            raise ConfigError(
                f"invalid --bind: {self.bind} is not a loopback address; peers and capsules "
                "talk to roost over loopback, so pass --allow-remote to listen beyond this host"
            )
        if (self.tls_cert is None) != (self.tls_key is None):
            given, missing = ("tls_cert", "tls_key") if self.tls_key is None else ("tls_key", "tls_cert")
            raise ConfigError(f"invalid --{missing.replace('_', '-')}: {given} is set, so {missing} must be too")
        if self.tls_cert is not None and self.listen is None:
            raise ConfigError("invalid --tls-cert: TLS serves the network listener, so set listen (host:port) as well")

    @property
    def listen_address(self) -> tuple[str, int] | None:
        """``listen`` as (host, port), or None when there is no network listener."""
        return None if self.listen is None else parse_listen(self.listen)

    @property
    def admin_socket_path(self) -> Path:
        return self.admin_socket or (self.state_dir / "admin.sock")

    @property
    def uid_live_sessions_limit(self) -> int:
        return self.uid_max_live_sessions or max(1, self.max_live_capsules * 3 // 4)

    @property
    def uid_live_jobs_limit(self) -> int:
        return self.uid_max_live_jobs or max(1, self.max_live_capsules * 3 // 4)

    @property
    def db_path(self) -> Path:
        return self.state_dir / "roost.db"

    def public(self) -> dict[str, object]:
        """The effective configuration as JSON-safe data; an OTLP exporter's headers (API keys)
        are shown only as set or not."""
        out = self.model_dump(mode="json")
        for key in SECRET_KEYS:
            if out.get(key) is not None:
                out[key] = "(set)"
        return out

    def otel_file_settings(self) -> dict[str, object]:
        """The ``otel_*`` settings that are set, by name (for :func:`roost.observe.otelmap.otel_settings`)."""
        return {k: v for k, v in self.model_dump().items() if k.startswith("otel_") and v is not None}


_TOML_KEYS = set(Config.model_fields)
SECRET_KEYS = ("otel_exporter_otlp_headers", "otel_exporter_otlp_traces_headers")
NETWORK_KEYS = ("listen", "advertise_url", "tls_cert", "tls_key", "allow_plaintext_network")
"""Settings a reload keeps until the next restart (the listener is bound once)."""
_PATH_KEYS = {"registry_path", "state_dir", "admin_socket", "tls_cert", "tls_key", "ray_node_root"}


def parse_listen(text: str) -> tuple[str, int]:
    """``host:port`` (IPv6 in brackets) with an IP address for host; ValueError with a sentence."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"'{text}' is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"'{text}': an IPv6 address goes in brackets, as [::]:7443")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"'{host}' is not an IP address") from None
    if not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"'{port_text}' is not a port (0..65535)")
    return host, int(port_text)


def parse_advertise_url(text: str) -> str:
    """``http(s)://host[:port]`` without path, query or user info; the trailing ``/`` dropped."""
    url = text.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"'{text}' is not an http:// or https:// URL with a host")
    if parts.username or parts.password or parts.path or parts.query or parts.fragment:
        raise ValueError(f"'{text}' must be scheme://host[:port] only (no path, query or user info)")
    try:
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError:
        raise ValueError(f"'{text}' has an invalid port") from None
    return url


def load_toml(path: Path) -> dict[str, object]:
    """Read a TOML config file into a mapping of Config fields, resolving relative paths."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read --config {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"invalid --config {path}: {exc}") from None
    section = data.get("roost", data)
    if not isinstance(section, dict):
        raise ConfigError(f"invalid --config {path}: [roost] must be a table")
    out: dict[str, object] = {}
    base = path.resolve().parent
    for key, value in section.items():
        norm = key.replace("-", "_")
        if norm.startswith("OTEL_"):
            norm = norm.lower()
        if norm not in _TOML_KEYS:
            raise ConfigError(f"invalid --config {path}: unknown setting '{key}'")
        if norm in _PATH_KEYS and isinstance(value, str):
            value = str((base / os.path.expanduser(value)).resolve()) if value else value
        out[norm] = value
    return out


def build_config(values: dict[str, object], from_file: dict[str, Path] | None = None) -> Config:
    """Validate merged settings into a Config, with one sentence on the first bad value.

    ``from_file`` maps the settings that came from a config file to that file, so the sentence
    names the file and the key (``port = "seventy"`` is not blamed on a ``--port`` never given).
    """
    try:
        cfg = Config.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "config"
        msg = str(err["msg"]).removeprefix("Value error, ")
        source = (from_file or {}).get(key)
        if source is not None:
            raise ConfigError(f"invalid setting '{key}' in {source}: {msg} (got {values.get(key)!r})") from None
        raise ConfigError(f"invalid --{key.replace('_', '-')}: {msg}") from None
    cfg.check()
    return cfg
