"""The backend the configuration asks for: its package imported when asked for, its services built.

Each process backend is a package that builds its own services (``bundle(needs)`` in the
module named below, roost/backends/bundle.py). Only the asked-for package is imported, and only
here, the way a server picks its worker class: a daemon that never asks for Ray never imports it
(nor needs the ``[ray]`` extra installed). Adding a backend is one package and one line in
:data:`BACKENDS` (docs/architecture.md, "Process backends").
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import cast

from roost.backends.bundle import BackendNeeds, BackendServices, Bundler
from roost.state.config import ConfigError, LauncherName

__all__ = ["BACKENDS", "Backend", "choose_backend"]


@dataclass(frozen=True, slots=True)
class Backend:
    """Where a backend's ``bundle`` function lives, and the extra (``pip install
    'mur-roost[<extra>]'``) its imports need, if any."""

    module: str
    extra: str | None = None


BACKENDS: dict[LauncherName, Backend] = {
    "local": Backend("roost.backends.local.bundle"),
    "ray": Backend("roost.backends.ray.bundle", extra="ray"),
}
"""Every backend by its ``launcher`` name."""


def _bundler(name: LauncherName) -> Bundler:
    backend = BACKENDS[name]
    try:
        module = import_module(backend.module)
    except ImportError as exc:
        if backend.extra is None:
            raise
        raise ConfigError(
            f'launcher = "{name}" needs the {backend.extra.capitalize()} extra, which is not installed '
            f"({exc.name or exc}): pip install 'mur-roost[{backend.extra}]'"
        ) from None
    return cast(Bundler, module.bundle)


def choose_backend(needs: BackendNeeds) -> BackendServices:
    """The services of the backend ``needs.config.launcher`` names, built from ``needs``."""
    return _bundler(needs.config.launcher)(needs)
