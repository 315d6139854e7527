"""The configuration in force and the capsule registry it names; :meth:`Settings.reload` swaps both.

Why a holder: SIGHUP and ``POST /reload`` change settings under running services. Each service
holds this object and reads :attr:`Settings.config` when it needs a value, so a reload is one
swap here and nothing else is rewired. Settings that need a restart (listeners, state) are kept
from the running configuration and reported instead. docs/operations.md ("Reload").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import structlog

from roost.core.admin_models import ReloadAnswer
from roost.state.config import NETWORK_KEYS, Config, ConfigError
from roost.state.registry import Registry
from roost.system.blocking import BlockingExecutor

__all__ = ["RESTART_ONLY", "Settings", "merge"]

log = structlog.get_logger("roost.admin")

# Settings a running daemon cannot take over without rebinding or reopening state, or without
# building another process backend (the backend and its cluster connection are made once).
RESTART_ONLY = (
    "port",
    "bind",
    "allow_remote",
    "state_dir",
    "ephemeral_keys",
    "admin_socket",
    *NETWORK_KEYS,
    "launcher",
    "ray_address",
    "ray_namespace",
    "ray_node_root",
    *(k for k in Config.model_fields if k.startswith("otel_")),  # the exporter is built at start-up
    "peer_auth",  # the relay's credentials are read once, at start-up
)


def merge(old: Config, new: Config) -> tuple[Config, list[str]]:
    """The new config with restart-only settings kept from the old one; names of those that differ."""
    kept = [k for k in RESTART_ONLY if getattr(old, k) != getattr(new, k)]
    if not kept:
        return new, []
    values = new.model_dump()
    for k in kept:
        values[k] = getattr(old, k)
    return Config.model_validate(values), kept


class Settings:
    """The live :class:`Config` and :class:`Registry`; ``loader`` re-reads the config file (None:
    nothing to re-read, as for a daemon built in-process)."""

    def __init__(
        self,
        config: Config,
        *,
        executor: BlockingExecutor,
        loader: Callable[[], Config] | None = None,
        configure_logs: Callable[[str, str], None] | None = None,
    ) -> None:
        self._config = config
        # Given by the composition root (the structlog set-up lives with observation): called with
        # (log_format, log_level) when a reload changes either.
        self._configure_logs = configure_logs
        self._registry = Registry(config.registry_path)
        self._executor = executor
        self.loader = loader
        # Called after every reload (resolve caches built from the old registry are dropped).
        self.on_reload: list[Callable[[], None]] = []
        # Reloads run one at a time: each merges onto the configuration the one before it installed.
        self._reloading = asyncio.Lock()

    @property
    def config(self) -> Config:
        return self._config

    @property
    def registry(self) -> Registry:
        return self._registry

    async def forget_registry_caches(self) -> None:
        """Drop what was resolved from the registry (after ``roostctl registry add``)."""
        for hook in list(self.on_reload):
            hook()
        await self._executor.run(self._registry.clear_cache)

    async def reload(self) -> ReloadAnswer:
        """Re-read the config file and forget registry caches; running sessions and jobs are untouched."""
        async with self._reloading:
            return await self._reload()

    async def _reload(self) -> ReloadAnswer:
        changed: list[str] = []
        needs_restart: list[str] = []
        error: str | None = None
        if self.loader is not None:
            try:
                fresh = await self._executor.run(self.loader)
            except ConfigError as exc:
                error = str(exc)
                log.error("reload_failed", error=error)
            else:
                merged, needs_restart = merge(self._config, fresh)
                changed = [k for k in Config.model_fields if getattr(merged, k) != getattr(self._config, k)]
                if "registry_path" in changed:
                    self._registry = Registry(merged.registry_path)
                self._config = merged
                if ("log_level" in changed or "log_format" in changed) and self._configure_logs is not None:
                    self._configure_logs(merged.log_format, merged.log_level)
        with contextlib.suppress(Exception):
            await self.forget_registry_caches()
        log.info("reloaded", changed=",".join(changed), needs_restart=",".join(needs_restart), failed=error is not None)
        out: ReloadAnswer = {"reloaded": error is None, "changed": changed, "needs_restart": needs_restart}
        if error is not None:
            out["error"] = error
        return out
