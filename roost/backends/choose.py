"""The process backend the configuration asks for: the local one, or Ray's.

Ray is imported only here and only for ``launcher = "ray"``, so a daemon that never asks for
it never loads it (nor needs the ``[ray]`` extra installed).
"""

from __future__ import annotations

from collections.abc import Callable

from roost.backends.base import ProcessBackend
from roost.backends.local.backend import LocalBackend
from roost.state.config import Config, ConfigError
from roost.system.blocking import BlockingExecutor

__all__ = ["process_backend"]


def process_backend(
    config: Config,
    executor: BlockingExecutor,
    *,
    daemon_url: Callable[[], str] | None = None,
    keeper_token: Callable[[str], str] | None = None,
    live: Callable[[], Config] | None = None,
) -> ProcessBackend:
    """``daemon_url`` (the URL other nodes reach the daemon at) and ``keeper_token`` (a node
    keeper's token for ``GET /artifacts/{sha256}``) are what Ray's node keepers fetch with."""
    if config.launcher != "ray":
        return LocalBackend(
            executor, state_dir=config.state_dir, job_cgroups=config.job_cgroups, max_starting=config.max_starting
        )
    try:
        from roost.backends.ray.backend import RayBackend
    except ImportError as exc:
        raise ConfigError(
            f'launcher = "ray" needs the Ray extra, which is not installed ({exc.name or exc}): '
            "pip install 'mur-roost[ray]'"
        ) from None
    return RayBackend(config, executor, daemon_url=daemon_url, keeper_token=keeper_token, live=live)
