"""The Ray backend's section of the configuration: its ``ray_*`` keys as one typed value.

Why its own module: the keys are parsed, defaulted and refused with the rest of the daemon's one
flat ``[roost]`` table (roost/state/config.py: the layer below cannot import this package), but
they are Ray's alone. Nothing outside this package reads them; the backend reads them only here,
as :class:`RaySettings`, so what each key means (the node root's default, say) is said once.
Imports no Ray.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from roost.state.config import Config, RayPlacement

__all__ = ["RaySettings"]


@dataclass(frozen=True, slots=True)
class RaySettings:
    """The ``ray_*`` keys of one configuration (docs/operations.md, "Running with Ray").

    * ``address`` (``ray_address``) — None: an embedded Ray of the daemon's own; ``auto`` or
      ``host:port``: join that cluster. ``namespace`` (``ray_namespace``) — where the keepers and
      the placement groups live. ``node_root`` (``ray_node_root``, else
      ``<state_dir>/ray-nodes``) — each node keeper's root. These three need a restart.
    * ``busy_wait_secs``, ``child_cpus``, ``placement`` (``ray_busy_wait_secs``,
      ``ray_child_cpus``, ``ray_placement``) — read from the configuration in force at each
      launch (a reload changes them).
    """

    address: str | None
    namespace: str
    node_root: Path
    busy_wait_secs: float
    child_cpus: float
    placement: Mapping[str, RayPlacement]

    @classmethod
    def of(cls, config: Config) -> RaySettings:
        return cls(
            address=config.ray_address,
            namespace=config.ray_namespace,
            node_root=config.ray_node_root or (config.state_dir / "ray-nodes"),
            busy_wait_secs=config.ray_busy_wait_secs,
            child_cpus=config.ray_child_cpus,
            placement=config.ray_placement,
        )
